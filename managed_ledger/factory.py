"""Opening, recovering and deleting managed ledgers (Pulsar's ManagedLedgerFactory).

Open, in this order (a crash at any step leaves a state the next open handles):
1. Read the managed ledger's record with the rows of the ledgers it lists, its cursors and its
   dedup snapshot, in one store call (`load_managed_ledger`), or create the record. If it
   carries the `deleted` mark, a delete was interrupted: finish it and start afresh.
2. Every ledger of the list that is not CLOSED in that read (the last one, after a crash; or one
   a crash left IN_RECOVERY) is recovered and closed (`bookie.ledgers.LedgerManager.
   recover_and_close`: the bookies fence it and find its real last entry). A CLOSED one needs
   no round trip: closed is final, nobody writes it again. A ledger whose metadata is gone (or
   marked for deletion) is dropped from the list.
3. One compare-and-set of the list claims ownership (an older owner's next update of the list
   loses and fences it); empty ledgers leave the list through `deleting`, and ledgers a crash
   left in `deleting` are deleted in the background (see `retention`): the open never waits
   for a deletion nor fails with one. A record this open created itself (version 1, no ledgers)
   is not claimed again: no other owner can hold a version of it, and whoever opens it next
   must win a compare-and-set against it.
4. Cursors are set up and, with dedup on, the entries after its snapshot are replayed
   (`dedup.rebuild`; also run when a policy turns dedup on later). After a claim both are read
   again: a previous owner may have flushed a cursor or a snapshot between step 1 and the
   claim, and a stale version would fence this owner at its first flush. A created record has
   none and uses step 1's read.
Steps 3 and 4 are `ManagedLedger.start`. A created managed ledger thus costs two store calls
(the read that finds nothing, the insert), a reopened one whose ledgers were closed cleanly four
(the read, the claim, cursors, snapshot) and no bookie round trip.
New writes go to a new ledger, created on the first append.

The factory's first open also finishes ledger deletions a crash interrupted anywhere in the
cluster (`LedgerManager.finish_deletions`).

Known gap: a crash between creating a ledger and the list's compare-and-set leaves one OPEN
ledger that no list names. It has no entries (appends reach a ledger only once it is listed),
so it costs one metadata row and maybe an empty ledger on the bookies; nothing reads it.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable, Mapping, Sequence

from bookie.api import LedgerClient
from bookie.errors import BookieError
from bookie.ledgers import EnsemblePlacement, LedgerManager, StaticPlacement, ledger_spec
from bookie.metadata_calls import call_store
from common.scheduler import Scheduler
from managed_ledger import retention
from managed_ledger.api import ManagedLedgerConfig
from managed_ledger.clock import Clock, SystemClock
from managed_ledger.entry_cache import EntryCache
from managed_ledger.errors import ManagedLedgerClosedError, ManagedLedgerReadError
from managed_ledger.fencing import Fence
from managed_ledger.ledger import ManagedLedger
from managed_ledger.metadata.api import (
    AlreadyExistsError,
    LedgerMetadata,
    LedgerState,
    ManagedLedgerMetadata,
    ManagedLedgerOpening,
    MetadataError,
    MetadataStore,
    NotFoundError,
)
from managed_ledger.ranges import LedgerInfo, LedgerList
from managed_ledger.record import ManagedLedgerRecord, deleting_ids, with_deleting

log = logging.getLogger(__name__)
DELETED = "deleted"  # ManagedLedgerMetadata property: a delete of the managed ledger is under way


class ManagedLedgerFactory:
    """Opens each managed ledger once per process and closes them all on close.

    `timers=False` leaves the periodic work (rollover timer, cursor flush, dedup snapshot,
    trimming) to explicit `tick()` calls: tests that drive a `ManualClock` use it. With timers,
    the managed ledgers share one `scheduler` (one task, entries keyed by deadline; an idle
    managed ledger has none).
    """

    def __init__(
        self,
        client: LedgerClient,
        store: MetadataStore,
        bookies: Sequence[str] = (),
        *,
        clock: Clock | None = None,
        timers: bool = True,
        placement: EnsemblePlacement | None = None,
        lease: Callable[[], bool] | None = None,
        entry_cache_bytes: int = 0,
    ) -> None:
        """`lease`: the broker's ownership lease (see managed_ledger.fencing); None when this
        process is the only one that writes its managed ledgers. `entry_cache_bytes`: the budget
        of the entry cache the managed ledgers share (managed_ledger.entry_cache; 0: none)."""
        self.entry_cache = EntryCache(entry_cache_bytes) if entry_cache_bytes > 0 else None
        self.client = client
        self.store = store
        self.clock: Clock = clock or SystemClock()
        self.timers = timers
        self.scheduler = Scheduler(self.clock.now_ms)
        self.lease = lease
        # New ledgers go where the placement policy says: the bookie registry when the process
        # has one, else the static `bookies` list.
        self.placement: EnsemblePlacement = placement or StaticPlacement(bookies)
        self.lifecycle = LedgerManager(
            store,
            client,
            clock=self.clock.now_ms,
            placement=self.placement,
            cookies=store.get_bookie_cookie,
        )
        self._swept = False
        self._ledgers: dict[str, ManagedLedger] = {}
        self._opening: dict[str, asyncio.Future[ManagedLedger]] = {}
        self._closed = False

    async def open(self, name: str, config: ManagedLedgerConfig) -> ManagedLedger:
        if self._closed:
            raise ManagedLedgerClosedError("the managed ledger factory is closed")
        ml = self._ledgers.get(name)
        if ml is not None and ml.is_fenced:
            # A stale handle (its broker lost the lease, or another owner took it): drop it and
            # open afresh, which recovers the ledgers and claims the list again.
            self._forget(ml)
            with contextlib.suppress(Exception):
                await ml.close()
            ml = None
        if ml is not None:
            ml.update_config(config)
            return ml
        if name in self._opening:
            return await asyncio.shield(self._opening[name])
        future: asyncio.Future[ManagedLedger] = asyncio.get_running_loop().create_future()
        self._opening[name] = future
        try:
            ml = await self._open(name, config)
        except BaseException as exc:
            future.set_exception(exc)
            future.exception()  # retrieved: waiters (if any) re-raise it
            raise
        finally:
            self._opening.pop(name, None)
        future.set_result(ml)
        self._ledgers[name] = ml
        ml.on_close = self._forget
        return ml

    def _forget(self, ml: ManagedLedger) -> None:
        if self._ledgers.get(ml.name) is ml:
            del self._ledgers[ml.name]

    async def _open(self, name: str, config: ManagedLedgerConfig) -> ManagedLedger:
        if not self._swept:
            await self._sweep()
        stored, fresh = await self._load(name)
        meta = stored.meta
        ledgers, dropped = await self._recover_ledgers(meta.ledger_ids, stored.ledgers)
        pending = [*deleting_ids(meta.properties), *dropped]
        ml = ManagedLedger(
            name,
            config,
            client=self.client,
            store=self.store,
            lifecycle=self.lifecycle,
            clock=self.clock,
            meta=meta,
            ledgers=ledgers,
            lease=self.lease,
            entry_cache=self.entry_cache,
            scheduler=self.scheduler,
        )
        properties = with_deleting(meta.properties, pending)
        await ml.start(properties, timers=self.timers, stored=stored, fresh=fresh)
        return ml

    async def _load(self, name: str) -> tuple[ManagedLedgerOpening, bool]:
        """What the open needs of the store, in one read (`load_managed_ledger`); when there is
        no record, the one this open creates, and True: nothing else can exist yet."""
        stored = await call_store(self.store.load_managed_ledger, name)
        if stored is not None and stored.meta.properties.get(DELETED):
            await self._finish_delete(stored.meta)
            stored = None
        if stored is not None:
            return stored, False
        try:
            return ManagedLedgerOpening(await call_store(self.store.create_managed_ledger, name)), True
        except AlreadyExistsError:
            stored = await call_store(self.store.load_managed_ledger, name)
            assert stored is not None
            return stored, False

    async def _sweep(self) -> None:
        """Finish the ledger deletions a crash interrupted; retried on the next open if it fails
        (a leftover only costs space, so it never stops an open)."""
        self._swept = True
        try:
            await self.lifecycle.finish_deletions()
        except (BookieError, MetadataError) as exc:
            self._swept = False
            log.warning("could not finish interrupted ledger deletions: %s", exc)

    async def _recover_ledgers(
        self, ledger_ids: Sequence[int], rows: Mapping[int, LedgerMetadata]
    ) -> tuple[LedgerList, list[int]]:
        """The list with every ledger closed; empty ones are returned apart, to be deleted.
        `rows`: the ledgers' rows as read with the record; one already CLOSED is taken as it is
        (closed is final: what `recover_and_close` would return), any other is recovered."""
        ledgers = LedgerList()
        dropped: list[int] = []
        for ledger_id in ledger_ids:
            row = rows.get(ledger_id)
            try:
                if row is None or row.state != LedgerState.CLOSED:
                    row = await self.lifecycle.recover_and_close(ledger_id)
            except NotFoundError:
                continue
            except BookieError as exc:
                raise ManagedLedgerReadError(f"cannot recover ledger {ledger_id}: {exc}") from exc
            if row.last_entry_id < 0:
                dropped.append(ledger_id)
                continue
            ledgers.add(
                LedgerInfo(
                    ledger_id,
                    row.last_entry_id + 1,
                    row.length_bytes,
                    row.closed_ms or 0,
                    ledger_spec(row),
                )
            )
        return ledgers, dropped

    async def delete(self, name: str) -> None:
        """Mark the managed ledger deleted and list all its ledgers as `deleting` (one CAS),
        delete them (`bookie.ledgers` has the order), then its record, cursors and dedup
        snapshot."""
        ml = self._ledgers.pop(name, None)
        if ml is not None:
            await ml.close()
        meta = await call_store(self.store.get_managed_ledger, name)
        if meta is None:
            return
        await self._finish_delete(meta)

    async def _finish_delete(self, meta: ManagedLedgerMetadata) -> None:
        record = ManagedLedgerRecord(self.store, meta, Fence(meta.name))
        ids = [*meta.ledger_ids, *deleting_ids(meta.properties)]
        await record.claim((), with_deleting({**meta.properties, DELETED: "1"}, ids))
        await retention.finish_deletions(record, self.lifecycle)
        with contextlib.suppress(NotFoundError):
            await call_store(self.store.delete_managed_ledger, meta.name)

    async def close(self) -> None:
        self._closed = True
        for ml in list(self._ledgers.values()):
            await ml.close()
        self._ledgers.clear()
        await self.scheduler.close()
