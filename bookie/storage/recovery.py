"""Start-up: finish an interrupted garbage collection, replay the log into the index, cut a torn tail.

Order at start:
1. Remove `*.tmp` files (a garbage collection or checkpoint that never completed).
2. For a segment with several generations, the highest is complete (it was renamed into place
   only after its fsync): re-point the index at it, sync the index, then remove the older ones.
3. Read the checkpoint; if it is missing, damaged, or an index file it vouches for fails its
   checks, wipe the index and replay every segment from the start (a full rebuild).
4. Replay the records after the checkpoint. The last segment ends at its first invalid record:
   the tail after it is truncated away with a warning. In a sealed segment the rest of the
   segment after an invalid record is skipped, with an error: later segments still count.
"""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass, field
from pathlib import Path

from bookie.storage.index import (
    EntryIndex,
    LedgerState,
    encode_slot,
    fsync_directory,
    read_checkpoint,
)
from bookie.storage.journal import SegmentFiles
from bookie.storage.records import ADD, DELETE, FENCE, SEGMENT_HEADER_SIZE, Record, scan_segment

log = logging.getLogger(__name__)


class SlotRuns:
    """Collects index slots per ledger so consecutive entries cost one pwrite per run."""

    def __init__(self, index: EntryIndex) -> None:
        self._index = index
        self._runs: dict[int, tuple[int, list[bytes]]] = {}  # ledger -> (first entry, slots)
        self.current: list[bytes] = []  # the slots of the run `add` last extended or started

    def add(self, ledger_id: int, entry_id: int, slot: bytes) -> None:
        run = self._runs.get(ledger_id)
        if run is not None:
            first, slots = run
            if first + len(slots) == entry_id:
                slots.append(slot)
                self.current = slots
                return
            self.flush(ledger_id)
        self.current = [slot]
        self._runs[ledger_id] = (entry_id, self.current)

    def flush(self, ledger_id: int) -> None:
        run = self._runs.pop(ledger_id, None)
        if run is not None:
            first, slots = run
            self._index.write_slots(ledger_id, first, b"".join(slots))

    def flush_all(self) -> None:
        for ledger_id in list(self._runs):
            self.flush(ledger_id)


def apply_record(
    rec: Record, segment: int, generation: int, ledgers: dict[int, LedgerState], runs: SlotRuns
) -> None:
    """Replay one record into the ledger table and the index."""
    if rec.type == ADD:
        st = ledgers.get(rec.ledger_id)
        if st is None:
            st = ledgers[rec.ledger_id] = LedgerState()
        st.last_entry_id = max(st.last_entry_id, rec.entry_id)
        st.last_add_confirmed = max(st.last_add_confirmed, rec.last_add_confirmed)
        runs.add(rec.ledger_id, rec.entry_id, encode_slot(segment, generation, rec.offset, rec.length))
    elif rec.type == FENCE:
        ledgers.setdefault(rec.ledger_id, LedgerState()).fenced = True
    elif rec.type == DELETE:
        runs.flush(rec.ledger_id)
        ledgers.pop(rec.ledger_id, None)
        runs._index.remove(rec.ledger_id)


@dataclass
class Recovered:
    ledgers: dict[int, LedgerState]
    last_segment: int  # 0 if there is none yet
    valid_end: int | None  # where appends continue in last_segment; None: recreate it
    full_rebuild: bool
    truncated_bytes: int = 0
    skipped: list[str] = field(default_factory=list)


def remove_temporary_files(*directories: Path) -> None:
    for directory in directories:
        for name in os.listdir(directory):
            if name.endswith(".tmp"):
                os.unlink(directory / name)


def repoint_segment(segments: SegmentFiles, index: EntryIndex, segment: int, generation: int) -> set[int]:
    """Point every slot that refers to another generation of `segment` at this generation's copy.

    Returns the ledgers whose index files were written (the caller syncs them)."""
    touched: set[int] = set()
    _result, records = scan_segment(segments.path(segment, generation))
    for rec in records:
        if rec.type != ADD:
            continue
        slot = index.lookup(rec.ledger_id, rec.entry_id)
        if slot is None or slot.segment != segment or slot.generation == generation:
            continue
        index.write_slots(
            rec.ledger_id, rec.entry_id, encode_slot(segment, generation, rec.offset, rec.length)
        )
        touched.add(rec.ledger_id)
    return touched


def sync_index_files(index: EntryIndex, ledgers: set[int]) -> None:
    """fsync the index files of `ledgers` through descriptors of our own (safe in a thread)."""
    for ledger_id in ledgers:
        try:
            fd = os.open(index.path(ledger_id), os.O_RDONLY)
        except FileNotFoundError:
            continue  # deleted meanwhile: nothing to keep
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def resolve_generations(segments: SegmentFiles, index: EntryIndex, use_index: bool) -> None:
    """Keep only the newest complete generation of each segment (step 2 above)."""
    by_segment: dict[int, list[int]] = {}
    for segment, generation in segments.list():
        by_segment.setdefault(segment, []).append(generation)
    for segment, generations in by_segment.items():
        if len(generations) < 2:
            continue
        newest = max(generations)
        log.warning("segment %d has generations %s: finishing garbage collection", segment, generations)
        if use_index:
            sync_index_files(index, repoint_segment(segments, index, segment, newest))
        for generation in generations:
            if generation != newest:
                segments.remove(segment, generation)
    fsync_directory(segments.directory)


def recover(segments: SegmentFiles, index: EntryIndex) -> Recovered:
    remove_temporary_files(segments.directory, index.directory)
    checkpoint = read_checkpoint(index.directory)
    if checkpoint is not None and not all(
        index.check_file(ledger_id, st.last_entry_id) for ledger_id, st in checkpoint.ledgers.items()
    ):
        log.warning("an index file failed its checks: rebuilding the index from the log")
        checkpoint = None
    if checkpoint is not None and not _checkpoint_within_log(segments, checkpoint.segment, checkpoint.offset):
        log.warning("the index checkpoint points past the end of the log: rebuilding the index")
        checkpoint = None
    resolve_generations(segments, index, use_index=checkpoint is not None)
    if checkpoint is None:
        if segments.list():
            log.warning("no valid index checkpoint: rebuilding the index from every segment")
        index.wipe()
        ledgers: dict[int, LedgerState] = {}
        start_segment, start_offset = 0, SEGMENT_HEADER_SIZE
    else:
        ledgers = dict(checkpoint.ledgers)
        start_segment, start_offset = checkpoint.segment, checkpoint.offset
    result = Recovered(ledgers, 0, None, checkpoint is None)
    _replay(segments, index, result, start_segment, start_offset)
    for ledger_id in list(index.files()):
        if ledger_id not in ledgers:
            index.remove(ledger_id)  # its DELETE was applied but the file outlived a crash
    return result


def _checkpoint_within_log(segments: SegmentFiles, segment: int, offset: int) -> bool:
    """False when the log was cut below the checkpoint (damage): what the index vouches for is gone."""
    try:
        size = segments.path(segment, 0).stat().st_size
    except FileNotFoundError:
        return False  # the checkpoint's segment is created before the checkpoint and never collected
    return size >= offset


def _replay(
    segments: SegmentFiles, index: EntryIndex, result: Recovered, start_segment: int, start_offset: int
) -> None:
    listed = [(s, g) for s, g in segments.list() if s >= start_segment]
    runs = SlotRuns(index)
    for position, (segment, generation) in enumerate(listed):
        last = position == len(listed) - 1
        start = start_offset if segment == start_segment else SEGMENT_HEADER_SIZE
        scan, records = scan_segment(segments.path(segment, generation), start)
        for rec in records:
            apply_record(rec, segment, generation, result.ledgers, runs)
        runs.flush_all()
        if last:
            result.last_segment = segment
            if generation != 0:
                # Only sealed segments are ever collected; append to a new one after it.
                result.last_segment, result.valid_end = segment + 1, None
            elif not scan.header_valid:
                # An empty or headless last file holds nothing acknowledged: start it afresh.
                log.warning("segment %d has no valid header: recreating it", segment)
                result.valid_end = None
            else:
                result.valid_end = scan.valid_end
                result.truncated_bytes = scan.file_size - scan.valid_end
                if result.truncated_bytes:
                    log.warning(
                        "segment %d: torn or garbled tail of %d bytes after offset %d cut off",
                        segment,
                        result.truncated_bytes,
                        scan.valid_end,
                    )
        elif scan.valid_end < scan.file_size:
            message = f"segment {segment}: invalid record at offset {scan.valid_end}, rest skipped"
            log.error(message)
            result.skipped.append(message)
