"""The bookie's storage engine: a log-structured journal with group commit and an on-disk index.

Layout under `data_dir`: `journal/` holds the segment files (`records.py`), which are both the
write-ahead log and the entry storage; `index/` holds one slot file per ledger and the
checkpoint (`index.py`); `LOCK` keeps a second engine off the same directory.

Write order, for every group of adds (group commit):
1. adds, fences and deletes append their encoded records to the open group and wait on it;
2. one flusher pwrites the whole group at the end of the current segment and fdatasyncs it, in
   a thread, so the event loop keeps accepting adds into the next group meanwhile;
3. only then are the index slots written and the ledger table updated;
4. then every waiter of the group is resolved: an add is acknowledged only after the fsync that
   covers it. A failed write or fsync stops the process (`exit_fn(70)`) instead.
A segment is rolled at `journal_max_size_bytes`; each roll syncs the index and writes a
checkpoint, so a restart replays at most about one segment.

A full disk is not an I/O error: the journal reserves its space before writing (`journal.py`),
and every group of adds first checks that the index still has room to grow. When either check
fails nothing of the group is written, its waiters get READ_ONLY, and the bookie turns
read-only (adds refused, reads, fences and deletes served) until the disk has room for a new
segment again and its usage is under the low-water mark; it re-measures every second meanwhile.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import struct
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from typing import Any

import google_crc32c

from bookie.errors import (
    BookieError,
    ErrorCode,
    FencedError,
    NoSuchEntryError,
    NoSuchLedgerError,
    ReadOnlyError,
)
from bookie.storage.apply import apply_record
from bookie.storage.config import (
    DISK_FULL_RECHECK_S,
    INDEX_RESERVE_BYTES,
    MARKER_RESERVE_BYTES,
    StorageConfig,
)
from bookie.storage.dir_lock import DirectoryInUseError, DirectoryLock
from bookie.storage.disk import DiskSpace, DiskUsage, ReadOnlySwitch, disk_usage_fraction, free_bytes
from bookie.storage.gc import GarbageCollector
from bookie.storage.group import Group
from bookie.storage.index import (
    MAX_ENTRY_ID,
    SLOT,
    SLOT_MARKER,
    Checkpoint,
    EntryIndex,
    IndexDamagedError,
    LedgerState,
    SlotRuns,
    sync_index_files,
    write_checkpoint,
)
from bookie.storage.journal import DiskFullError, SegmentFiles, is_no_space
from bookie.storage.records import (
    ADD,
    DELETE,
    FENCE,
    MAX_PAYLOAD_BYTES,
    RECORD_BODY,
    RECORD_HEADER_SIZE,
    RECORD_PREFIX,
    SEGMENT_HEADER_SIZE,
    decode_record,
    encode_marker,
)
from bookie.storage.recovery import recover
from bookie.storage.stats import JournalStats

log = logging.getLogger(__name__)

__all__ = ["EXIT_CODE_DISK_FAILURE", "LedgerStorage", "StorageConfig"]

EXIT_CODE_DISK_FAILURE = 70

_pack_body = RECORD_BODY.pack
_pack_prefix = RECORD_PREFIX.pack
_crc_value = google_crc32c.value
_crc_extend = google_crc32c.extend


class LedgerStorage:
    """Implements `bookie.storage.api.LedgerStorageApi`."""

    def __init__(
        self,
        config: StorageConfig,
        *,
        disk_usage: DiskUsage = disk_usage_fraction,
        exit_fn: Callable[[int], object] = os._exit,
    ) -> None:
        self.config = config
        self._exit = exit_fn
        self.journal_dir = config.data_dir / "journal"
        self.index_dir = config.data_dir / "index"
        self._segments = SegmentFiles(
            self.journal_dir, config.journal_max_size_bytes + MARKER_RESERVE_BYTES, MARKER_RESERVE_BYTES
        )
        self._index = EntryIndex(self.index_dir, config.index_max_open_files)
        switch = ReadOnlySwitch(config.disk_usage_high_water, config.disk_usage_low_water, disk_usage)
        wanted = self._segments.reserve_bytes + INDEX_RESERVE_BYTES
        self.space = DiskSpace(config.data_dir, switch, config.disk_check_interval_s, wanted)
        self._ledgers: dict[int, LedgerState] = {}  # the same dict for the engine's life (GC views it)
        self.gc = GarbageCollector(self._segments, self._index, self._ledgers, config.gc_max_live_fraction)
        self._inflight: dict[tuple[int, int], bytes] = {}
        # Told of every stored record found rotten (a read or the scrub): `bookie.scrubber`.
        self.on_corrupt: Callable[[int, int], None] | None = None
        self._group: Group | None = None
        self._flushing: Group | None = None  # the group being written and synced
        self._flush_task: asyncio.Task[None] | None = None
        self._tasks: list[asyncio.Task[None]] = []
        self._executor: ThreadPoolExecutor | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._dir_lock = DirectoryLock(config.data_dir)
        self._failed: BookieError | None = None
        self._index_damaged = False
        self._read_only = False  # the disk's state (`space`), copied for the add path
        self.checkpoint_segment = 0
        self.journal_stats = JournalStats()  # counted per group; read by the metrics at scrape
        self.counters = self.journal_stats.counters
        self.recovery_report: dict[str, object] = {}

    # ---- life cycle -----------------------------------------------------------------------

    @property
    def read_only(self) -> bool:
        return self._read_only

    async def start(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="quire-journal")
        self.journal_dir.mkdir(parents=True, exist_ok=True)
        self.index_dir.mkdir(parents=True, exist_ok=True)
        self._lock()
        try:
            await self._loop.run_in_executor(self._executor, self._recover)
        except OSError as exc:
            self._release()
            raise BookieError(ErrorCode.INTERNAL, f"cannot open storage: {exc}") from exc
        except BaseException:  # e.g. a damaged journal (JournalDamagedError): refused, not opened
            self._release()
            raise
        self._group = Group(self._loop)
        self.check_disk()
        self.space.due(self._loop.time())
        self._tasks = [
            self._loop.create_task(
                self._every(min(DISK_FULL_RECHECK_S, self.config.disk_check_interval_s), self._disk_tick)
            ),
            self._loop.create_task(self._every(self.config.gc_interval_s, self.collect_garbage)),
        ]

    def _lock(self) -> None:
        try:
            self._dir_lock.acquire()
        except DirectoryInUseError as exc:
            raise BookieError(ErrorCode.INTERNAL, str(exc)) from exc

    def _recover(self) -> None:
        result = recover(self._segments, self._index)
        self._ledgers.clear()
        self._ledgers.update(result.ledgers)
        if result.valid_end is None:
            reserved = self._segments.open_current(max(result.last_segment, 1), None)
        else:
            reserved = self._segments.open_current(result.last_segment, result.valid_end)
        if not reserved:
            log.error("no space to reserve the journal segment: starting read-only")
            self.space.ran_out()
        self.recovery_report = {
            "full_rebuild": result.full_rebuild,
            "truncated_bytes": result.truncated_bytes,
        }
        try:
            self._checkpoint_sync(self._checkpoint_snapshot())
        except OSError as exc:
            if not is_no_space(exc):
                raise
            log.error("no space for the index checkpoint at start: starting read-only")
            self.space.ran_out()

    async def close(self) -> None:
        """Wait for the open group, write a checkpoint, release every file."""
        for task in self._tasks:
            task.cancel()
        for task in self._tasks:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
        self._tasks = []
        if self._flush_task is not None:
            with contextlib.suppress(Exception):
                await asyncio.shield(self._flush_task)
        if self._failed is None and self._executor is not None and self._loop is not None:
            with contextlib.suppress(OSError):
                await self._loop.run_in_executor(
                    self._executor, self._checkpoint_sync, self._checkpoint_snapshot()
                )
        self._release()

    def abandon(self) -> None:
        """Drop the engine as a crash would: no flush, no checkpoint (for tests of recovery).

        Adds still waiting fail with UNAVAILABLE: they were never acknowledged, and whether
        their records reached the disk is for the next start to find out."""
        for task in self._tasks:
            task.cancel()
        if self._flush_task is not None:
            self._flush_task.cancel()
        self._failed = BookieError(ErrorCode.UNAVAILABLE, "storage abandoned")
        for group in (self._flushing, self._group):
            if group is not None and not group.future.done():
                group.future.set_exception(self._failed)
                group.future.exception()  # retrieved: nobody may be waiting any more
        self._release()

    def _release(self) -> None:
        if self._executor is not None:
            self._executor.shutdown(wait=True)
            self._executor = None
        self._segments.close()
        self._index.close()
        self._dir_lock.release()

    async def _every(self, interval_s: float, action: Callable[[], Any]) -> None:
        while True:
            await asyncio.sleep(interval_s)
            try:
                result = action()
                if asyncio.iscoroutine(result):
                    await result
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("background storage task failed")

    # ---- writes ---------------------------------------------------------------------------

    async def add_entry(
        self,
        ledger_id: int,
        entry_id: int,
        last_add_confirmed: int,
        payload: bytes,
        *,
        recovery: bool = False,
    ) -> None:
        if self._failed is not None:
            raise self._failed
        if self._read_only and not recovery:
            # Recovery adds still go in (BookKeeper's high-priority writes): a ledger must not
            # be closed with an entry short of its ack quorum because one holder is nearly full.
            # The journal's preallocated space ahead covers them.
            raise ReadOnlyError()
        st = self._ledgers.get(ledger_id)
        if st is not None:
            if st.fenced and not recovery:
                raise FencedError(ledger_id)
            if entry_id <= st.last_entry_id and self._stored_equal(ledger_id, entry_id, payload, recovery):
                return
        key = (ledger_id, entry_id)
        pending = self._inflight.get(key)
        if pending is not None:
            if pending != payload:
                raise BookieError(ErrorCode.BAD_REQUEST, f"ledger {ledger_id} entry {entry_id}: other bytes")
            await self._waiting_group_of(key)
            return
        if not 0 <= entry_id <= MAX_ENTRY_ID or ledger_id < 0 or len(payload) > MAX_PAYLOAD_BYTES:
            raise BookieError(
                ErrorCode.BAD_REQUEST, f"bad ledger id, entry id (0..{MAX_ENTRY_ID}) or payload size"
            )
        group = self._group
        assert group is not None, "storage not started"
        try:
            body = _pack_body(ADD, 0, ledger_id, entry_id, last_add_confirmed)
        except struct.error as exc:
            raise BookieError(ErrorCode.BAD_REQUEST, f"ids out of range: {exc}") from exc
        length = RECORD_HEADER_SIZE + len(payload)
        group.parts += (_pack_prefix(len(payload), _crc_extend(_crc_value(body), payload)), body, payload)
        group.ops.append((ADD, ledger_id, entry_id, last_add_confirmed, group.size, length))
        group.size += length
        group.adds += 1
        group.add_bytes += len(payload)
        self._inflight[key] = payload
        if self._flush_task is None:
            self._flush_task = asyncio.get_running_loop().create_task(self._flush_all())
        await group.future

    def _stored_equal(self, ledger_id: int, entry_id: int, payload: bytes, recovery: bool) -> bool:
        """A retried add: True if the same bytes are stored, BAD_REQUEST if other bytes are.
        A recovery add over a copy whose checksum fails is a repair (`bookie.scrubber`): False,
        so its record is appended and the index slot points at it from then on."""
        try:
            stored = self._read_stored(ledger_id, entry_id, report=not recovery)
        except BookieError as exc:
            if not recovery or exc.code != ErrorCode.CORRUPT:
                raise
            log.warning("ledger %d entry %d: a recovery add rewrites its rotten copy", ledger_id, entry_id)
            return False
        if stored is None:
            return False
        if stored != payload:
            raise BookieError(ErrorCode.BAD_REQUEST, f"ledger {ledger_id} entry {entry_id}: other bytes")
        return True

    async def _waiting_group_of(self, key: tuple[int, int]) -> None:
        # The record is in the open group or in the one being synced: wait for both to be safe.
        flush = self._flush_task
        while key in self._inflight and flush is not None:
            await asyncio.shield(flush)
            flush = self._flush_task
        if self._failed is not None:
            raise self._failed

    async def _marker(self, record_type: int, ledger_id: int) -> None:
        if self._failed is not None:
            raise self._failed
        group = self._group
        assert group is not None, "storage not started"
        record = encode_marker(record_type, ledger_id)
        group.parts.append(record)
        group.ops.append((record_type, ledger_id, -1, -1, group.size, len(record)))
        group.size += len(record)
        if self._flush_task is None:
            self._flush_task = asyncio.get_running_loop().create_task(self._flush_all())
        await group.future

    async def fence(self, ledger_id: int) -> int:
        st = self._ledgers.get(ledger_id)
        if st is None:
            st = self._ledgers[ledger_id] = LedgerState()
        st.fenced = True  # at once: no add that arrives after the fence request may succeed
        await self._marker(FENCE, ledger_id)
        st = self._ledgers.get(ledger_id, st)
        return st.last_add_confirmed

    async def delete_ledger(self, ledger_id: int) -> None:
        if ledger_id not in self._ledgers and not any(k[0] == ledger_id for k in self._inflight):
            return
        await self._marker(DELETE, ledger_id)

    def ledger_ids(self) -> list[int]:
        return list(self._ledgers)

    async def _flush_all(self) -> None:
        """The single flusher: write + fdatasync each group, then index it and acknowledge it."""
        loop = asyncio.get_running_loop()
        try:
            while self._group is not None and self._group.ops and self._failed is None:
                group, self._group = self._group, Group(loop)
                self._flushing = group
                if self._segments.current_offset >= self.config.journal_max_size_bytes:
                    await self._roll()  # a roll a full disk refused before: try again first
                if await self._write_group(group):
                    self.journal_stats.group_synced(group, self._segments.last_sync_s)
                    group.future.set_result(None)
                self._flushing = None
                if self._segments.current_offset >= self.config.journal_max_size_bytes:
                    await self._roll()
        finally:
            self._flush_task = None
            open_group = self._group
            if self._failed is not None and open_group and open_group.ops and not open_group.future.done():
                open_group.future.set_exception(self._failed)
                self._group = Group(loop)

    async def _write_group(self, group: Group) -> bool:
        """Write, sync and index one group; False if it failed (its waiters then have the error)."""
        assert self._loop is not None and group.ops, "a started engine flushes non-empty groups"
        segment, base = self._segments.current_segment, self._segments.current_offset
        try:
            await self._loop.run_in_executor(self._executor, self._append_group, group)
            self._apply(group, segment, base)
        except DiskFullError as exc:
            self._disk_full(str(exc), group)
            return False
        except OSError as exc:
            if is_no_space(exc):  # the index could not grow; the records are safe in the log
                self._mark_index_damaged(f"no space for index slots: {exc}")
                self._disk_full(str(exc), group)
                return False
            self._fatal("journal write or fsync failed", exc)
            self._fail_group(group, self._failed or BookieError(ErrorCode.INTERNAL))
            return False
        return True

    def _append_group(self, group: Group) -> None:
        """In the journal thread: check the index's room, then reserve, write and sync the group."""
        if group.adds and free_bytes(self.config.data_dir) < INDEX_RESERVE_BYTES:
            raise DiskFullError(f"less than {INDEX_RESERVE_BYTES} bytes free for the index")
        self._segments.append_and_sync(b"".join(group.parts))

    def _fail_group(self, group: Group, error: BookieError) -> None:
        for rtype, ledger_id, entry_id, _lac, _offset, _length in group.ops:
            if rtype == ADD:
                self._inflight.pop((ledger_id, entry_id), None)
        group.future.set_exception(error)
        group.future.exception()  # retrieved: every waiter may have been cancelled

    def _disk_full(self, why: str, group: Group | None = None) -> None:
        """Refuse adds until the disk has room again; never exit for want of space."""
        if self.space.ran_out():
            log.error("disk full (%s): bookie is now read-only", why)
        self._read_only = True
        if group is not None:
            self._fail_group(group, ReadOnlyError(f"disk full: {why}"))

    def _apply(self, group: Group, segment: int, base: int) -> None:
        """Index a synced group and update the ledger table (write order step 3).

        Consecutive entries of a ledger become one run of slots, written with one pwrite."""
        ledgers = self._ledgers
        inflight = self._inflight
        runs = SlotRuns(self._index)
        pack_slot = SLOT.pack
        for rtype, ledger_id, entry_id, lac, offset, length in group.ops:
            if rtype == ADD:
                slot = pack_slot(segment, 0, SLOT_MARKER, base + offset, length)
                apply_record(ledgers, runs, ADD, ledger_id, entry_id, lac, slot)
                del inflight[ledger_id, entry_id]
            else:
                apply_record(ledgers, runs, rtype, ledger_id, -1, -1, b"")
        runs.flush_all()

    def _fatal(self, what: str, exc: BaseException) -> None:
        log.critical("%s: %s; stopping rather than acknowledging unsynced data", what, exc)
        self._failed = BookieError(ErrorCode.INTERNAL, f"storage failed: {what}: {exc}")
        self._exit(EXIT_CODE_DISK_FAILURE)

    async def _roll(self) -> None:
        """Seal the current segment, start the next, and checkpoint the index at its start."""
        assert self._loop is not None
        next_segment = self._segments.current_segment + 1
        try:
            await self._loop.run_in_executor(self._executor, self._segments.roll, next_segment)
        except DiskFullError as exc:
            self._disk_full(str(exc))  # the current segment stays current; retried later
            return
        except OSError as exc:
            self._fatal("rolling the journal failed", exc)
            return
        self.counters["rolls"] += 1
        try:
            await self._loop.run_in_executor(
                self._executor, self._checkpoint_sync, self._checkpoint_snapshot()
            )
        except OSError as exc:
            if not is_no_space(exc):
                self._fatal("writing the index checkpoint failed", exc)
                return
            # The previous checkpoint still stands: a restart only replays more of the log.
            self._disk_full(f"no space for the index checkpoint: {exc}")

    def _checkpoint_snapshot(self) -> tuple[Checkpoint, set[int]]:
        """Taken on the loop between groups: every record before this point is indexed."""
        dirty, self._index.dirty = self._index.dirty, set()
        ledgers = {ledger_id: replace(st) for ledger_id, st in self._ledgers.items()}
        return Checkpoint(self._segments.current_segment, self._segments.current_offset, ledgers), dirty

    def _checkpoint_sync(self, snapshot: tuple[Checkpoint, set[int]]) -> None:
        checkpoint, dirty = snapshot
        assert checkpoint.segment >= 1 and checkpoint.offset >= SEGMENT_HEADER_SIZE, "inside the log"
        if self._index_damaged:
            return  # never vouch for an index known to be damaged: the next start rebuilds it
        sync_index_files(self._index, dirty)
        write_checkpoint(self.index_dir, checkpoint)
        self.checkpoint_segment = checkpoint.segment

    # ---- reads ----------------------------------------------------------------------------

    def _read_stored(self, ledger_id: int, entry_id: int, report: bool = True) -> bytes | None:
        """The stored payload, None if absent; raises BookieError(CORRUPT) on a bad checksum (and
        tells `on_corrupt`, unless `report` is off: a recovery add is repairing that copy)."""
        try:
            slot = self._index.lookup(ledger_id, entry_id)
        except IndexDamagedError as exc:
            self._mark_index_damaged(str(exc))
            raise BookieError(ErrorCode.CORRUPT, str(exc)) from exc
        except OSError as exc:
            raise BookieError(ErrorCode.INTERNAL, f"reading the index of ledger {ledger_id}: {exc}") from exc
        if slot is None:
            return None
        segments = self._segments
        if slot.segment == segments.current_segment and slot.offset + slot.length > segments.current_offset:
            return None  # a slot that outlived a cut tail: the end of the log is before its record
        try:
            data = self._segments.read(slot.segment, slot.generation, slot.offset, slot.length)
        except OSError as exc:
            raise BookieError(
                ErrorCode.INTERNAL, f"reading ledger {ledger_id} entry {entry_id}: {exc}"
            ) from exc
        if len(data) < slot.length:
            return None  # the slot outlived a truncated tail: that record is gone
        rec = decode_record(data, 0)
        if rec is None:
            log.error("ledger %d entry %d: checksum mismatch in its stored record", ledger_id, entry_id)
            if self.on_corrupt is not None and report:
                self.on_corrupt(ledger_id, entry_id)
            raise BookieError(ErrorCode.CORRUPT, f"ledger {ledger_id} entry {entry_id}: checksum mismatch")
        if rec.type != ADD or rec.ledger_id != ledger_id or rec.entry_id != entry_id:
            return None  # a stale slot (its record was cut off and the place reused)
        return rec.payload

    def _mark_index_damaged(self, why: str) -> None:
        log.error("index damaged (%s): it will be rebuilt at the next start", why)
        self._index_damaged = True
        with contextlib.suppress(FileNotFoundError):
            os.unlink(self.index_dir / "CHECKPOINT")

    def read_entry(self, ledger_id: int, entry_id: int) -> bytes:
        if ledger_id not in self._ledgers:
            raise NoSuchLedgerError(ledger_id)
        payload = self._read_stored(ledger_id, entry_id)
        if payload is None:
            raise NoSuchEntryError(ledger_id, entry_id)
        return payload

    def read_last_add_confirmed(self, ledger_id: int) -> int:
        st = self._ledgers.get(ledger_id)
        if st is None:
            raise NoSuchLedgerError(ledger_id)
        return st.last_add_confirmed

    def last_entry_id(self, ledger_id: int) -> int:
        st = self._ledgers.get(ledger_id)
        if st is None:
            raise NoSuchLedgerError(ledger_id)
        return st.last_entry_id

    # ---- disk, garbage collection, stats --------------------------------------------------

    def check_disk(self) -> bool:
        """Measure disk usage now and switch read-only on or off; returns read_only.

        After a full disk the bookie stays read-only until usage is under the low-water mark
        and a whole new segment (and the index's reserve) would fit."""
        now, changed = self.space.check()
        self._read_only = now
        if changed:
            log.warning(
                "disk usage %.1f%%: bookie is now %s",
                100 * self.space.switch.last_usage,
                "read-only" if now else "writable",
            )
        return now

    def _disk_tick(self) -> None:
        """Every second: measure when the interval is up, or at once while the disk is full."""
        assert self._loop is not None
        if self.space.due(self._loop.time()):
            self.check_disk()

    async def collect_garbage(self) -> dict[str, int]:
        """Reclaim the space of deleted ledgers in sealed segments (see `gc.py`)."""
        result = await self.gc.run(self.checkpoint_segment)
        if result is None:  # a run is already under way
            return {"segments_scanned": 0, "segments_rewritten": 0, "bytes_reclaimed": 0}
        self.counters["gc_runs"] += 1
        self.counters["gc_segments"] += result["segments_rewritten"]
        return result

    def stats(self) -> dict[str, object]:
        segments = self._segments.list()
        current = (self._segments.current_segment, 0)
        size = 0
        for segment, generation in segments:
            if (segment, generation) == current:
                size += self._segments.current_offset  # its file also holds the unused reservation
                continue
            with contextlib.suppress(FileNotFoundError):
                size += self._segments.path(segment, generation).stat().st_size
        return {
            "ledgers": len(self._ledgers),
            "journal_files": len(segments),
            "journal_bytes": size,
            "current_segment": self._segments.current_segment,
            "read_only": self.read_only,
            "disk_full": self.space.full,
            "disk_usage": self.space.switch.last_usage,
            "failed": self._failed is not None,
            **self.counters,
        }
