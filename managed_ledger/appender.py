"""The managed ledger's write pipeline (Pulsar's OpAddEntry and ledger creation).

`append` assigns each entry to the current ledger in call order and hands it to the ledger's
writer at once, so any number of appends are in flight on one ledger. Pulsar's rollover rule is
checked as each append is pushed: the ledger is full at max entries, max size or max age, and
rolls only once older than the minimum rollover time; the append that fills it is its last.
Appends that arrive while no ledger takes writes wait in `_pending`, in call order, and are
started on the next ledger in that order (`_drain`); `_starting` counts those not yet handed to
the writer, and no append takes the direct path while any is, so positions follow call order.

Ledger switch order (one `_switch` task at a time): close the full ledger
(`bookie.ledgers.LedgerManager.close`: the writer's close waits for its adds, then the ledger
metadata becomes CLOSED with its last entry, length and closing time); then, only if appends
wait, create the next ledger (`LedgerManager.create`: metadata, then the bookie writer), then
add it to the managed ledger's list (compare-and-set). Only then do appends reach it. A lost
compare-and-set, or the bookies fencing our ledger, means another owner took over: the managed
ledger is fenced and refuses every further write.

A failed add fails its append (retriable); the writer refuses every later add, so the ledger is
closed through recovery (fence, find the real last entry) and the next append starts a new one.
The owner hears of every durable entry, of failed writes and of entries recovery proved durable
though their appends failed (`AppendOwner`), which is how dedup keeps its numbers.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from bookie.api import LedgerClient
from bookie.errors import BookieError, FencedError
from bookie.ledger_metadata import MetadataError
from bookie.ledgers import LedgerHandle, LedgerManager, ledger_spec
from bookie.registry import NotEnoughBookiesError
from managed_ledger.api import ManagedLedgerConfig
from managed_ledger.clock import Clock
from managed_ledger.entry_cache import EntryCache
from managed_ledger.entry_format import entry_offsets, stamp_offset
from managed_ledger.errors import (
    ManagedLedgerError,
    ManagedLedgerFencedError,
    ManagedLedgerMetadataError,
    ManagedLedgerWriteError,
    NoBookiesError,
)
from managed_ledger.fencing import Fence
from managed_ledger.offsets import OffsetIndex
from managed_ledger.position import Position
from managed_ledger.ranges import LedgerInfo, LedgerList
from managed_ledger.record import ManagedLedgerRecord

# What the ledger switch turns into a failed append (anything else is a bug and propagates).
SWITCH_ERRORS = (ManagedLedgerError, BookieError, MetadataError)


class AppendOwner(Protocol):
    """What the write pipeline tells the managed ledger that owns it."""

    @property
    def config(self) -> ManagedLedgerConfig: ...

    def entry_persisted(self, producer_name: str | None, sequence_id: int | None) -> None:
        """An append is durable (its producer and sequence id, when it has them)."""
        ...

    def writes_resolved(self, waiting: Sequence[tuple[str | None, int | None]]) -> None:
        """No write to a ledger is unresolved any more (the failed ledger was closed through
        recovery, or no ledger is open): what was pushed but not persisted is lost and may be
        retried, except the appends still `waiting` for a ledger (producer, sequence id)."""
        ...

    def entry_recovered(self, payload: bytes) -> None:
        """Recovery proved this entry durable though its append failed."""
        ...


@dataclass(slots=True)
class _Segment:
    """The ledger being written: what was pushed to it (maybe not yet durable) and its handle."""

    info: LedgerInfo
    handle: LedgerHandle
    created_ms: int
    first_offset: int
    # base offset and message count of each pushed entry, by entry id
    bases: list[int] = field(default_factory=list)
    counts: list[int] = field(default_factory=list)
    pushed_entries: int = 0
    pushed_size: int = 0
    accepting: bool = True
    failed: BaseException | None = None


@dataclass(slots=True)
class _PendingAppend:
    payload: bytes
    producer_name: str | None
    sequence_id: int | None
    future: asyncio.Future[tuple[Position, int]]


class LedgerAppender:
    def __init__(
        self,
        name: str,
        owner: AppendOwner,
        *,
        lifecycle: LedgerManager,
        client: LedgerClient,
        clock: Clock,
        ledgers: LedgerList,
        record: ManagedLedgerRecord,
        fence: Fence,
        offsets: OffsetIndex,
        entry_cache: EntryCache | None = None,
    ) -> None:
        self._name = name
        self._cache = entry_cache
        self._offsets = offsets
        # The offset the next pushed entry gets, and the end of what is durable (Kafka's high
        # watermark); both set from the stored entries when the managed ledger starts.
        self.next_offset = 0
        self.high_watermark = 0
        self._owner = owner
        self._lifecycle = lifecycle
        self._client = client
        self._clock = clock
        self._ledgers = ledgers
        self._record = record
        self._fence = fence
        self._segment: _Segment | None = None
        self._pending: deque[_PendingAppend] = deque()
        self._starting = 0
        self._all_started = asyncio.Event()
        self._all_started.set()
        self._switch_task: asyncio.Task[None] | None = None
        self._background: set[asyncio.Task[Any]] = set()
        self._closing = False
        self.entries_added = 0

    def cached(self, ledger_id: int, first: int, last: int) -> list[tuple[Position, bytes]]:
        """The entries first.. of the ledger that the entry cache holds, in a run from `first`
        (managed_ledger.entry_cache); none without a cache."""
        return self._cache.run(ledger_id, first, last) if self._cache is not None else []

    @property
    def current(self) -> LedgerInfo | None:
        """The ledger being written, None while none is open."""
        return self._segment.info if self._segment is not None else None

    # --- append --------------------------------------------------------------------------------
    async def append(
        self, payload: bytes, producer_name: str | None, sequence_id: int | None
    ) -> tuple[Position, int]:
        """The entry's position and base offset, once durable."""
        seg = self._segment
        if seg is not None and seg.accepting and not self._pending and self._starting == 0:
            payload = self._push(seg, payload)
            return await self._write(seg, payload, producer_name, sequence_id)
        future: asyncio.Future[tuple[Position, int]] = asyncio.get_running_loop().create_future()
        self._pending.append(_PendingAppend(payload, producer_name, sequence_id, future))
        if seg is not None and seg.accepting:
            if self._starting == 0:
                self._drain(seg)
        else:
            self._start_switch()
        return await future

    def _push(self, seg: _Segment, payload: bytes) -> bytes:
        """Count the entry into its ledger and give it its offsets (the payload comes back
        stamped); the entry that fills the ledger is its last. Entries are pushed in entry id
        order, so entry id = the number pushed before."""
        header = entry_offsets(payload)
        count = header[1] if header is not None else 1
        seg.bases.append(self.next_offset)
        seg.counts.append(count)
        payload = stamp_offset(payload, self.next_offset)
        self.next_offset += count
        seg.pushed_entries += 1
        seg.pushed_size += len(payload)
        if self._is_full(seg):
            seg.accepting = False
            self._start_switch()
        return payload

    def roll_deadline_ms(self) -> int | None:
        """When `roll_if_due` would roll the current ledger by age (None: no ledger with entries)."""
        seg = self._segment
        if seg is None or not seg.accepting or seg.pushed_entries == 0:
            return None
        policy = self._owner.config.rollover
        by_count = seg.pushed_entries >= policy.max_entries or seg.pushed_size >= policy.max_size_bytes
        at = seg.created_ms + (0 if by_count else policy.max_rollover_time_ms)
        if policy.min_rollover_time_ms > 0:
            at = max(at, seg.created_ms + policy.min_rollover_time_ms + 1)
        return at

    def _is_full(self, seg: _Segment) -> bool:
        """Pulsar's currentLedgerIsFull."""
        policy = self._owner.config.rollover
        age_ms = self._clock.now_ms() - seg.created_ms
        full = (
            seg.pushed_entries >= policy.max_entries
            or seg.pushed_size >= policy.max_size_bytes
            or age_ms >= policy.max_rollover_time_ms
        )
        if not full:
            return False
        return age_ms > policy.min_rollover_time_ms if policy.min_rollover_time_ms > 0 else True

    async def _write(
        self, seg: _Segment, payload: bytes, producer: str | None, seq: int | None
    ) -> tuple[Position, int]:
        try:
            entry_id = await seg.handle.add_entry(payload)
        except BookieError as exc:
            seg.handle.failed = exc  # closing recovers: this add may be durable all the same
            self._add_failed(seg, exc)
            if isinstance(exc, FencedError):
                raise ManagedLedgerFencedError(f"{self._name}: ledger fenced by another owner") from exc
            raise ManagedLedgerWriteError(f"{self._name}: append failed: {exc}") from exc
        info = seg.info
        if info.spec is not seg.handle.spec:
            # The writer replaced a failed bookie: readers must look for new entries on the new
            # ensemble (the writer recorded it in the metadata before acknowledging this entry).
            info.spec = seg.handle.spec
        if entry_id >= info.entries:
            info.entries = entry_id + 1
        base, count = seg.bases[entry_id], seg.counts[entry_id]
        self.high_watermark = max(self.high_watermark, base + count)
        self._offsets.note(base, Position(info.ledger_id, entry_id), count)
        info.size_bytes += len(payload)
        if self._cache is not None:
            self._cache.put(info.ledger_id, entry_id, payload)  # durable now: readers may have it
        self.entries_added += 1
        self._owner.entry_persisted(producer, seq)
        return Position(info.ledger_id, entry_id), base

    def _add_failed(self, seg: _Segment, exc: BookieError) -> None:
        if isinstance(exc, FencedError):
            self._fence.fence()
        if seg.failed is None:
            # Dedup's pushed ids stay until the ledger is recovered: this add may be durable.
            seg.failed = exc
            seg.accepting = False
            self._start_switch()

    def resolve_failed_write(self) -> None:
        """Start the recovery of a ledger whose add failed, if none runs: a retry refused as in
        flight appends nothing, so nothing else would start the recovery that resolves it."""
        seg = self._segment
        if seg is not None and not seg.accepting and not (self._fence.fenced or self._closing):
            self._start_switch()

    def _resolve_writes(self) -> None:
        self._owner.writes_resolved([(op.producer_name, op.sequence_id) for op in self._pending])

    def _drain(self, seg: _Segment) -> None:
        """Start waiting appends on `seg` in call order (each counted into it now)."""
        loop = asyncio.get_running_loop()
        while self._pending and seg.accepting and self._segment is seg:
            op = self._pending.popleft()
            op.payload = self._push(seg, op.payload)
            self._starting += 1
            self._all_started.clear()
            task = loop.create_task(self._run_drained(seg, op))
            self._background.add(task)
            task.add_done_callback(self._background.discard)

    async def _run_drained(self, seg: _Segment, op: _PendingAppend) -> None:
        self._starting -= 1
        if self._starting == 0:
            self._all_started.set()
            if self._pending and seg.accepting:
                # Created now, these start after this task has handed its entry to the writer.
                self._drain(seg)
        try:
            appended = await self._write(seg, op.payload, op.producer_name, op.sequence_id)
        except ManagedLedgerError as exc:
            if not op.future.done():
                op.future.set_exception(exc)
            return
        if not op.future.done():
            op.future.set_result(appended)

    # --- ledger switch -------------------------------------------------------------------------
    def _start_switch(self) -> None:
        if self._switch_task is None or self._switch_task.done():
            self._switch_task = asyncio.get_running_loop().create_task(self._switch())

    async def _switch(self) -> None:
        try:
            while not self._fence.fenced:
                seg = self._segment
                if seg is not None and not seg.accepting:
                    await self._wait_all_started()
                    await self._close_segment(seg)
                elif seg is None and self._pending and not self._closing:
                    self._drain(await self._open_segment())
                else:
                    break
        except SWITCH_ERRORS as exc:
            self.fail_pending(_translate(self._name, exc))
        if self._fence.fenced:
            self.fail_pending(ManagedLedgerFencedError(f"{self._name} is fenced"))

    async def _wait_all_started(self) -> None:
        while self._starting:
            await self._all_started.wait()

    def fail_pending(self, exc: ManagedLedgerError) -> None:
        """Fail every append still waiting for a ledger."""
        while self._pending:
            op = self._pending.popleft()
            if not op.future.done():
                op.future.set_exception(exc)
        if self._segment is None:
            self._resolve_writes()  # no ledger open: none of the failed appends was written

    async def _open_segment(self) -> _Segment:
        """The ledger (metadata, then writer), then the ledger list (CAS)."""
        now = self._clock.now_ms()
        cfg = self._owner.config
        try:
            # The ensemble comes from the lifecycle's placement policy (the bookie registry in a
            # broker): live writable bookies, spread over the cluster.
            handle = await self._fence.guard(
                self._lifecycle.create(cfg.ensemble_size, cfg.write_quorum, cfg.ack_quorum)
            )
        except NotEnoughBookiesError as exc:
            raise NoBookiesError(f"{self._name}: cannot create ledger: {exc}") from exc
        except BookieError as exc:
            raise ManagedLedgerWriteError(f"{self._name}: cannot create ledger: {exc}") from exc
        first_offset = self.next_offset
        try:
            await self._record.add_ledger(handle.ledger_id, first_offset)
        except ManagedLedgerFencedError:
            # Another owner's list: no list names the new ledger, so nothing may keep it.
            with contextlib.suppress(*SWITCH_ERRORS):
                await self._lifecycle.delete(handle.ledger_id)
            raise
        info = LedgerInfo(handle.ledger_id, 0, 0, 0, handle.spec)
        self._ledgers.add(info)
        self._offsets.set_first(handle.ledger_id, first_offset)
        seg = _Segment(info, handle, now, first_offset)
        self._segment = seg
        return seg

    async def _close_segment(self, seg: _Segment) -> None:
        """Close the ledger for good (through recovery after a failed add), then take over
        the entries recovery proved durable though their appends failed."""
        if seg.handle.failed is not None and self._fence.fenced:
            return  # the new owner recovers and closes it
        closed = await self._fence.guard(self._lifecycle.close(seg.handle))
        info, last = seg.info, closed.last_entry_id
        info.spec = ledger_spec(closed)  # with every ensemble change the writer recorded
        if last + 1 > info.entries:
            for payload in await self._client.read_entries(info.spec, info.entries, last):
                self._owner.entry_recovered(payload)
        info.entries, info.size_bytes = last + 1, closed.length_bytes
        info.timestamp_ms = closed.closed_ms or self._clock.now_ms()
        # Offsets of entries pushed after the last durable one were never used: the next ledger
        # starts right after it, so offsets stay without gaps.
        self.next_offset = seg.bases[last] + seg.counts[last] if last >= 0 else seg.first_offset
        self.high_watermark = max(self.high_watermark, self.next_offset)
        self._segment = None
        # Every write to this ledger is resolved: durable ones are persisted, the rest are lost.
        self._resolve_writes()

    # --- rollover and close --------------------------------------------------------------------
    async def rollover(self) -> None:
        """Close the current ledger now; the next append opens a new one."""
        seg = self._segment
        if seg is not None and seg.accepting:
            seg.accepting = False
            self._start_switch()
        if self._switch_task is not None:
            await asyncio.shield(self._switch_task)

    def roll_if_due(self) -> None:
        """The rollover timer: a ledger may become full by age alone."""
        seg = self._segment
        if seg is not None and seg.accepting and seg.pushed_entries > 0 and self._is_full(seg):
            seg.accepting = False
            self._start_switch()

    async def close(self) -> None:
        """Close the current ledger (unless fenced), then let appends in flight settle."""
        self._closing = True
        if not self._fence.fenced:
            if self._segment is not None:
                self._segment.accepting = False
                self._start_switch()
            if self._switch_task is not None:
                await self._switch_task
        for task in list(self._background):
            with contextlib.suppress(Exception):
                await task


def _translate(name: str, exc: Exception) -> ManagedLedgerError:
    if isinstance(exc, ManagedLedgerError):
        return exc
    if isinstance(exc, BookieError):
        err: ManagedLedgerError = ManagedLedgerWriteError(f"{name}: {exc}")
    else:
        err = ManagedLedgerMetadataError(f"{name}: {exc}")
    err.__cause__ = exc
    return err
