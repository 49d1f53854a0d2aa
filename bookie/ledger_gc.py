"""The bookie's ledger garbage collector: it deletes the ledgers the metadata no longer has
(BookKeeper's ScanAndCompareGarbageCollector).

A ledger's deletion (`bookie.ledgers.LedgerManager.delete`) marks its row DELETING, asks every
bookie of the ledger to delete it, and deletes the row even when some bookie could not be
reached: an open or a trim never waits for a bookie that is down, perhaps for ever. Such a
bookie reclaims the space itself, here, when it is back: every `interval_s` it compares the
ledgers it holds with the metadata store and deletes each one whose row is gone or DELETING.

Why this never deletes a live ledger:
- The bookie's own list is taken *before* the metadata is read. A ledger's row is created
  (committed) before any bookie hears of the ledger, so a ledger in the bookie's list had its
  row before the metadata was read: a row missing from that later read was deleted, not "not
  yet visible". A ledger created meanwhile is not in the bookie's list and waits for the next pass.
- Each candidate is read again by itself just before it is deleted (BookKeeper's
  `verifyMetadataOnGc`), so a listing that missed a row by mistake deletes nothing.
- A ledger whose id lies above every ledger id the store has ever shown is not the store's to
  judge (the bookie was pointed at another store, or the store was reset): kept. A store that
  holds no ledger at all therefore deletes nothing.
A pass that cannot reach the store deletes nothing and is tried again at the next interval.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging

from bookie.ledger_metadata import LedgerMetadataStore, LedgerState, MetadataError, NotFoundError
from bookie.metadata_calls import call_store
from bookie.storage.api import LedgerStorageApi

log = logging.getLogger(__name__)


class LedgerGarbageCollector:
    """Runs `collect` every `interval_s` seconds once started (0: never; `collect` by hand)."""

    def __init__(self, storage: LedgerStorageApi, store: LedgerMetadataStore, interval_s: float) -> None:
        self.storage = storage
        self.store = store
        self.interval_s = interval_s
        self.deleted = 0  # ledgers deleted by this collector, for stats and tests
        self._task: asyncio.Task[None] | None = None

    async def collect(self) -> list[int]:
        """One pass (module docstring); the ids of the ledgers it deleted."""
        held = self.storage.ledger_ids()  # first: see the module docstring
        if not held:
            return []
        rows = await call_store(self.store.list_ledgers)
        live = {m.ledger_id for m in rows if m.state != LedgerState.DELETING}
        highest = max((m.ledger_id for m in rows), default=-1)
        deleted: list[int] = []
        for ledger_id in sorted(held):
            if ledger_id in live or ledger_id > highest:
                continue
            if await self._gone(ledger_id):
                await self.storage.delete_ledger(ledger_id)
                deleted.append(ledger_id)
        if deleted:
            self.deleted += len(deleted)
            log.info("ledger garbage collector: deleted ledgers %s (gone from the metadata)", deleted)
        return deleted

    async def _gone(self, ledger_id: int) -> bool:
        try:
            meta = await call_store(self.store.get_ledger, ledger_id)
        except NotFoundError:
            return True
        return meta.state == LedgerState.DELETING

    def start(self) -> None:
        if self.interval_s > 0 and self._task is None:
            self._task = asyncio.get_running_loop().create_task(self._loop())

    async def _loop(self) -> None:
        while True:
            await asyncio.sleep(self.interval_s)
            try:
                await self.collect()
            except (MetadataError, OSError) as exc:  # the store may come back: try next time
                log.warning("ledger garbage collector: pass skipped: %s", exc)
            except Exception:  # one bad pass must not end the collector
                log.exception("ledger garbage collector: pass failed")

    async def close(self) -> None:
        if self._task is None:
            return
        self._task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await self._task
        self._task = None
