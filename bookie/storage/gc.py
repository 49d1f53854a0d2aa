"""The garbage collector: reclaims the space of deleted ledgers in sealed segments.

A segment is eligible once it is sealed and before the checkpoint's segment (so no replay will
touch it again). A record in segment S, generation g, at offset o is live when:
- ADD: its ledger exists and the index slot of (ledger, entry) points at (S, g, o);
- FENCE: its ledger exists and is fenced;
- DELETE: always (it keeps a full rebuild from resurrecting older records of that ledger).

A segment whose live share is under `gc_max_live_fraction` is rewritten. Write order, so that a
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
import os
from typing import TYPE_CHECKING

from bookie.storage.index import IndexDamagedError, encode_slot, fsync_directory
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
from bookie.storage.recovery import sync_index_files

if TYPE_CHECKING:
    from bookie.storage.engine import LedgerStorage

_YIELD_EVERY = 2000  # records between two yields to the event loop
_WRITE_CHUNK_BYTES = 4 * 1024 * 1024
_MAX_GENERATION = 0xFFFF


class GarbageCollector:
    def __init__(self, engine: LedgerStorage) -> None:
        self.engine = engine
        self.segments = engine._segments
        self.index = engine._index
        self.result = {"segments_scanned": 0, "segments_rewritten": 0, "bytes_reclaimed": 0}

    def _hook(self, step: str) -> None:
        if self.engine.gc_hook is not None:
            self.engine.gc_hook(step)

    async def run(self) -> dict[str, int]:
        engine = self.engine
        if engine._gc_running:
            return self.result
        engine._gc_running = True
        try:
            current = self.segments.current_segment
            for segment, generation in self.segments.list():
                if segment >= engine.checkpoint_segment or segment >= current:
                    continue
                if generation >= _MAX_GENERATION:
                    continue
                await self._collect(segment, generation)
            engine.counters["gc_runs"] += 1
            engine.counters["gc_segments"] += self.result["segments_rewritten"]
        finally:
            engine._gc_running = False
        return self.result

    def _live(self, rec: Record, segment: int, generation: int) -> bool:
        if rec.type == DELETE:
            return True
        st = self.engine._ledgers.get(rec.ledger_id)
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

    async def _live_bytes(self, segment: int, generation: int) -> tuple[int, int]:
        scan, records = scan_segment(self.segments.path(segment, generation))
        live = 0
        for count, rec in enumerate(records):
            if self._live(rec, segment, generation):
                live += rec.length
            if count % _YIELD_EVERY == 0:
                await asyncio.sleep(0)
        return live, max(scan.file_size - SEGMENT_HEADER_SIZE, 0)

    async def _collect(self, segment: int, generation: int) -> None:
        self.result["segments_scanned"] += 1
        live, total = await self._live_bytes(segment, generation)
        if total == 0 or live >= total or live >= total * self.engine.config.gc_max_live_fraction:
            return
        new_generation = generation + 1
        await self._copy(segment, generation, new_generation)
        self._hook("copied")
        touched = await self._repoint(segment, new_generation)
        await asyncio.get_running_loop().run_in_executor(None, sync_index_files, self.index, touched)
        self._hook("indexed")
        before = self.segments.path(segment, generation).stat().st_size
        after = self.segments.path(segment, new_generation).stat().st_size
        self.segments.remove(segment, generation)
        await asyncio.get_running_loop().run_in_executor(None, fsync_directory, self.segments.directory)
        self.result["segments_rewritten"] += 1
        self.result["bytes_reclaimed"] += before - after

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
            await loop.run_in_executor(None, os.fsync, fd)
        finally:
            os.close(fd)
        os.replace(tmp, final)
        await loop.run_in_executor(None, fsync_directory, self.segments.directory)

    async def _repoint(self, segment: int, new_generation: int) -> set[int]:
        """Step 2: slots that still point at an older generation now point at the copies."""
        touched: set[int] = set()
        _scan, records = scan_segment(self.segments.path(segment, new_generation))
        for count, rec in enumerate(records):
            if rec.type == ADD:
                try:
                    slot = self.index.lookup(rec.ledger_id, rec.entry_id)
                except IndexDamagedError:
                    slot = None
                if slot is not None and slot.segment == segment and slot.generation != new_generation:
                    slot_bytes = encode_slot(segment, new_generation, rec.offset, rec.length)
                    self.index.write_slots(rec.ledger_id, rec.entry_id, slot_bytes)
                    touched.add(rec.ledger_id)
            if count % _YIELD_EVERY == 0:
                await asyncio.sleep(0)
        return touched


def _encode(rec: Record) -> bytes:
    if rec.type == ADD:
        return encode_add(rec.ledger_id, rec.entry_id, rec.last_add_confirmed, rec.payload)
    return encode_marker(rec.type, rec.ledger_id)


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]
