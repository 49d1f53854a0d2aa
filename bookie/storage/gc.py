"""The garbage collector: reclaims the space of deleted ledgers in sealed segments.

A segment is eligible once it is sealed and before the checkpoint's segment (so no replay will
touch it again). A record in segment S, generation g, at offset o is live when:
- ADD: its ledger exists and the index slot of (ledger, entry) points at (S, g, o);
- FENCE: its ledger exists and is fenced;
- DELETE: always (it keeps a full rebuild from resurrecting older records of that ledger).

A segment whose live share is under `gc_max_live_fraction` is rewritten, unless it is damaged
(non-zero bytes after its last valid record): a copy stops at the first invalid record, so it
would drop the live records after the damage, and their slots would then answer "no such
entry". A damaged segment is left as it is (its intact records are still served; a damaged one
fails its CRC and is answered CORRUPT) and reported in `segments_damaged`. Write order, so that a
crash at any step loses nothing live:
1. copy the live records, in their order, to `{S}-{g+1}.log.tmp`; fsync; rename to
   `{S}-{g+1}.log`; fsync the directory                                  (hook "copied")
2. re-point the index slots that refer to generation g at the copies; fsync those index files
                                                                         (hook "indexed")
3. only then remove `{S}-{g}.log`.
A crash before the rename leaves a `.tmp` that start-up removes; after it, start-up sees two
generations, re-points the index at the newer one (which is complete) and removes the older.
Because the new generation keeps the segment number, the order of records in the log, and
therefore any full rebuild of the index, is unchanged.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
from collections.abc import Callable, Mapping

from bookie.storage import diskio
from bookie.storage.apply import repoint_segment
from bookie.storage.index import EntryIndex, IndexDamagedError, LedgerState, fsync_directory, sync_index_files
from bookie.storage.journal import SegmentFiles
from bookie.storage.records import (
    ADD,
    DELETE,
    FENCE,
    SEGMENT_HEADER_SIZE,
    Record,
    encode_add,
    encode_marker,
    encode_segment_header,
    scan_segment,
)
from bookie.storage.recovery import nonzero_end

log = logging.getLogger(__name__)

_YIELD_EVERY = 2000  # records between two yields to the event loop
_WRITE_CHUNK_BYTES = 4 * 1024 * 1024
_MAX_GENERATION = 0xFFFF

GcHook = Callable[[str], None]


class GarbageCollector:
    """Works on the segment files, the index and a read-only view of the ledger table.

    The engine owns one collector and calls `run` with the first segment that a restart could
    still replay (the checkpoint's); it adds the returned counts to its own."""

    def __init__(
        self,
        segments: SegmentFiles,
        index: EntryIndex,
        ledgers: Mapping[int, LedgerState],
        max_live_fraction: float,
    ) -> None:
        assert 0 < max_live_fraction <= 1, "a fraction of a segment"
        self.segments = segments
        self.index = index
        self.ledgers = ledgers
        self.max_live_fraction = max_live_fraction
        self.hook: GcHook | None = None  # tests inject crashes between the steps
        self._running = False

    def _hook(self, step: str) -> None:
        if self.hook is not None:
            self.hook(step)

    async def run(self, checkpoint_segment: int) -> dict[str, int] | None:
        """Collect every eligible segment; None if a run is already under way."""
        if self._running:
            return None
        self._running = True
        result = {"segments_scanned": 0, "segments_rewritten": 0, "bytes_reclaimed": 0, "segments_damaged": 0}
        try:
            current = self.segments.current_segment
            for segment, generation in self.segments.list():
                if segment >= checkpoint_segment or segment >= current:
                    continue
                if generation >= _MAX_GENERATION:
                    continue
                await self._collect(segment, generation, result)
        finally:
            self._running = False
        return result

    def _live(self, rec: Record, segment: int, generation: int) -> bool:
        if rec.type == DELETE:
            return True
        st = self.ledgers.get(rec.ledger_id)
        if st is None:
            return False
        if rec.type == FENCE:
            return st.fenced
        try:
            slot = self.index.lookup(rec.ledger_id, rec.entry_id)
        except IndexDamagedError:
            return True  # unsure: keeping a dead record is harmless, dropping a live one is not
        return (
            slot is not None
            and slot.segment == segment
            and slot.generation == generation
            and slot.offset == rec.offset
        )

    async def _live_bytes(self, segment: int, generation: int) -> tuple[int, int, bool]:
        """(live bytes, record bytes, whether the file is whole) of a segment file."""
        path = self.segments.path(segment, generation)
        scan, records = scan_segment(path)
        live = 0
        for count, rec in enumerate(records):
            if self._live(rec, segment, generation):
                live += rec.length
            if count % _YIELD_EVERY == 0:
                await asyncio.sleep(0)
        total = max(scan.valid_end - SEGMENT_HEADER_SIZE, 0)  # final: the records are exhausted
        assert 0 <= live <= total, "live records are records of the segment"
        whole = scan.header_valid and nonzero_end(path, scan.valid_end, scan.file_size) == scan.valid_end
        return live, total, whole

    async def _collect(self, segment: int, generation: int, result: dict[str, int]) -> None:
        result["segments_scanned"] += 1
        live, total, whole = await self._live_bytes(segment, generation)
        if not whole:
            log.error("segment %d generation %d is damaged: not collected", segment, generation)
            result["segments_damaged"] += 1
            return
        if total == 0 or live >= total or live >= total * self.max_live_fraction:
            return
        new_generation = generation + 1
        await self._copy(segment, generation, new_generation)
        self._hook("copied")
        touched: set[int] = set()
        for _pause in repoint_segment(self.segments, self.index, segment, new_generation, touched):
            await asyncio.sleep(0)
        await asyncio.get_running_loop().run_in_executor(None, sync_index_files, self.index, touched)
        self._hook("indexed")
        before = self.segments.path(segment, generation).stat().st_size
        after = self.segments.path(segment, new_generation).stat().st_size
        self.segments.remove(segment, generation)
        await asyncio.get_running_loop().run_in_executor(None, fsync_directory, self.segments.directory)
        result["segments_rewritten"] += 1
        result["bytes_reclaimed"] += before - after

    async def _copy(self, segment: int, generation: int, new_generation: int) -> None:
        """Step 1: the live records, in order, into a new generation made durable by rename."""
        loop = asyncio.get_running_loop()
        final = self.segments.path(segment, new_generation)
        tmp = final.with_name(final.name + ".tmp")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        try:
            parts = [encode_segment_header(segment, new_generation)]
            size = len(parts[0])
            _scan, records = scan_segment(self.segments.path(segment, generation))
            for count, rec in enumerate(records):
                if self._live(rec, segment, generation):
                    data = _encode(rec)
                    parts.append(data)
                    size += len(data)
                if size >= _WRITE_CHUNK_BYTES:
                    await loop.run_in_executor(None, _write_all, fd, b"".join(parts))
                    parts, size = [], 0
                if count % _YIELD_EVERY == 0:
                    await asyncio.sleep(0)
            await loop.run_in_executor(None, _write_all, fd, b"".join(parts))
            await loop.run_in_executor(None, diskio.fsync, fd)
        except BaseException:
            # A full disk (or anything else) mid-copy: the old generation is untouched and whole.
            os.close(fd)
            with contextlib.suppress(FileNotFoundError):
                os.unlink(tmp)
            raise
        os.close(fd)
        os.replace(tmp, final)
        await loop.run_in_executor(None, fsync_directory, self.segments.directory)


def _encode(rec: Record) -> bytes:
    if rec.type == ADD:
        return encode_add(rec.ledger_id, rec.entry_id, rec.last_add_confirmed, rec.payload)
    return encode_marker(rec.type, rec.ledger_id)


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[diskio.write(fd, view) :]
