"""Start-up: finish an interrupted garbage collection, replay the log into the index, cut a torn
tail, and refuse to start on damage that is not a tail.

Order at start:
1. Remove `*.tmp` files (a garbage collection or checkpoint that never completed).
2. For a segment with several generations, the highest is complete (it was renamed into place
   only after its fsync): re-point the index at it, sync the index, then remove the older ones.
3. Read the checkpoint; if it is missing, damaged, or an index file it vouches for fails its
   checks, wipe the index and replay every segment from the start (a full rebuild).
4. Replay the records after the checkpoint; a segment's records end at its first invalid one.
   Zeros after it are the segment's preallocated reservation. Otherwise the rest of the segment
   is searched for a valid record at every offset (`find_valid_record`). If one is found, the
   damage is not a torn tail (a torn tail is the last group written, never synced, so nothing
   intact follows it): JournalDamagedError, and nothing is cut. In a sealed segment any
   non-zero bytes after the last valid record refuse the start as well: a segment is sealed only
   after its last group was synced, so it has no torn tail. Only in the last segment, with
   nothing valid after it, is it a torn or garbled tail: its first MAX_BROKEN_BYTES are copied
   to `<segment>.log.broken` (fsynced; the newest MAX_BROKEN_FILES copies are kept) and the
   engine then cuts it off and reserves the space again.

Refusing is chosen over starting with the affected ledgers "in limbo" (answering unknown for
what is missing): a damaged range does not say which ledgers it held, so every ledger of the
segment would be in doubt, for longer than this start; a bookie that is down is already an
unknown answer (never "no such entry") to clients and to ledger recovery, while its ledgers'
other copies stay readable. docs/storage-format.md has the whole argument and its cost (an
unsynced last group written out of order by a power loss also refuses the start).
"""

from __future__ import annotations

import contextlib
import logging
import os
from dataclasses import dataclass
from pathlib import Path

from bookie.errors import JournalDamagedError
from bookie.storage import diskio
from bookie.storage.apply import apply_record, repoint_segment_now
from bookie.storage.index import (
    EntryIndex,
    LedgerState,
    SlotRuns,
    encode_slot,
    fsync_directory,
    read_checkpoint,
    sync_index_files,
)
from bookie.storage.journal import SegmentFiles
from bookie.storage.records import ADD, SEGMENT_HEADER_SIZE, find_valid_record, scan_segment

log = logging.getLogger(__name__)

BROKEN_SUFFIX = ".broken"
MAX_BROKEN_BYTES = 1024 * 1024  # of a cut tail copied aside
MAX_BROKEN_FILES = 4
_TAIL_CHUNK_BYTES = 1024 * 1024


@dataclass
class Recovered:
    ledgers: dict[int, LedgerState]
    last_segment: int  # 0 if there is none yet
    valid_end: int | None  # where appends continue in last_segment; None: recreate it
    full_rebuild: bool
    truncated_bytes: int = 0


def remove_temporary_files(*directories: Path) -> None:
    for directory in directories:
        for name in os.listdir(directory):
            if name.endswith(".tmp"):
                os.unlink(directory / name)


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
            sync_index_files(index, repoint_segment_now(segments, index, segment, newest))
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
            slot = encode_slot(segment, generation, rec.offset, rec.length) if rec.type == ADD else b""
            apply_record(
                result.ledgers, runs, rec.type, rec.ledger_id, rec.entry_id, rec.last_add_confirmed, slot
            )
        runs.flush_all()
        path = segments.path(segment, generation)
        damaged_end = _refuse_unless_tail(path, scan.valid_end, scan.file_size)
        if last and generation == 0 and not scan.header_valid:
            # An empty or headless last file holds nothing acknowledged: start it afresh.
            result.last_segment = segment
            log.warning("segment %d has no valid header: recreating it", segment)
        elif last and generation == 0:
            result.last_segment, result.valid_end = segment, scan.valid_end
            result.truncated_bytes = keep_cut_tail(path, scan.valid_end, damaged_end)
        else:
            if last:
                # Only sealed segments are ever collected; append to a new one after it.
                result.last_segment, result.valid_end = segment + 1, None
            if damaged_end > scan.valid_end:
                # A segment is sealed only after its last group was synced, so whatever follows
                # its last valid record is damage to acknowledged records, never a torn tail.
                # (Zeros alone are the reservation of a segment sealed by a crash mid-roll.)
                log.error("sealed segment %s: damaged at offset %d", path.name, scan.valid_end)
                raise JournalDamagedError(path.name, scan.valid_end, None)


def _refuse_unless_tail(path: Path, valid_end: int, size: int) -> int:
    """Where the non-zero bytes after the last valid record end; raises JournalDamagedError if a
    valid record starts anywhere after the first invalid one (the damage is then not a tail)."""
    end = nonzero_end(path, valid_end, size)
    if end > valid_end:
        found = find_valid_record(path, valid_end + 1, end)
        if found is not None:
            log.error("segment %s: damaged at offset %d, valid record at %d", path.name, valid_end, found)
            raise JournalDamagedError(path.name, valid_end, found)
    return end


def nonzero_end(path: Path, start: int, size: int) -> int:
    """Where the bytes after `start` turn to zeros for good.

    The zeros after the last record are the journal's preallocated reservation, not damage."""
    end = start
    stop = size
    with open(path, "rb") as f:
        f.seek(start)
        position = start
        while position < stop:
            chunk = f.read(min(_TAIL_CHUNK_BYTES, stop - position))
            if not chunk:
                break
            kept = len(chunk.rstrip(b"\0"))
            if kept:
                end = position + kept
            position += len(chunk)
    return end


def keep_cut_tail(path: Path, valid_end: int, end: int) -> int:
    """Copy the torn or garbled bytes [valid_end, end) after the last valid record to
    `<segment>.broken` before they are cut off (the first `MAX_BROKEN_BYTES` of them, fsynced),
    for a later diagnosis; `end` is where only zeros follow.

    Returns how many non-zero bytes followed the last valid record. Only the newest
    `MAX_BROKEN_FILES` copies are kept, so repeated crashes cannot fill the disk."""
    if end == valid_end:
        return 0
    log.warning(
        "segment %s: torn or garbled tail of %d bytes after offset %d cut off (copy in %s)",
        path.name,
        end - valid_end,
        valid_end,
        path.name + BROKEN_SUFFIX,
    )
    with open(path, "rb") as f:
        f.seek(valid_end)
        cut = f.read(min(end - valid_end, MAX_BROKEN_BYTES))
    broken = path.with_name(path.name + BROKEN_SUFFIX)
    tmp = broken.with_name(broken.name + ".tmp")
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        try:
            diskio.write(fd, cut)
            diskio.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, broken)
    except OSError as exc:  # a diagnosis aid must not keep the bookie from starting
        log.warning("could not keep the cut tail of %s: %s", path.name, exc)
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
    _prune_broken(path.parent)
    fsync_directory(path.parent)
    return end - valid_end


def _prune_broken(directory: Path) -> None:
    copies = sorted(directory.glob("*" + BROKEN_SUFFIX), key=lambda p: p.stat().st_mtime_ns)
    for old in copies[:-MAX_BROKEN_FILES]:
        old.unlink()
