"""Unit tests of the on-disk formats: records, segment headers, index slots and the checkpoint."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from bookie.storage.index import (
    Checkpoint,
    EntryIndex,
    IndexDamagedError,
    LedgerState,
    Slot,
    encode_slot,
    read_checkpoint,
    write_checkpoint,
)
from bookie.storage.records import (
    ADD,
    DELETE,
    FENCE,
    RECORD_HEADER_SIZE,
    SEGMENT_HEADER_SIZE,
    decode_record,
    decode_segment_header,
    encode_add,
    encode_marker,
    encode_segment_header,
    find_valid_record,
    parse_segment_name,
    scan_segment,
    segment_name,
)

ids = st.integers(0, 2**63 - 1)


@given(ids, st.integers(0, 2**62), st.integers(-1, 2**62), st.binary(max_size=300))
def test_add_record_round_trip(ledger_id: int, entry_id: int, lac: int, payload: bytes) -> None:
    data = encode_add(ledger_id, entry_id, lac, payload)
    assert len(data) == RECORD_HEADER_SIZE + len(payload)
    rec = decode_record(b"pad" + data, 3, base_offset=100)
    assert rec is not None
    assert (rec.type, rec.ledger_id, rec.entry_id, rec.last_add_confirmed, rec.payload) == (
        ADD,
        ledger_id,
        entry_id,
        lac,
        payload,
    )
    assert (rec.offset, rec.length) == (103, len(data))


@given(st.binary(min_size=1, max_size=100), st.data())
def test_any_flipped_byte_is_detected(payload: bytes, data: st.DataObject) -> None:
    record = bytearray(encode_add(5, 6, 4, payload))
    position = data.draw(st.integers(0, len(record) - 1))
    record[position] ^= data.draw(st.integers(1, 255))
    rec = decode_record(bytes(record), 0)
    # A flip in the length field may make a shorter, still-invalid record; never a valid one.
    assert rec is None


@given(st.binary(max_size=100), st.data())
def test_any_truncation_is_detected(payload: bytes, data: st.DataObject) -> None:
    record = encode_add(1, 2, 1, payload)
    cut = data.draw(st.integers(0, len(record) - 1))
    assert decode_record(record[:cut], 0) is None


@pytest.mark.parametrize("record_type", [FENCE, DELETE])
def test_markers_round_trip(record_type: int) -> None:
    rec = decode_record(encode_marker(record_type, 42), 0)
    assert rec is not None and (rec.type, rec.ledger_id, rec.payload) == (record_type, 42, b"")


def test_zeroes_never_decode() -> None:
    assert decode_record(bytes(4096), 0) is None


def test_segment_header_and_name() -> None:
    header = encode_segment_header(7, 3)
    assert len(header) == SEGMENT_HEADER_SIZE
    assert decode_segment_header(header) == (7, 3)
    assert decode_segment_header(header[:10]) is None
    assert decode_segment_header(b"XXXX" + header[4:]) is None
    assert parse_segment_name(segment_name(7, 3)) == (7, 3)
    assert parse_segment_name("CHECKPOINT") is None
    assert parse_segment_name("0000000z-0000.log") is None


def test_scan_stops_at_the_first_invalid_record(tmp_path: Path) -> None:
    path = tmp_path / segment_name(1, 0)
    records = [encode_add(1, e, e - 1, b"p" * e) for e in range(50)]
    path.write_bytes(encode_segment_header(1, 0) + b"".join(records) + b"\x01\x00garbage")
    scan, found = scan_segment(path)
    entries = [rec.entry_id for rec in found]
    assert entries == list(range(50))
    assert scan.header_valid
    assert scan.valid_end == SEGMENT_HEADER_SIZE + sum(map(len, records))
    assert scan.file_size == scan.valid_end + 9


def test_scan_of_a_headless_file_finds_nothing(tmp_path: Path) -> None:
    path = tmp_path / segment_name(1, 0)
    path.write_bytes(b"QJN")
    scan, found = scan_segment(path)
    assert list(found) == [] and not scan.header_valid


def test_scan_reads_records_larger_than_its_buffer(tmp_path: Path) -> None:
    path = tmp_path / segment_name(2, 0)
    big = encode_add(9, 0, -1, b"b" * (5 * 1024 * 1024))
    path.write_bytes(encode_segment_header(2, 0) + encode_add(9, 1, -1, b"s") + big)
    _scan, found = scan_segment(path)
    assert [len(rec.payload) for rec in found] == [1, 5 * 1024 * 1024]


def test_index_slots(tmp_path: Path) -> None:
    index = EntryIndex(tmp_path, max_open_files=2)
    index.write_slots(1, 3, encode_slot(2, 1, 100, 50) + encode_slot(2, 1, 150, 60))
    for ledger_id in range(10, 15):  # push ledger 1 out of the descriptor cache
        index.write_slots(ledger_id, 0, encode_slot(1, 0, 16, 40))
    assert index.lookup(1, 3) == Slot(2, 1, 100, 50)
    assert index.lookup(1, 4) == Slot(2, 1, 150, 60)
    assert index.lookup(1, 0) is None and index.lookup(1, 99) is None and index.lookup(77, 0) is None
    assert index.check_file(1, 4) and not index.check_file(1, 5)
    index.write_slots(1, 0, b"\x01" * 16)
    with pytest.raises(IndexDamagedError):
        index.lookup(1, 0)
    index.remove(1)
    assert index.lookup(1, 3) is None
    index.close()


def test_checkpoint_round_trip_and_damage(tmp_path: Path) -> None:
    ledgers = {1: LedgerState(4, 5, True), 2**63: LedgerState(-1, -1, False)}
    write_checkpoint(tmp_path, Checkpoint(3, 4096, ledgers))
    loaded = read_checkpoint(tmp_path)
    assert loaded is not None and (loaded.segment, loaded.offset, loaded.ledgers) == (3, 4096, ledgers)
    data = bytearray((tmp_path / "CHECKPOINT").read_bytes())
    data[-3] ^= 1
    (tmp_path / "CHECKPOINT").write_bytes(bytes(data))
    assert read_checkpoint(tmp_path) is None
    (tmp_path / "CHECKPOINT").write_bytes(bytes(data[:20]))
    assert read_checkpoint(tmp_path) is None
    (tmp_path / "CHECKPOINT").unlink()
    assert read_checkpoint(tmp_path) is None


# A segment of three records after its header: a (0..183), a marker, and c whose payload ends in
# zeros (so the file's last non-zero byte is before c's end). name, damage, search start, end
# (None: the file's last non-zero byte + 1), the record found (its index in OFFSETS) or None.
RECS = [encode_add(1, 0, -1, b"a" * 150), encode_marker(FENCE, 1), encode_add(1, 1, 0, b"c" + bytes(99))]
OFFSETS = [SEGMENT_HEADER_SIZE + sum(len(r) for r in RECS[:k]) for k in range(4)]
RESYNC: list[tuple[str, tuple[int, bytes] | None, int, int | None, int | None]] = [
    ("next record after a start inside one", None, OFFSETS[0] + 1, None, 1),
    ("a record starting at the start itself", None, OFFSETS[1], None, 1),
    ("a garbled record is not found", (OFFSETS[1] + 12, b"\x07"), OFFSETS[0] + 1, None, 2),
    ("a record whose payload ends in zeros", None, OFFSETS[1] + 1, None, 2),
    ("nothing past the last record", None, OFFSETS[2] + 1, None, None),
    ("a record must start before the end", None, OFFSETS[1] + 1, OFFSETS[2], None),
    ("a torn last record is not found", (OFFSETS[3] - 1, b"\x01"), OFFSETS[1] + 1, None, None),
]  # fmt: skip


@pytest.mark.parametrize(("name", "damage", "start", "end", "found"), RESYNC, ids=[r[0] for r in RESYNC])
def test_find_valid_record_resyncs_at_any_offset(
    tmp_path: Path,
    name: str,
    damage: tuple[int, bytes] | None,
    start: int,
    end: int | None,
    found: int | None,
) -> None:
    data = bytearray(encode_segment_header(1, 0) + b"".join(RECS) + bytes(4096))
    if damage is not None:
        data[damage[0] : damage[0] + len(damage[1])] = damage[1]
    path = tmp_path / "00000001-0000.log"
    path.write_bytes(bytes(data))
    stop = len(bytes(data).rstrip(b"\0")) if end is None else end
    assert find_valid_record(path, start, stop) == (None if found is None else OFFSETS[found])
