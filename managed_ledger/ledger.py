"""The managed ledger (Pulsar's ManagedLedgerImpl): a topic's ordered ledgers, written one at a time.

The parts, each behind a narrow seam so that none of them imports this module:
- the write pipeline and the ledger switch: `managed_ledger.appender.LedgerAppender`, which
  calls back through `AppendOwner` (durable entries, failed writes, recovered entries);
- the stored record (ledger list and properties, changed by compare-and-set):
  `managed_ledger.record.ManagedLedgerRecord`; ownership and fencing: `managed_ledger.fencing`;
- cursors (`managed_ledger.cursor`), which see the ledger list, the reads and the flush;
- dedup (`managed_ledger.dedup`), rebuilt by replaying the entries after its snapshot;
- which ledgers retention deletes, and the deletion order (`managed_ledger.retention`).
This class holds them together: reads, the cursor registry and its batched flush, the dedup
snapshot, trimming, the periodic timer, close and stats. Opening and crash recovery live in
`managed_ledger.factory`; `start` finishes an open.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from bookie.api import LedgerClient
from bookie.errors import BookieError, NoSuchEntryError, NoSuchLedgerError
from bookie.ledgers import LedgerManager
from common.scheduler import Scheduler
from managed_ledger import dedup, log_bounds, retention
from managed_ledger.api import InitialPosition, ManagedLedgerConfig
from managed_ledger.appender import LedgerAppender
from managed_ledger.clock import Clock
from managed_ledger.cursor import ManagedCursor
from managed_ledger.dedup import Deduplication
from managed_ledger.dedup_snapshots import DedupSnapshots
from managed_ledger.entry_cache import EntryCache
from managed_ledger.entry_format import batch_publish_time
from managed_ledger.errors import (
    CursorNotFoundError,
    EntryNotFoundError,
    ManagedLedgerClosedError,
    ManagedLedgerFencedError,
    ManagedLedgerReadError,
    ManagedLedgerTerminatedError,
    SequenceInFlightError,
)
from managed_ledger.fencing import Fence
from managed_ledger.internal_stats import internal_stats
from managed_ledger.metadata.api import (
    AlreadyExistsError,
    CursorMetadata,
    ManagedLedgerMetadata,
    ManagedLedgerOpening,
    MetadataStore,
    NotFoundError,
)
from managed_ledger.offsets import OffsetIndex, parse_offsets, recover_next_offset
from managed_ledger.position import MessageId, Position
from managed_ledger.ranges import LedgerList
from managed_ledger.record import ManagedLedgerRecord
from managed_ledger.timer import LedgerTimer

log = logging.getLogger(__name__)


class ManagedLedger:
    def __init__(
        self,
        name: str,
        config: ManagedLedgerConfig,
        *,
        client: LedgerClient,
        store: MetadataStore,
        lifecycle: LedgerManager,
        clock: Clock,
        meta: ManagedLedgerMetadata,
        ledgers: LedgerList,
        lease: Callable[[], bool] | None = None,
        entry_cache: EntryCache | None = None,
        scheduler: Scheduler | None = None,
    ) -> None:
        self._name = name
        self._config = config
        self._client = client
        self._store = store
        self._lifecycle = lifecycle
        self._clock = clock
        self._ledgers = ledgers
        self._fence = Fence(name, lease)
        self._record = ManagedLedgerRecord(store, meta, self._fence)
        self.offsets = OffsetIndex(ledgers, parse_offsets(meta.properties), self._read_one)
        self._appender = LedgerAppender(
            name,
            self,
            lifecycle=lifecycle,
            client=client,
            clock=clock,
            ledgers=ledgers,
            record=self._record,
            fence=self._fence,
            offsets=self.offsets,
            entry_cache=entry_cache,
        )
        self._flush_lock = asyncio.Lock()
        self._trim_lock = asyncio.Lock()
        self._cursors: dict[str, ManagedCursor] = {}
        self._dedup = Deduplication()
        self._snapshots = DedupSnapshots(
            name,
            self._dedup,
            store=store,
            fence=self._fence,
            clock=clock,
            ledgers=ledgers,
            read_entries=self.read_entries,
            last_confirmed=lambda: self.last_confirmed_position,
        )
        self._closing = False
        self._terminating = False  # set by terminate before its record says so
        self._timer = LedgerTimer(self, scheduler, clock.now_ms)
        self._background: set[asyncio.Task[Any]] = set()
        self._deletions: asyncio.Task[None] | None = None
        now = clock.now_ms()
        self._last_flush_ms = now
        self._dedup.last_snapshot_ms = now
        self.on_close: Callable[[ManagedLedger], None] | None = None
        # The compaction horizon's entry as the topic's owner last read it; None: no run yet, or
        # not known yet. With `retain_uncompacted` retention keeps what lies after it.
        self.compacted_through: Position | None = None

    async def start(
        self,
        properties: Mapping[str, str],
        *,
        timers: bool,
        stored: ManagedLedgerOpening | None = None,
        fresh: bool = False,
    ) -> None:
        """Finish an open: claim the recovered list (one CAS), start finishing interrupted
        deletions in the background, set up the cursors and the dedup state, start the timers.
        `stored`: the cursors and dedup snapshot the factory read with the record (None: read
        them here); `fresh`: the open created the record, so it needs no claim (factory).
        After a claim they are read again: a previous owner may have flushed a cursor or a
        snapshot between the factory's read and the claim, and a stale version would fence
        this owner at its first flush."""
        if not fresh or dict(properties) != dict(self._record.meta.properties) or self._ledgers.ids:
            await self._record.claim(self._ledgers.ids, properties)
            stored = None
        self._finish_deletions()
        end = await recover_next_offset(self._ledgers, properties, self._read_one)
        self._appender.next_offset = self._appender.high_watermark = end
        if stored is None:
            cursors = await self._fence.call(self._store.list_cursors, self._name)
            snapshot = await self._fence.call(self._store.get_dedup_snapshot, self._name)
        else:
            cursors, snapshot = list(stored.cursors), stored.dedup
        for meta in cursors:
            self._cursors[meta.name] = ManagedCursor(self, meta, on_change=self.wake)
        if self._config.dedup_enabled:
            await self._snapshots.replay(snapshot)
        else:  # dedup may be turned on later: its first snapshot must CAS the stored one
            self._dedup.snapshot_version = snapshot.version if snapshot is not None else 0
        if timers:
            self.start_timers()

    # --- properties ----------------------------------------------------------------------------
    @property
    def name(self) -> str:
        return self._name

    @property
    def config(self) -> ManagedLedgerConfig:
        return self._config

    def update_config(self, config: ManagedLedgerConfig) -> None:
        turned_on = config.dedup_enabled and not self._config.dedup_enabled
        self._config = config
        self.wake()
        if turned_on and not self._closing:
            # Appends recorded their sequence ids all along; the rebuild adds the stored past.
            self._spawn(self._snapshots.rebuild())

    @property
    def ledger_list(self) -> LedgerList:
        return self._ledgers

    @property
    def last_confirmed_position(self) -> Position | None:
        return self._ledgers.last_position()

    @property
    def first_position(self) -> Position | None:
        hidden = log_bounds.hidden_through(self.log_start)
        if hidden is None:
            return self._ledgers.first_position()
        first = self._ledgers.next_position(hidden)
        return first if self._ledgers.contains(first) else None

    @property
    def entries_added_counter(self) -> int:
        return self._appender.entries_added

    @property
    def total_size_bytes(self) -> int:
        return self._ledgers.total_size_bytes()

    @property
    def is_fenced(self) -> bool:
        return self._fence.fenced

    def next_position(self, position: Position) -> Position:
        return self._ledgers.next_position(position)

    def count_entries(self, after: Position, up_to: Position) -> int:
        return self._ledgers.count_between(after, up_to)

    def size_after(self, position: Position) -> int:
        return self._ledgers.size_after(position)

    def position_keeping(self, max_bytes: int) -> Position | None:
        return self._ledgers.position_keeping(max_bytes)

    def _check_writable(self) -> None:
        self._fence.check()
        if self._closing:
            raise ManagedLedgerClosedError(f"{self._name} is closed")

    # --- append (the pipeline is `LedgerAppender`; these are its `AppendOwner` callbacks) ------
    async def append(
        self,
        payload: bytes,
        *,
        producer_name: str | None = None,
        highest_sequence_id: int | None = None,
    ) -> Position:
        return (await self.append_entry(payload, producer_name, highest_sequence_id))[0]

    async def append_entry(
        self, payload: bytes, producer_name: str | None = None, highest_sequence_id: int | None = None
    ) -> tuple[Position, int]:
        """Append; the entry's position and its first message's offset, once durable."""
        self._check_writable()
        if self.is_terminated:
            raise ManagedLedgerTerminatedError(f"{self._name} is terminated")
        return await self._appender.append(payload, producer_name, highest_sequence_id)

    def entry_persisted(self, producer_name: str | None, sequence_id: int | None) -> None:
        if producer_name is not None and sequence_id is not None:
            self._dedup.record_persisted(producer_name, sequence_id)
        if self._config.dedup_enabled:
            self._dedup.entries_since_snapshot += 1
            if self._dedup.entries_since_snapshot >= self._config.dedup_snapshot_interval_entries:
                self._spawn(self.snapshot_dedup())
        self.wake()

    def writes_resolved(self, waiting: Sequence[tuple[str | None, int | None]]) -> None:
        self._dedup.write_failed()
        for producer_name, sequence_id in waiting:
            if producer_name is not None and sequence_id is not None:
                self._dedup.mark_pushed(producer_name, sequence_id)

    def entry_recovered(self, payload: bytes) -> None:
        dedup.replay(self._dedup, payload)

    async def rollover(self) -> None:
        await self._appender.rollover()

    # --- reads ---------------------------------------------------------------------------------
    async def read_entries(self, start: Position, max_entries: int) -> list[tuple[Position, bytes]]:
        hidden = log_bounds.hidden_through(self.log_start)
        if hidden is not None and start <= hidden:
            start = Position(hidden.ledger_id, hidden.entry_id + 1)  # nothing before the log start
        return await self._read_stored(start, max_entries)

    async def _read_stored(self, start: Position, max_entries: int) -> list[tuple[Position, bytes]]:
        out: list[tuple[Position, bytes]] = []
        for info, first, last in self._ledgers.read_plan(start, max_entries):
            cached = self._appender.cached(info.ledger_id, first, last)  # newest entries, if kept
            out += cached
            if (first := first + len(cached)) > last:
                continue
            try:
                payloads = await self._client.read_entries(info.spec, first, last)
            except (NoSuchLedgerError, NoSuchEntryError) as exc:
                if self._ledgers.get(info.ledger_id) is None:
                    continue  # trimmed while we read
                raise EntryNotFoundError(f"{self._name}: {info.ledger_id}:{first}..{last}: {exc}") from exc
            except BookieError as exc:
                raise ManagedLedgerReadError(f"{self._name}: read failed: {exc}") from exc
            out.extend((Position(info.ledger_id, first + i), p) for i, p in enumerate(payloads))
        return out

    async def _read_one(self, position: Position) -> bytes:
        (entry,) = await self._read_stored(position, 1)
        return entry[1]

    # --- Kafka offsets (managed_ledger.offsets) --------------------------------------------------
    @property
    def high_watermark(self) -> int:
        """The offset after the last durable message (Kafka's high watermark)."""
        return self._appender.high_watermark

    async def log_start_offset(self) -> int:
        """The first offset a reader can read (the high watermark when nothing is stored)."""
        return await self.offsets.log_start_offset(self.first_position, self.log_start, self.high_watermark)

    async def find_offset(self, offset: int) -> Position | None:
        """The readable entry holding `offset`, None when none does."""
        position = await self.offsets.find(offset)
        hidden = log_bounds.hidden_through(self.log_start)
        if position is None or (hidden is not None and position <= hidden):
            return None
        return position

    async def read_entry(self, position: Position) -> bytes:
        hidden = log_bounds.hidden_through(self.log_start)
        if not self._ledgers.contains(position) or (hidden is not None and position <= hidden):
            raise EntryNotFoundError(f"{self._name}: no entry {position}")
        entries = await self.read_entries(position, 1)
        if not entries or entries[0][0] != position:
            raise EntryNotFoundError(f"{self._name}: no entry {position}")
        return entries[0][1]

    def _hidden_entries(self) -> int:
        """Stored entries before the log start (unreadable, not yet deleted)."""
        hidden = log_bounds.hidden_through(self.log_start)
        return self._ledgers.count_up_to(hidden) if hidden is not None else 0

    def position_at(self, index: int) -> Position | None:
        hidden = self._hidden_entries()
        total = self._ledgers.total_entries() - hidden
        if index < 0:
            index += total
        return self._ledgers.position_at(index + hidden) if 0 <= index < total else None

    async def find_position_by_publish_time(self, timestamp_ms: int) -> Position | None:
        """Binary search over the stored entries (publish times grow with positions)."""
        total = self._ledgers.total_entries()
        lo, hi = self._hidden_entries(), total
        while lo < hi:
            mid = (lo + hi) // 2
            payload = await self.read_entry(self._ledgers.position_at(mid))
            if batch_publish_time(payload) >= timestamp_ms:
                hi = mid
            else:
                lo = mid + 1
        return self._ledgers.position_at(lo) if lo < total else None

    # --- cursors -------------------------------------------------------------------------------
    @property
    def cursors(self) -> dict[str, ManagedCursor]:
        return dict(self._cursors)

    async def open_cursor(self, name: str, initial_position: InitialPosition = "latest") -> ManagedCursor:
        if name in self._cursors:
            return self._cursors[name]
        if self._closing:
            raise ManagedLedgerClosedError(f"{self._name} is closed")
        first = next(iter(self._ledgers), None)
        if initial_position == "earliest":
            mark = Position(first.ledger_id, -1) if first is not None else Position(-1, -1)
            mark = max(mark, log_bounds.hidden_through(self.log_start) or mark)
        else:
            last_ledger = self._ledgers.last()
            mark = self.last_confirmed_position or (
                Position(last_ledger.ledger_id, -1) if last_ledger is not None else Position(-1, -1)
            )
        record = CursorMetadata(self._name, name, (mark.ledger_id, mark.entry_id))
        try:
            stored = await self._fence.call(self._store.create_cursor, record)
        except AlreadyExistsError as exc:
            self._fence.fence()  # only an owner creates cursors: another one is active
            raise ManagedLedgerFencedError(f"{self._name}: cursor {name} created by another owner") from exc
        if name in self._cursors:  # opened concurrently by another task of ours
            return self._cursors[name]
        cursor = self._cursors[name] = ManagedCursor(self, stored, on_change=self.wake)
        return cursor

    async def delete_cursor(self, name: str) -> None:
        async with self._flush_lock:
            if self._cursors.pop(name, None) is None:
                raise CursorNotFoundError(f"{self._name}: no cursor {name}")
            with contextlib.suppress(NotFoundError):
                await self._fence.call(self._store.delete_cursor, self._name, name)

    async def flush_cursors(self) -> None:
        """Store every dirty cursor in one transaction; returns once the state is durable."""
        async with self._flush_lock:
            dirty = [c for c in self._cursors.values() if c.dirty]
            self._last_flush_ms = self._clock.now_ms()
            if not dirty:
                return
            snapshots = [c.snapshot() for c in dirty]
            stored = await self._fence.call(self._store.update_cursors, [m for m, _ in snapshots])
            for cursor, (_, changes), record in zip(dirty, snapshots, stored, strict=True):
                cursor.flushed(record, changes)

    # --- dedup ---------------------------------------------------------------------------------
    def dedup_check(self, producer_name: str, sequence_ids: Sequence[int | None]) -> list[bool]:
        if not self._config.dedup_enabled:
            return [False] * len(sequence_ids)
        try:
            return self._dedup.check(producer_name, sequence_ids)
        except SequenceInFlightError:
            self._appender.resolve_failed_write()
            raise

    def dedup_highest(self, producer_name: str) -> int | None:
        return self._dedup.persisted.get(producer_name) if self._config.dedup_enabled else None

    async def snapshot_dedup(self) -> None:
        """Store the dedup state as of the last confirmed entry (managed_ledger.dedup_snapshots)."""
        await self._snapshots.take()

    # --- retention -----------------------------------------------------------------------------
    async def trim(self) -> None:
        """Apply retention now: flush cursors (trimming follows durable mark-deletes), then
        delete what retention allows."""
        self._check_writable()
        await self.flush_cursors()
        await self._trim()

    async def _trim(self) -> None:
        async with self._trim_lock:
            if self._fence.fenced:
                return
            now = self._clock.now_ms()
            slowest = self.slowest_durable_mark_delete()
            ledgers = list(self._ledgers)
            ids = retention.ledgers_to_delete(ledgers, slowest, self._config.retention, now)
            if self._config.retain_uncompacted:
                ids = retention.compacted_only(ledgers, ids, self.compacted_through)
            if not ids:
                return
            if self._config.dedup_enabled:
                # The dedup replay after a restart starts at the snapshot: cover what we delete.
                await self.snapshot_dedup()
            await retention.remove_ledgers(
                self._record, self._ledgers, self._lifecycle, ids, self.offsets, self._appender.next_offset
            )

    def slowest_durable_mark_delete(self) -> Position | None:
        return min((c.persisted_mark_delete for c in self._cursors.values()), default=None)

    # --- terminate, truncate, log start (managed_ledger.log_bounds) --------------------------------
    @property
    def is_terminated(self) -> bool:
        return self._terminating or log_bounds.is_terminated(self._record.meta.properties)

    @property
    def terminated_at(self) -> MessageId | None:
        return log_bounds.terminated_at(self._record.meta.properties)

    @property
    def log_start(self) -> MessageId | None:
        return log_bounds.log_start(self._record.meta.properties)

    async def terminate(self) -> MessageId | None:
        """Take no append from now on, let those in flight settle, close the current ledger,
        then store the last message id (durable: every later owner refuses appends too). Again
        on a terminated ledger: the stored id."""
        self._check_writable()
        if log_bounds.is_terminated(self._record.meta.properties):
            return self.terminated_at
        self._terminating = True
        while self._appender.current is not None:  # appends waiting for a ledger may open one
            await self._appender.rollover()
            self._fence.check()
        last = self.last_confirmed_position
        last_id = None
        if last is not None:
            index = log_bounds.last_batch_index(await self._read_one(last))
            last_id = MessageId(last.ledger_id, last.entry_id, index)
        await self._record.update_properties({log_bounds.TERMINATED: str(last_id or "")})
        return last_id

    async def truncate(self) -> None:
        """Pulsar's truncate, plus a rollover first: every cursor moves past the closed
        ledgers, then they are all deleted (metadata first). A ledger a write opened meanwhile
        stays, with what it holds."""
        self._check_writable()
        await self._appender.rollover()
        current = self._appender.current
        closed = [i for i in self._ledgers if current is None or i.ledger_id != current.ledger_id]
        end = max((i.last_position for i in closed if i.entries > 0), default=None)
        if end is not None:
            for cursor in self._cursors.values():
                cursor.ack_cumulative(end)
        await self.flush_cursors()
        await self._delete_ledgers([i.ledger_id for i in closed])

    async def truncate_before(self, start: MessageId) -> bool:
        """Kafka's DeleteRecords: the log start moves to `start` (stored first), every cursor
        before it moves to it, then the ledgers wholly before it are deleted. False when the
        log start was at or past `start` already (it never moves back)."""
        self._check_writable()
        current = self.log_start
        if current is not None and start <= current:
            return False
        await self._record.update_properties({log_bounds.LOG_START: str(start)})
        hidden = log_bounds.hidden_through(start)
        assert hidden is not None
        for cursor in self._cursors.values():
            cursor.ack_cumulative(hidden)
        await self.flush_cursors()
        await self._delete_ledgers(log_bounds.ledgers_before(list(self._ledgers), start))
        return True

    async def _delete_ledgers(self, ids: list[int]) -> None:
        if not ids:
            return
        async with self._trim_lock:
            if self._config.dedup_enabled:
                await self.snapshot_dedup()  # its replay after a restart must not need them
            await retention.remove_ledgers(
                self._record, self._ledgers, self._lifecycle, ids, self.offsets, self._appender.next_offset
            )

    # --- timers (managed_ledger.timer: the process's scheduler, no task of its own) -------------
    def start_timers(self) -> None:
        self._timer.start()

    def wake(self) -> None:
        """Something changed that periodic work may follow: tick within an interval at the latest."""
        self._timer.wake()

    def next_tick_ms(self, now: int) -> int | None:
        """Soon while there is work to flush, snapshot or delete; else the next deadline."""
        if self._fence.fenced or self._closing:
            return None
        snapshot_due = self._config.dedup_enabled and self._dedup.entries_since_snapshot > 0
        deleting = self._record.deleting or (self._deletions is not None and not self._deletions.done())
        if snapshot_due or deleting or any(c.dirty for c in self._cursors.values()):
            return now + self._timer.interval_ms()
        slowest = self.slowest_durable_mark_delete()
        expiry = retention.next_expiry_ms(list(self._ledgers), slowest, self._config.retention, now)
        return min((d for d in (self._appender.roll_deadline_ms(), expiry) if d is not None), default=None)

    async def tick(self) -> None:
        """One pass of the periodic work: the rollover timer, the cursor flush, the dedup
        snapshot, the trimmer. The scheduler runs it; tests with a manual clock call it directly."""
        if self._fence.fenced or self._closing:
            return
        now = self._clock.now_ms()
        self._appender.roll_if_due()
        if now - self._last_flush_ms >= self._config.cursor_flush_interval_ms:
            await self.flush_cursors()
        state = self._dedup
        if (
            self._config.dedup_enabled
            and state.entries_since_snapshot > 0
            and now - state.last_snapshot_ms >= self._config.dedup_snapshot_interval_ms
        ):
            await self.snapshot_dedup()
        self._finish_deletions()
        await self._trim()

    def _spawn(self, coro: Any) -> asyncio.Task[Any]:
        task = asyncio.get_running_loop().create_task(coro)
        self._background.add(task)
        task.add_done_callback(self._background.discard)
        return task

    def _finish_deletions(self) -> None:
        """Delete what `deleting` lists, in the background: an open must never wait for a
        deletion nor fail with one (docs/architecture.md); a failed one is tried again by the
        next timer pass."""
        if self._record.deleting and (self._deletions is None or self._deletions.done()):
            self._deletions = self._spawn(retention.finish_deletions_logged(self._record, self._lifecycle))

    # --- close ---------------------------------------------------------------------------------
    async def close(self) -> None:
        """Stop writes, close the current ledger, flush cursors and the dedup snapshot."""
        if self._closing:
            return
        self._closing = True
        try:
            await self._timer.close()  # waits for a pass in progress (managed_ledger.timer)
            await self._appender.close()
            if not self._fence.fenced:
                await self.flush_cursors()
                if self._config.dedup_enabled:
                    await self.snapshot_dedup()
            for task in list(self._background):
                with contextlib.suppress(Exception):
                    await task
        finally:
            self._appender.fail_pending(ManagedLedgerClosedError(f"{self._name} is closed"))
            if self.on_close is not None:
                self.on_close(self)

    # --- stats ---------------------------------------------------------------------------------
    def internal_stats(self) -> dict[str, object]:
        return internal_stats(
            self._ledgers, self._appender.current, self._appender.entries_added, self._cursors
        )
