"""One run's hold on its topic's compaction state: every write of the run goes through it.

The run keeps the state it wrote last; each write is a compare-and-set on that version, made only
while the lease still holds by this process's clock. A write that loses the CAS (another process
recorded the lapsed lease as ERROR, or took the state over) or that finds the lease run out
marks the lease lost for good: the run may clean up after itself but records nothing more.
The heartbeat renews the lease every quarter of its length while the run goes on.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from dataclasses import replace
from typing import Any

from bookie.metadata_calls import call_store
from compactor.errors import LeaseLostError
from managed_ledger.clock import Clock
from managed_ledger.metadata.api import (
    BadVersionError,
    CompactionState,
    CompactionStatus,
    MetadataStore,
    NotFoundError,
)
from topics.compaction_lease import LEASE_LOST, lapsed

log = logging.getLogger(__name__)


class RunLease:
    def __init__(self, store: MetadataStore, state: CompactionState, lease_ms: int, clock: Clock) -> None:
        self.store = store
        self.state = state  # as this run wrote it last
        self.lease_ms = lease_ms
        self.clock = clock
        self.lost = ""  # why the lease is gone; empty while it holds
        self.run_ledger_id: int | None = None  # the ledger this run is writing, once created
        self._lock = asyncio.Lock()  # the heartbeat and the run's own steps write one at a time

    @property
    def topic(self) -> str:
        return self.state.topic

    async def write(self, **changes: Any) -> CompactionState:
        """CAS the state with `changes`; LeaseLostError when the lease is gone (nothing written)."""
        async with self._lock:
            return await self._write(changes)

    async def renew(self) -> CompactionState:
        """Push the lease out by its length; nothing once the run has recorded its end."""
        async with self._lock:
            if self.state.status != CompactionStatus.RUNNING:
                return self.state
            return await self._write({"lease_expires_ms": self.clock.now_ms() + self.lease_ms})

    async def _write(self, changes: dict[str, Any]) -> CompactionState:
        if self.lost:
            raise LeaseLostError(self.lost)
        if lapsed(self.state, self.clock.now_ms()):
            self._lose(f"{LEASE_LOST}: it ran out before this run renewed it")
        wanted = replace(self.state, **changes)
        put = asyncio.ensure_future(call_store(self.store.put_compaction, wanted))
        try:
            self.state = await asyncio.shield(put)
        except asyncio.CancelledError:
            # The write goes on in its thread: know whether it landed before the cancellation
            # reaches the run, whose clean-up must not delete a ledger the state now references.
            with contextlib.suppress(Exception):
                self.state = await put
            raise
        except (BadVersionError, NotFoundError):
            self._lose(f"{LEASE_LOST}: another process changed the compaction state of {self.topic}")
        return self.state

    def _lose(self, reason: str) -> None:
        self.lost = reason
        raise LeaseLostError(reason)

    async def heartbeat(self) -> None:
        """Renew until cancelled or until the lease is lost. A failed renewal (the store down) is
        retried at the next beat: the lease lasts three more beats."""
        period_s = self.lease_ms / 4 / 1000
        while True:
            await asyncio.sleep(period_s)
            try:
                await self.renew()
            except LeaseLostError as exc:
                log.warning("compaction of %s: %s", self.topic, exc)
                return
            except Exception:  # the store is unreachable for now; the next beat retries
                log.exception("could not renew the compaction lease of %s", self.topic)
