"""Journal segment files and the records in them: the bookie's log, which is also its entry storage.

Records of every ledger are appended to the current segment with group commit; a segment is
rolled at `journal_max_size_bytes`. The garbage collector rewrites a sealed segment as a new
*generation* of the same segment number, so the order of records across the log (segment
number, then offset) never changes and replaying every segment in order always rebuilds the
same state.

File name: `journal/{segment:08x}-{generation:04x}.log`.

Segment header, format version 1 (16 bytes, little endian):

    offset 0   4 bytes  magic b"QJNL"
    offset 4   u16      format version (1)
    offset 6   u16      reserved, 0
    offset 8   u32      segment number (>= 1)
    offset 12  u32      generation (0 for the journal's own file, +1 per garbage collection)

Record, format version 1 (34-byte header, then the payload):

    offset 0   u32      payload length in bytes (<= MAX_PAYLOAD_BYTES)
    offset 4   u32      CRC32C (Castagnoli) of bytes 8 .. end of payload
    offset 8   u8       type: 1 = ADD, 2 = FENCE, 3 = DELETE (0 is never valid, so a zeroed
                        region can never decode as a record)
    offset 9   u8       flags, 0 (reserved)
    offset 10  u64      ledger id
    offset 18  i64      entry id (ADD; -1 otherwise)
    offset 26  i64      last-add-confirmed the writer sent with the add (ADD; -1 otherwise)
    offset 34  ...      payload (ADD only; FENCE and DELETE have length 0)

A record is valid only if its whole header and payload are in the file, its type is known and
its CRC matches. Replay stops at the first invalid record. If a valid record can still be found
at any offset after it (`find_valid_record`), the damage is not a tail and the bookie refuses to
start (`bookie.storage.recovery`). Otherwise, in the last segment that is the end of the log
(the zeroed reservation of a preallocated segment, or a torn or garbled tail, which is cut off);
in a sealed segment the rest of that segment is skipped and reported.
"""

from __future__ import annotations

import mmap
import os
import re
import struct
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import google_crc32c

FORMAT_VERSION = 1
SEGMENT_MAGIC = b"QJNL"
SEGMENT_HEADER_FORMAT = "<4sHHII"
SEGMENT_HEADER_SIZE = 16
SEGMENT_HEADER = struct.Struct(SEGMENT_HEADER_FORMAT)

# A record header is a prefix (payload length, CRC) and a body (type, flags, ledger, entry, LAC);
# the CRC covers the body and the payload, so the two halves are packed apart on the write path.
RECORD_PREFIX_FORMAT = "<II"
RECORD_PREFIX_SIZE = 8
RECORD_PREFIX = struct.Struct(RECORD_PREFIX_FORMAT)
RECORD_BODY_FORMAT = "<BBQqq"
RECORD_BODY_SIZE = 26
RECORD_BODY = struct.Struct(RECORD_BODY_FORMAT)
RECORD_HEADER_FORMAT = "<IIBBQqq"
RECORD_HEADER_SIZE = 34
RECORD_HEADER = struct.Struct(RECORD_HEADER_FORMAT)
_RECORD_LEAD = struct.Struct("<IIB")  # length, CRC, type: enough to judge a record's header

assert struct.calcsize(SEGMENT_HEADER_FORMAT) == SEGMENT_HEADER_SIZE
assert struct.calcsize(RECORD_PREFIX_FORMAT) == RECORD_PREFIX_SIZE
assert struct.calcsize(RECORD_BODY_FORMAT) == RECORD_BODY_SIZE
assert struct.calcsize(RECORD_HEADER_FORMAT) == RECORD_HEADER_SIZE == RECORD_PREFIX_SIZE + RECORD_BODY_SIZE

ADD = 1
FENCE = 2
DELETE = 3
_TYPES = (ADD, FENCE, DELETE)

MAX_PAYLOAD_BYTES = 64 * 1024 * 1024

_crc_value = google_crc32c.value
_crc_extend = google_crc32c.extend


@dataclass(frozen=True, slots=True)
class Record:
    """A decoded record and where it sits in its segment file."""

    offset: int
    length: int  # whole record: header + payload
    type: int
    ledger_id: int
    entry_id: int
    last_add_confirmed: int
    payload: bytes


def segment_name(segment: int, generation: int) -> str:
    return f"{segment:08x}-{generation:04x}.log"


def parse_segment_name(name: str) -> tuple[int, int] | None:
    """(segment, generation) of a segment file name, None for any other file."""
    if not name.endswith(".log") or len(name) != 17 or name[8] != "-":
        return None
    try:
        return int(name[:8], 16), int(name[9:13], 16)
    except ValueError:
        return None


def encode_segment_header(segment: int, generation: int) -> bytes:
    return SEGMENT_HEADER.pack(SEGMENT_MAGIC, FORMAT_VERSION, 0, segment, generation)


def decode_segment_header(data: bytes) -> tuple[int, int] | None:
    """(segment, generation), or None if the header is short, foreign or of another version."""
    if len(data) < SEGMENT_HEADER_SIZE:
        return None
    magic, version, _, segment, generation = SEGMENT_HEADER.unpack_from(data)
    if magic != SEGMENT_MAGIC or version != FORMAT_VERSION:
        return None
    return segment, generation


def encode_add(ledger_id: int, entry_id: int, last_add_confirmed: int, payload: bytes) -> bytes:
    assert ledger_id >= 0 and entry_id >= 0 and len(payload) <= MAX_PAYLOAD_BYTES, "checked by the caller"
    body = RECORD_BODY.pack(ADD, 0, ledger_id, entry_id, last_add_confirmed)
    crc = _crc_extend(_crc_value(body), payload)
    return RECORD_PREFIX.pack(len(payload), crc) + body + payload


def encode_marker(record_type: int, ledger_id: int) -> bytes:
    """A FENCE or DELETE record (no payload)."""
    assert record_type in (FENCE, DELETE)
    body = RECORD_BODY.pack(record_type, 0, ledger_id, -1, -1)
    return RECORD_PREFIX.pack(0, _crc_value(body)) + body


def decode_record(data: bytes | memoryview | mmap.mmap, offset: int, base_offset: int = 0) -> Record | None:
    """The record starting at `offset` in `data`, or None if it is torn, garbled or unknown.

    `base_offset` is added to the reported offset (the position of `data` in its file)."""
    end = len(data)
    if offset + RECORD_HEADER_SIZE > end:
        return None
    length, crc, rtype, _flags, ledger_id, entry_id, lac = RECORD_HEADER.unpack_from(data, offset)
    if rtype not in _TYPES or length > MAX_PAYLOAD_BYTES:
        return None
    stop = offset + RECORD_HEADER_SIZE + length
    if stop > end:
        return None
    if _crc_value(data[offset + RECORD_PREFIX_SIZE : stop]) != crc:
        return None
    payload = bytes(data[offset + RECORD_HEADER_SIZE : stop])
    return Record(base_offset + offset, stop - offset, rtype, ledger_id, entry_id, lac, payload)


@dataclass(slots=True)
class ScanResult:
    """What scanning a segment file found: its identity, and where its valid records end."""

    segment: int
    generation: int
    valid_end: int  # offset just past the last valid record (>= header size if header valid)
    file_size: int
    header_valid: bool


_SCAN_CHUNK = 4 * 1024 * 1024


def scan_segment(path: Path, start: int = SEGMENT_HEADER_SIZE) -> tuple[ScanResult, Iterator[Record]]:
    """Validate the header, then iterate the records from `start` in file order.

    The iterator stops at the first invalid record; `ScanResult.valid_end` is final once the
    iterator is exhausted. Reads in large chunks so replay costs no syscall per record."""
    with open(path, "rb") as f:
        head = f.read(SEGMENT_HEADER_SIZE)
        size = os.fstat(f.fileno()).st_size
    ident = decode_segment_header(head)
    parsed = parse_segment_name(path.name) or (0, 0)
    result = ScanResult(parsed[0], parsed[1], 0, size, ident is not None)
    if ident is None:
        return result, iter(())
    result.valid_end = max(start, SEGMENT_HEADER_SIZE)
    return result, _iter_records(path, result)


def _iter_records(path: Path, result: ScanResult) -> Iterator[Record]:
    with open(path, "rb") as f:
        pos = result.valid_end
        buf = b""
        buf_start = pos
        while True:
            rel = pos - buf_start
            rec = decode_record(buf, rel, buf_start)
            if rec is None:
                need = _needed(buf, rel)
                if buf_start + len(buf) >= result.file_size or need is None:
                    return  # end of file, or a record that cannot be valid
                f.seek(pos)
                buf = f.read(max(_SCAN_CHUNK, need))
                buf_start = pos
                rec = decode_record(buf, 0, buf_start)
                if rec is None:
                    return
            pos = rec.offset + rec.length
            result.valid_end = pos
            yield rec


def _needed(buf: bytes, rel: int) -> int | None:
    """Bytes a record starting at `rel` needs in the buffer, None if its header is already bad."""
    if rel + RECORD_HEADER_SIZE > len(buf):
        return RECORD_HEADER_SIZE
    length, _crc, rtype = _RECORD_LEAD.unpack_from(buf, rel)
    if rtype not in _TYPES or length > MAX_PAYLOAD_BYTES:
        return None
    total: int = RECORD_HEADER_SIZE + length
    if rel + total > len(buf):
        return total
    return None  # the whole record was in the buffer and it failed its CRC


# Where a record could start: a length of at most MAX_PAYLOAD_BYTES (its top byte <= 4), any
# CRC, a known type and zero flags. A lookahead, so that overlapping candidates are all tried.
_CANDIDATE = re.compile(rb"(?=[\s\S]{3}[\x00-\x04][\s\S]{4}[\x01-\x03]\x00)")
assert MAX_PAYLOAD_BYTES >> 24 == 4 and _TYPES == (1, 2, 3)


def find_valid_record(path: Path, start: int, end: int) -> int | None:
    """The offset of the first valid record that starts in [start, end) of the file, or None.

    Records are not aligned, so every offset is tried (resync): the pattern picks the offsets
    whose header could be valid, and only those pay for a CRC. A random match also needs a 32-bit
    CRC to agree, so a hit is a record that was written whole. A record's type byte is never
    zero, so one that starts before `end` (where only zeros follow) is matched within a header
    of it; its payload may run on past `end`."""
    if end <= start:
        return None
    with open(path, "rb") as f:
        size = os.fstat(f.fileno()).st_size
        if size <= start:
            return None
        with mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as mapped:
            for match in _CANDIDATE.finditer(mapped, start, min(size, end + RECORD_HEADER_SIZE)):
                if match.start() < end and decode_record(mapped, match.start()) is not None:
                    return match.start()
    return None
