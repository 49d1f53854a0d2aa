"""The managed ledger (Pulsar's ManagedLedgerImpl): a topic's ordered ledgers, written one at a time.

Write path. `append` assigns each entry to the current ledger in call order and hands it to the
ledger's writer at once, so any number of appends are in flight on one ledger. Pulsar's rollover
rule is checked as each append is pushed: the ledger is full at max entries, max size or max
age, and rolls only once older than the minimum rollover time; the append that fills it is its
last. Appends that arrive while no ledger takes writes wait in `_pending`, in call order, and
are started on the next ledger in that order (`_drain`); `_starting` counts those not yet handed
to the writer, and no append takes the direct path while any is, so positions follow call order.

Ledger switch order (one `_switch` task at a time): close the full ledger
(`bookie.ledgers.LedgerManager.close`: the writer's close waits for its adds, then the ledger
metadata becomes CLOSED with its last entry, length and closing time); then, only if appends
wait, create the next ledger (`LedgerManager.create`: metadata, then the bookie writer), then
add it to the managed ledger's list (compare-and-set). Only then do appends reach it.
A lost compare-and-set, or the bookies fencing our ledger, means another owner took over: the
managed ledger is fenced and refuses every further write.

A failed add fails its append (retriable); the writer refuses every later add, so the ledger is
closed through recovery (fence, find the real last entry) and the next append starts a new one.
Dedup's pushed sequence ids fall back to the persisted ones, as Pulsar does.

Trimming and ledger deletion live in `managed_ledger.retention`; opening and crash recovery in
`managed_ledger.factory`.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections import deque
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any, TypeVar

from bookie.api import LedgerClient
from bookie.errors import BookieError, FencedError, NoSuchEntryError, NoSuchLedgerError
from bookie.ledgers import LedgerHandle, LedgerManager, call_blocking
from managed_ledger import dedup, retention
from managed_ledger.api import InitialPosition, ManagedLedgerConfig
from managed_ledger.clock import Clock
from managed_ledger.cursor import ManagedCursor
from managed_ledger.dedup import Deduplication
from managed_ledger.entry_format import batch_publish_time
from managed_ledger.errors import (
    CursorNotFoundError,
    EntryNotFoundError,
    ManagedLedgerClosedError,
    ManagedLedgerError,
    ManagedLedgerFencedError,
    ManagedLedgerWriteError,
    MetadataUnavailableError,
    NoBookiesError,
)
from managed_ledger.metadata.api import (
    AlreadyExistsError,
    BadVersionError,
    CursorMetadata,
    DedupSnapshot,
    ManagedLedgerMetadata,
    MetadataError,
    MetadataStore,
    NotFoundError,
)
from managed_ledger.position import Position
from managed_ledger.ranges import LedgerInfo, LedgerList

log = logging.getLogger(__name__)
T = TypeVar("T")
READ_CHUNK = 1_000


@dataclass(slots=True)
class _Segment:
    """The ledger being written: what was pushed to it (maybe not yet durable) and its writer."""

    info: LedgerInfo
    handle: LedgerHandle
    created_ms: int
    pushed_entries: int = 0
    pushed_size: int = 0
    accepting: bool = True
    failed: BaseException | None = None


@dataclass(slots=True)
class _PendingAdd:
    payload: bytes
    producer_name: str | None
    sequence_id: int | None
    future: asyncio.Future[Position]


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
        bookies: Sequence[str],
        meta: ManagedLedgerMetadata,
        ledgers: LedgerList,
    ) -> None:
        self._name = name
        self._config = config
        self.client = client
        self.store = store
        self.lifecycle = lifecycle
        self.clock = clock
        self._bookies = tuple(bookies)
        self.meta = meta
        self._ledgers = ledgers
        self._segment: _Segment | None = None
        self._pending: deque[_PendingAdd] = deque()
        self._starting = 0
        self._all_started = asyncio.Event()
        self._all_started.set()
        self._switch_task: asyncio.Task[None] | None = None
        self.meta_lock = asyncio.Lock()  # serialises read-modify-CAS of the ledger list
        self._flush_lock = asyncio.Lock()
        self._snapshot_lock = asyncio.Lock()
        self.trim_lock = asyncio.Lock()
        self._cursors: dict[str, ManagedCursor] = {}
        self.dedup = Deduplication()
        self._new_entry: asyncio.Event | None = None
        self._entries_added = 0
        self._fenced = False
        self._closing = False
        self._closed = False
        self._timer_task: asyncio.Task[None] | None = None
        self._stop_timer = asyncio.Event()
        self._background: set[asyncio.Task[Any]] = set()
        now = clock.now_ms()
        self._last_flush_ms = now
        self.dedup.last_snapshot_ms = now
        self.on_close: Callable[[ManagedLedger], None] | None = None

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
        if turned_on and not self._closing:
            # Appends recorded their sequence ids all along; the rebuild adds the stored past.
            self._spawn(dedup.rebuild(self))

    @property
    def ledger_list(self) -> LedgerList:
        return self._ledgers

    @property
    def last_confirmed_position(self) -> Position | None:
        return self._ledgers.last_position()

    @property
    def first_position(self) -> Position | None:
        return self._ledgers.first_position()

    @property
    def entries_added_counter(self) -> int:
        return self._entries_added

    @property
    def total_size_bytes(self) -> int:
        return self._ledgers.total_size_bytes()

    @property
    def is_fenced(self) -> bool:
        return self._fenced

    def next_position(self, position: Position) -> Position:
        return self._ledgers.next_position(position)

    def count_entries(self, after: Position, up_to: Position) -> int:
        return self._ledgers.count_between(after, up_to)

    # --- metadata calls ------------------------------------------------------------------------
    async def call_store(self, fn: Callable[..., T], *args: Any) -> T:
        """Run a store call off the event loop; a lost compare-and-set fences this instance."""
        return await self.guard(call_blocking(fn, *args))

    async def guard(self, call: Awaitable[T]) -> T:
        """Await a metadata call; a lost compare-and-set fences this instance."""
        try:
            return await call
        except BadVersionError as exc:
            self._fence()
            raise ManagedLedgerFencedError(f"{self._name}: another owner updated its metadata") from exc
        except (NotFoundError, AlreadyExistsError):
            raise
        except MetadataError as exc:
            raise MetadataUnavailableError(f"{self._name}: metadata store: {exc}") from exc

    def _fence(self) -> None:
        if not self._fenced:
            log.warning("managed ledger %s fenced: another owner took over", self._name)
        self._fenced = True

    def _check_writable(self) -> None:
        if self._fenced:
            raise ManagedLedgerFencedError(f"{self._name} is fenced")
        if self._closing:
            raise ManagedLedgerClosedError(f"{self._name} is closed")

    # --- append --------------------------------------------------------------------------------
    async def append(
        self,
        payload: bytes,
        *,
        producer_name: str | None = None,
        highest_sequence_id: int | None = None,
    ) -> Position:
        self._check_writable()
        seg = self._segment
        if seg is not None and seg.accepting and not self._pending and self._starting == 0:
            self._push(seg, payload)
            return await self._write(seg, payload, producer_name, highest_sequence_id)
        future: asyncio.Future[Position] = asyncio.get_running_loop().create_future()
        self._pending.append(_PendingAdd(payload, producer_name, highest_sequence_id, future))
        if seg is not None and seg.accepting:
            if self._starting == 0:
                self._drain(seg)
        else:
            self._start_switch()
        return await future

    def _push(self, seg: _Segment, payload: bytes) -> None:
        """Count the entry into its ledger; the entry that fills the ledger is its last."""
        seg.pushed_entries += 1
        seg.pushed_size += len(payload)
        if self._is_full(seg):
            seg.accepting = False
            self._start_switch()

    def _is_full(self, seg: _Segment) -> bool:
        """Pulsar's currentLedgerIsFull."""
        policy = self._config.rollover
        age_ms = self.clock.now_ms() - seg.created_ms
        full = (
            seg.pushed_entries >= policy.max_entries
            or seg.pushed_size >= policy.max_size_bytes
            or age_ms >= policy.max_rollover_time_ms
        )
        if not full:
            return False
        return age_ms > policy.min_rollover_time_ms if policy.min_rollover_time_ms > 0 else True

    async def _write(self, seg: _Segment, payload: bytes, producer: str | None, seq: int | None) -> Position:
        try:
            entry_id = await seg.handle.add_entry(payload)
        except BookieError as exc:
            self._add_failed(seg, exc)
            if isinstance(exc, FencedError):
                raise ManagedLedgerFencedError(f"{self._name}: ledger fenced by another owner") from exc
            raise ManagedLedgerWriteError(f"{self._name}: append failed: {exc}") from exc
        self._confirm(seg.info, entry_id, len(payload), producer, seq)
        return Position(seg.info.ledger_id, entry_id)

    def _confirm(
        self, info: LedgerInfo, entry_id: int, size: int, producer: str | None, seq: int | None
    ) -> None:
        if entry_id >= info.entries:
            info.entries = entry_id + 1
        info.size_bytes += size
        self._entries_added += 1
        if producer is not None and seq is not None:
            self.dedup.record_persisted(producer, seq)
        if self._config.dedup_enabled:
            self.dedup.entries_since_snapshot += 1
            if self.dedup.entries_since_snapshot >= self._config.dedup_snapshot_interval_entries:
                self._spawn(self.snapshot_dedup())
        if self._new_entry is not None:
            self._new_entry.set()
            self._new_entry = None

    def _add_failed(self, seg: _Segment, exc: BookieError) -> None:
        if isinstance(exc, FencedError):
            self._fence()
        if seg.failed is None:
            seg.failed = exc
            seg.accepting = False
            self.dedup.write_failed()
            self._start_switch()

    def _drain(self, seg: _Segment) -> None:
        """Start waiting appends on `seg` in call order (each counted into it now)."""
        loop = asyncio.get_running_loop()
        while self._pending and seg.accepting and self._segment is seg:
            op = self._pending.popleft()
            self._push(seg, op.payload)
            self._starting += 1
            self._all_started.clear()
            self._keep(loop.create_task(self._run_drained(seg, op)))

    async def _run_drained(self, seg: _Segment, op: _PendingAdd) -> None:
        self._starting -= 1
        if self._starting == 0:
            self._all_started.set()
            if self._pending and seg.accepting:
                # Created now, these start after this task has handed its entry to the writer.
                self._drain(seg)
        try:
            position = await self._write(seg, op.payload, op.producer_name, op.sequence_id)
        except ManagedLedgerError as exc:
            if not op.future.done():
                op.future.set_exception(exc)
            return
        if not op.future.done():
            op.future.set_result(position)

    # --- ledger switch -------------------------------------------------------------------------
    def _start_switch(self) -> None:
        if self._switch_task is None or self._switch_task.done():
            self._switch_task = asyncio.get_running_loop().create_task(self._switch())

    async def _switch(self) -> None:
        try:
            while not self._fenced:
                seg = self._segment
                if seg is not None and not seg.accepting:
                    await self._wait_all_started()
                    await self._close_segment(seg)
                elif seg is None and self._pending and not self._closing:
                    self._drain(await self._open_segment())
                else:
                    break
        except QuireErrorTypes as exc:
            self._fail_pending(_translate(self._name, exc))
        if self._fenced:
            self._fail_pending(ManagedLedgerFencedError(f"{self._name} is fenced"))

    async def _wait_all_started(self) -> None:
        while self._starting:
            await self._all_started.wait()

    def _fail_pending(self, exc: ManagedLedgerError) -> None:
        while self._pending:
            op = self._pending.popleft()
            if not op.future.done():
                op.future.set_exception(exc)

    def _choose_ensemble(self, ledger_hint: int) -> tuple[str, ...]:
        size = self._config.ensemble_size
        if len(self._bookies) < size:
            raise NoBookiesError(f"ensemble size {size} but {len(self._bookies)} bookies configured")
        start = ledger_hint % len(self._bookies)
        return tuple(self._bookies[(start + i) % len(self._bookies)] for i in range(size))

    async def _open_segment(self) -> _Segment:
        """The ledger (metadata, then writer), then the ledger list (CAS)."""
        now = self.clock.now_ms()
        cfg = self._config
        ensemble = self._choose_ensemble(len(self._ledgers) + sum(map(ord, self._name)))
        try:
            handle = await self.guard(self.lifecycle.create(ensemble, cfg.write_quorum, cfg.ack_quorum))
        except BookieError as exc:
            raise ManagedLedgerWriteError(f"{self._name}: cannot create ledger: {exc}") from exc
        try:
            async with self.meta_lock:
                updated = replace(self.meta, ledger_ids=(*self.meta.ledger_ids, handle.ledger_id))
                self.meta = await self.call_store(self.store.update_managed_ledger, updated)
        except ManagedLedgerFencedError:
            # Another owner's list: no list names the new ledger, so nothing may keep it.
            with contextlib.suppress(*QuireErrorTypes):
                await self.lifecycle.delete(handle.ledger_id)
            raise
        info = LedgerInfo(handle.ledger_id, 0, 0, 0, handle.spec)
        self._ledgers.add(info)
        seg = _Segment(info, handle, now)
        self._segment = seg
        return seg

    async def _close_segment(self, seg: _Segment) -> None:
        """Close the ledger for good (through recovery after a failed add), then take over
        the entries recovery proved durable though their appends failed."""
        if seg.handle.failed is not None and self._fenced:
            return  # the new owner recovers and closes it
        closed = await self.guard(self.lifecycle.close(seg.handle))
        info, last = seg.info, closed.last_entry_id
        if last + 1 > info.entries:
            await self._adopt_unconfirmed(info, last)
        info.entries, info.size_bytes = last + 1, closed.length_bytes
        info.timestamp_ms = closed.closed_ms or self.clock.now_ms()
        self._segment = None

    async def _adopt_unconfirmed(self, info: LedgerInfo, last: int) -> None:
        """Entries recovery proved durable though their appends failed: their sequence ids
        count as stored (the producer will retry them; dedup must see them as stored)."""
        payloads = await self.client.read_entries(info.spec, info.entries, last)
        for payload in payloads:
            self.replay_sequence(payload)

    def replay_sequence(self, payload: bytes) -> None:
        dedup.replay(self.dedup, payload)

    async def rollover(self) -> None:
        seg = self._segment
        if seg is not None and seg.accepting:
            seg.accepting = False
            self._start_switch()
        if self._switch_task is not None:
            await asyncio.shield(self._switch_task)

    # --- reads ---------------------------------------------------------------------------------
    async def read_entries(self, start: Position, max_entries: int) -> list[tuple[Position, bytes]]:
        out: list[tuple[Position, bytes]] = []
        for info, first, last in self._ledgers.read_plan(start, max_entries):
            try:
                payloads = await self.client.read_entries(info.spec, first, last)
            except (NoSuchLedgerError, NoSuchEntryError) as exc:
                if self._ledgers.get(info.ledger_id) is None:
                    continue  # trimmed while we read
                raise EntryNotFoundError(f"{self._name}: {info.ledger_id}:{first}..{last}: {exc}") from exc
            except BookieError as exc:
                raise ManagedLedgerWriteError(f"{self._name}: read failed: {exc}") from exc
            out.extend((Position(info.ledger_id, first + i), p) for i, p in enumerate(payloads))
        return out

    async def read_entry(self, position: Position) -> bytes:
        if not self._ledgers.contains(position):
            raise EntryNotFoundError(f"{self._name}: no entry {position}")
        entries = await self.read_entries(position, 1)
        if not entries or entries[0][0] != position:
            raise EntryNotFoundError(f"{self._name}: no entry {position}")
        return entries[0][1]

    async def wait_for_entries(self, after: Position | None, timeout_s: float) -> bool:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout_s
        while True:
            last = self.last_confirmed_position
            if last is not None and (after is None or last > after):
                return True
            remaining = deadline - loop.time()
            if remaining <= 0 or self._closed:
                return False
            if self._new_entry is None:
                self._new_entry = asyncio.Event()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._new_entry.wait(), remaining)

    async def find_position_by_publish_time(self, timestamp_ms: int) -> Position | None:
        """Binary search over the stored entries (publish times grow with positions)."""
        total = self._ledgers.total_entries()
        lo, hi = 0, total
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

    def restore_cursor(self, meta: CursorMetadata) -> None:
        self._cursors[meta.name] = ManagedCursor(self, meta)

    async def open_cursor(self, name: str, initial_position: InitialPosition = "latest") -> ManagedCursor:
        if name in self._cursors:
            return self._cursors[name]
        if self._closing:
            raise ManagedLedgerClosedError(f"{self._name} is closed")
        first = next(iter(self._ledgers), None)
        if initial_position == "earliest":
            mark = Position(first.ledger_id, -1) if first is not None else Position(-1, -1)
        else:
            last_ledger = self._ledgers.last()
            mark = self.last_confirmed_position or (
                Position(last_ledger.ledger_id, -1) if last_ledger is not None else Position(-1, -1)
            )
        record = CursorMetadata(self._name, name, (mark.ledger_id, mark.entry_id))
        try:
            stored = await self.call_store(self.store.create_cursor, record)
        except AlreadyExistsError as exc:
            self._fence()  # only an owner creates cursors: another one is active
            raise ManagedLedgerFencedError(f"{self._name}: cursor {name} created by another owner") from exc
        if name in self._cursors:  # opened concurrently by another task of ours
            return self._cursors[name]
        cursor = self._cursors[name] = ManagedCursor(self, stored)
        return cursor

    async def delete_cursor(self, name: str) -> None:
        async with self._flush_lock:
            if self._cursors.pop(name, None) is None:
                raise CursorNotFoundError(f"{self._name}: no cursor {name}")
            with contextlib.suppress(NotFoundError):
                await self.call_store(self.store.delete_cursor, self._name, name)

    def cursor_changed(self, cursor: ManagedCursor) -> None:
        """Called on every ack or seek; the timer flushes dirty cursors on its interval."""

    async def flush_cursors(self) -> None:
        """Store every dirty cursor in one transaction; returns once the state is durable."""
        async with self._flush_lock:
            dirty = [c for c in self._cursors.values() if c.dirty]
            self._last_flush_ms = self.clock.now_ms()
            if not dirty:
                return
            snapshots = [c.snapshot() for c in dirty]
            stored = await self.call_store(self.store.update_cursors, [m for m, _ in snapshots])
            for cursor, (_, changes), record in zip(dirty, snapshots, stored, strict=True):
                cursor.flushed(record, changes)

    # --- dedup ---------------------------------------------------------------------------------
    def dedup_check(self, producer_name: str, sequence_ids: Sequence[int | None]) -> list[bool]:
        if not self._config.dedup_enabled:
            return [False] * len(sequence_ids)
        return self.dedup.check(producer_name, sequence_ids)

    async def snapshot_dedup(self) -> None:
        """Store producer -> highest persisted sequence id as of the last confirmed entry."""
        async with self._snapshot_lock:
            last = self.last_confirmed_position
            if last is None or self.dedup.entries_since_snapshot == 0:
                return
            counted = self.dedup.entries_since_snapshot
            snapshot = DedupSnapshot(
                self._name,
                (last.ledger_id, last.entry_id),
                dict(self.dedup.persisted),
                version=self.dedup.snapshot_version,
            )
            stored = await self.call_store(self.store.put_dedup_snapshot, snapshot)
            self.dedup.snapshot_version = stored.version
            self.dedup.entries_since_snapshot = max(0, self.dedup.entries_since_snapshot - counted)
            self.dedup.last_snapshot_ms = self.clock.now_ms()

    # --- retention -----------------------------------------------------------------------------
    async def trim(self) -> None:
        """Apply retention now: flush cursors (trimming follows durable mark-deletes), then
        delete what retention allows."""
        self._check_writable()
        await self.flush_cursors()
        await retention.trim(self)

    def slowest_durable_mark_delete(self) -> Position | None:
        return min((c.persisted_mark_delete for c in self._cursors.values()), default=None)

    # --- timers --------------------------------------------------------------------------------
    def start_timers(self) -> None:
        if self._timer_task is None:
            self._timer_task = asyncio.get_running_loop().create_task(self._timer_loop())

    async def _timer_loop(self) -> None:
        interval_s = min(self._config.cursor_flush_interval_ms, 1_000) / 1_000
        while not self._closing:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._stop_timer.wait(), interval_s)
            if self._closing:
                return
            try:
                await self.tick()
            except Exception as exc:  # the timer must outlive one failed pass; the next retries
                log.warning("managed ledger %s: background task failed: %s", self._name, exc)

    async def tick(self) -> None:
        """One pass of the periodic work: the rollover timer, the cursor flush, the dedup
        snapshot, the trimmer. The timer calls it; tests with a manual clock call it directly."""
        if self._fenced or self._closing:
            return
        now = self.clock.now_ms()
        seg = self._segment
        if seg is not None and seg.accepting and seg.pushed_entries > 0 and self._is_full(seg):
            seg.accepting = False
            self._start_switch()
        if now - self._last_flush_ms >= self._config.cursor_flush_interval_ms:
            await self.flush_cursors()
        state = self.dedup
        if (
            self._config.dedup_enabled
            and state.entries_since_snapshot > 0
            and now - state.last_snapshot_ms >= self._config.dedup_snapshot_interval_ms
        ):
            await self.snapshot_dedup()
        await retention.trim(self)

    def _spawn(self, coro: Any) -> None:
        self._keep(asyncio.get_running_loop().create_task(coro))

    def _keep(self, task: asyncio.Task[Any]) -> None:
        self._background.add(task)
        task.add_done_callback(self._background.discard)

    # --- close ---------------------------------------------------------------------------------
    async def close(self) -> None:
        """Stop writes, close the current ledger, flush cursors and the dedup snapshot."""
        if self._closing:
            return
        self._closing = True
        try:
            if self._timer_task is not None:
                # Not cancelled: a pass cut in the middle of a store call could leave a CAS
                # applied in the database but not in memory, and fence our own close.
                self._stop_timer.set()
                await self._timer_task
            if not self._fenced:
                if self._segment is not None:
                    self._segment.accepting = False
                    self._start_switch()
                if self._switch_task is not None:
                    await self._switch_task
                await self.flush_cursors()
                if self._config.dedup_enabled:
                    await self.snapshot_dedup()
            for task in list(self._background):
                with contextlib.suppress(Exception):
                    await task
        finally:
            self._closed = True
            self._fail_pending(ManagedLedgerClosedError(f"{self._name} is closed"))
            if self._new_entry is not None:
                self._new_entry.set()
            if self.on_close is not None:
                self.on_close(self)

    # --- stats ---------------------------------------------------------------------------------
    def internal_stats(self) -> dict[str, object]:
        last = self.last_confirmed_position
        current = self._ledgers.last()
        seg = self._segment
        if last is not None:
            last_text = str(last)
        else:
            last_text = f"{current.ledger_id if current is not None else -1}:-1"
        return {
            "entriesAddedCounter": self._entries_added,
            "numberOfEntries": self._ledgers.total_entries(),
            "totalSize": self._ledgers.total_size_bytes(),
            "currentLedgerEntries": seg.info.entries if seg is not None else 0,
            "currentLedgerSize": seg.info.size_bytes if seg is not None else 0,
            "lastConfirmedEntry": last_text,
            "state": "LedgerOpened" if seg is not None else "ClosedLedger",
            "ledgers": [
                {
                    "ledgerId": info.ledger_id,
                    "entries": info.entries,
                    "size": info.size_bytes,
                    "timestamp": info.timestamp_ms,
                }
                for info in self._ledgers
            ],
            "cursors": {name: c.stats() for name, c in self._cursors.items()},
        }


QuireErrorTypes = (ManagedLedgerError, BookieError, MetadataError)


def _translate(name: str, exc: Exception) -> ManagedLedgerError:
    if isinstance(exc, ManagedLedgerError):
        return exc
    if isinstance(exc, BookieError):
        err: ManagedLedgerError = ManagedLedgerWriteError(f"{name}: {exc}")
    else:
        err = MetadataUnavailableError(f"{name}: {exc}")
    err.__cause__ = exc
    return err
