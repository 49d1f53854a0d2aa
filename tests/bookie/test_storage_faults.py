"""Fault table for the storage engine: real files torn, garbled or removed, then a restart.

Each row of FAULTS damages the data directory of an engine that wrote entries 0..9 of ledger 1
and states which entries must survive. After every recovery the engine must start, never serve a
damaged entry, accept new adds, and keep them across another restart. Each row of NOT_A_TAIL
damages the log before a record that is still intact: that is not a torn tail, so the engine
must refuse to start and leave every byte of the log as it was.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from bookie.errors import BookieError, JournalDamagedError, NoSuchEntryError, NoSuchLedgerError
from bookie.storage.engine import LedgerStorage, StorageConfig
from bookie.storage.records import RECORD_HEADER_SIZE, SEGMENT_HEADER_SIZE
from bookie.storage.recovery import BROKEN_SUFFIX, MAX_BROKEN_BYTES, MAX_BROKEN_FILES

PAYLOAD_BYTES = 1000
RECORD_BYTES = RECORD_HEADER_SIZE + PAYLOAD_BYTES
ENTRIES = 10


GARBAGE = bytes(range(1, 256)) * 12  # 3060 bytes, none of them zero


def payload(entry_id: int) -> bytes:
    return bytes([entry_id % 251]) * PAYLOAD_BYTES


async def open_storage(path: Path, journal_max_size_bytes: int = 1 << 20) -> LedgerStorage:
    config = StorageConfig(
        path, journal_max_size_bytes=journal_max_size_bytes, disk_check_interval_s=3600, gc_interval_s=3600
    )
    storage = LedgerStorage(config, disk_usage=lambda _p: 0.1)
    await storage.start()
    return storage


def only_segment(path: Path) -> Path:
    files = sorted((path / "journal").glob("*.log"))
    assert len(files) == 1, files
    return files[0]


def record_end(k: int) -> int:
    """Offset just past entry k's record in the first segment."""
    return SEGMENT_HEADER_SIZE + (k + 1) * RECORD_BYTES


def truncate_to(size: int) -> Callable[[Path], None]:
    def damage(path: Path) -> None:
        os.truncate(only_segment(path), size)

    return damage


def append(data: bytes) -> Callable[[Path], None]:
    """Bytes after the last record, where a torn group write leaves them (the file itself runs
    on: the rest of the segment is its zeroed reservation)."""

    def damage(path: Path) -> None:
        overwrite(only_segment(path), record_end(ENTRIES - 1), data)

    return damage


def zero_page(offset: int) -> Callable[[Path], None]:
    def damage(path: Path) -> None:
        with open(only_segment(path), "r+b") as f:
            f.seek(offset)
            f.write(bytes(4096))

    return damage


def garble(offset: int, data: bytes = b"\x00garbled\x00") -> Callable[[Path], None]:
    def damage(path: Path) -> None:
        overwrite(only_segment(path), offset, data)

    return damage


def overwrite(file: Path, offset: int, data: bytes) -> None:
    with open(file, "r+b") as f:
        f.seek(offset)
        f.write(data)


def remove_index(path: Path) -> None:
    for file in (path / "index").iterdir():
        file.unlink()


def garble_index_file(path: Path) -> None:
    with open(path / "index" / f"{1:016x}.idx", "r+b") as f:
        f.write(b"garbage!")


def truncate_index_file(path: Path) -> None:
    os.truncate(path / "index" / f"{1:016x}.idx", 40)


def garble_checkpoint(path: Path) -> None:
    with open(path / "index" / "CHECKPOINT", "r+b") as f:
        f.seek(14)
        f.write(b"\xff\xff")


def remove_checkpoint(path: Path) -> None:
    (path / "index" / "CHECKPOINT").unlink()


ALL = list(range(ENTRIES))
# Records end at 16 + 1034 * (k + 1); the page [4096, 8192) cuts entry 3's record (3118..4152).
FAULTS: list[tuple[str, bool, Callable[[Path], None], list[int]]] = [
    # name, crashed (no close), damage, entries that survive
    ("empty journal file", True, truncate_to(0), []),
    ("header only", True, truncate_to(SEGMENT_HEADER_SIZE), []),
    ("torn segment header", True, truncate_to(7), []),
    ("torn length", True, truncate_to(record_end(8) + 2), ALL[:9]),
    ("torn record header", True, truncate_to(record_end(8) + 20), ALL[:9]),
    ("torn payload", True, truncate_to(record_end(8) + RECORD_HEADER_SIZE + 500), ALL[:9]),
    ("garbage tail", True, append(os.urandom(3000)), ALL),
    ("zero tail", True, append(bytes(8192)), ALL),
    ("garbled last record", True, garble(record_end(8) + 40), ALL[:9]),
    ("zeroed last page", True, zero_page(record_end(8) + 40), ALL[:9]),
    ("garbage then zeros then garbage", True, append(GARBAGE + bytes(5000) + GARBAGE), ALL),
    ("torn payload after clean close", False, truncate_to(record_end(6) + 100), ALL[:7]),
    ("missing index", False, remove_index, ALL),
    ("missing index after crash", True, remove_index, ALL),
    ("damaged index file", False, garble_index_file, ALL),
    ("truncated index file", False, truncate_index_file, ALL),
    ("damaged checkpoint", False, garble_checkpoint, ALL),
    ("missing checkpoint", False, remove_checkpoint, ALL),
]


@pytest.mark.parametrize(("name", "crashed", "damage", "survivors"), FAULTS, ids=[row[0] for row in FAULTS])
async def test_fault_table(
    tmp_path: Path, name: str, crashed: bool, damage: Callable[[Path], None], survivors: list[int]
) -> None:
    storage = await open_storage(tmp_path)
    for entry_id in range(ENTRIES):
        await storage.add_entry(1, entry_id, entry_id - 1, payload(entry_id))
    if crashed:
        storage.abandon()
    else:
        await storage.close()
    damage(tmp_path)

    storage = await open_storage(tmp_path)
    try:
        assert_survivors(storage, survivors)
        # The log continues: new adds land after the recovered end and survive a crash.
        next_id = survivors[-1] + 1 if survivors else 0
        await storage.add_entry(1, next_id, next_id - 1, payload(next_id))
        await storage.add_entry(2, 0, -1, b"other ledger")
    finally:
        storage.abandon()
    storage = await open_storage(tmp_path)
    try:
        assert_survivors(storage, [*survivors, next_id])
        assert storage.read_entry(2, 0) == b"other ledger"
    finally:
        await storage.close()


def assert_survivors(storage: LedgerStorage, survivors: list[int]) -> None:
    for entry_id in range(ENTRIES + 1):
        if entry_id in survivors:
            assert storage.read_entry(1, entry_id) == payload(entry_id)
        else:
            with pytest.raises((NoSuchEntryError, NoSuchLedgerError)):
                storage.read_entry(1, entry_id)
    if survivors:
        assert storage.last_entry_id(1) == survivors[-1]
        assert storage.read_last_add_confirmed(1) == survivors[-1] - 1


HEADER = SEGMENT_HEADER_SIZE
GARBLED = b"\x00garbled\x00"


def names(table: list[Any]) -> list[str]:
    return [row[0] for row in table]


# Damage with an intact record after it: name, damage, where the damage starts, where the first
# intact record after it starts. Records 3..7 lose bytes to the page [4096, 8192); 8 is intact.
NOT_A_TAIL: list[tuple[str, Callable[[Path], None], int, int]] = [
    ("zeroed page in the middle", zero_page(4096), record_end(2), record_end(7)),
    ("garbled payload in the middle", garble(record_end(4) + 40), record_end(4), record_end(5)),
    ("garbage over a record header", garble(record_end(4), GARBAGE[:20]), record_end(4), record_end(5)),
    ("negative length in the middle", garble(record_end(4), b"\xff" * 4), record_end(4), record_end(5)),
    ("flipped CRC of the first record", garble(HEADER + 4, b"\xee"), HEADER, record_end(0)),
    ("zeroed segment header", garble(0, bytes(HEADER)), 0, HEADER),
]  # fmt: skip


@pytest.mark.parametrize(("name", "damage", "damage_at", "valid_at"), NOT_A_TAIL, ids=names(NOT_A_TAIL))
async def test_damage_before_an_intact_record_refuses_to_start_and_cuts_nothing(
    tmp_path: Path, name: str, damage: Callable[[Path], None], damage_at: int, valid_at: int
) -> None:
    storage = await open_storage(tmp_path)
    for entry_id in range(ENTRIES):
        await storage.add_entry(1, entry_id, entry_id - 1, payload(entry_id))
    storage.abandon()  # kill -9: no checkpoint past the records, so a start replays them
    damage(tmp_path)
    damaged_log = only_segment(tmp_path).read_bytes()
    for _attempt in range(2):  # the refusal releases the directory, and holds at every start
        with pytest.raises(JournalDamagedError) as info:
            await open_storage(tmp_path)
        assert (info.value.segment, info.value.damage_at, info.value.valid_at) == (
            only_segment(tmp_path).name,
            damage_at,
            valid_at,
        )
        assert f"offset {damage_at}" in str(info.value) and "--format" in str(info.value)
        # Nothing cut, nothing zeroed, nothing re-reserved: the intact records are all still there.
        assert only_segment(tmp_path).read_bytes() == damaged_log
        assert list((tmp_path / "journal").glob("*" + BROKEN_SUFFIX)) == []


async def write_three_segments(path: Path) -> Path:
    """Entries 0-3, 4-7 and 8-11 of ledger 1, one segment each, no checkpoint: the next start
    replays every segment (a full rebuild). Returns the second segment's file."""
    storage = await open_storage(path, journal_max_size_bytes=4096)
    for entry_id in range(12):
        await storage.add_entry(1, entry_id, entry_id - 1, payload(entry_id))
    storage.abandon()
    (path / "index" / "CHECKPOINT").unlink()
    return sorted((path / "journal").glob("*.log"))[1]


# Damage in the second of three segments, replayed whole: name, offset, bytes written there,
# where the damage starts, where the first intact record after it starts (None: none does). A
# sealed segment was synced to its end before the next one was made: it has no torn tail.
SEALED: list[tuple[str, int, bytes, int, int | None]] = [
    ("garbled record before intact ones", record_end(0) + 40, GARBLED, record_end(0), record_end(1)),
    ("garbled last record", record_end(2) + 40, GARBLED, record_end(2), None),
    ("garbage after the last record", record_end(3), GARBAGE[:100], record_end(3), None),
    ("zeroed header", 0, bytes(HEADER), 0, HEADER),
]  # fmt: skip


@pytest.mark.parametrize(("name", "offset", "data", "damage_at", "valid_at"), SEALED, ids=names(SEALED))
async def test_damage_in_a_sealed_segment_refuses_to_start(
    tmp_path: Path, name: str, offset: int, data: bytes, damage_at: int, valid_at: int | None
) -> None:
    second = await write_three_segments(tmp_path)
    overwrite(second, offset, data)
    damaged = second.read_bytes()
    with pytest.raises(JournalDamagedError) as info:
        await open_storage(tmp_path, journal_max_size_bytes=4096)
    error = info.value
    assert (error.segment, error.damage_at, error.valid_at) == (second.name, damage_at, valid_at)
    assert second.read_bytes() == damaged


async def test_zeros_after_a_sealed_segment_records_are_its_reservation(tmp_path: Path) -> None:
    second = await write_three_segments(tmp_path)
    overwrite(second, second.stat().st_size, bytes(8192))  # a crash mid-roll left it reserved
    storage = await open_storage(tmp_path, journal_max_size_bytes=4096)
    try:
        assert [storage.read_entry(1, e) for e in range(12)] == [payload(e) for e in range(12)]
    finally:
        await storage.close()


async def test_corrupt_record_is_never_served(tmp_path: Path) -> None:
    storage = await open_storage(tmp_path)
    for entry_id in range(3):
        await storage.add_entry(1, entry_id, entry_id - 1, payload(entry_id))
    await storage.close()
    # Flip one payload byte of entry 1 in place: the index still points at it.
    overwrite(only_segment(tmp_path), record_end(0) + RECORD_HEADER_SIZE + 10, b"\xee")
    storage = await open_storage(tmp_path)
    try:
        assert storage.read_entry(1, 0) == payload(0)
        with pytest.raises(BookieError) as info:
            storage.read_entry(1, 1)
        assert info.value.code.name == "CORRUPT"
        assert storage.read_entry(1, 2) == payload(2)
    finally:
        await storage.close()


async def test_second_engine_on_the_same_directory_is_refused(tmp_path: Path) -> None:
    storage = await open_storage(tmp_path)
    try:
        with pytest.raises(BookieError):
            await open_storage(tmp_path)
    finally:
        await storage.close()


async def test_damaged_index_slot_is_reported_then_rebuilt_at_the_next_start(tmp_path: Path) -> None:
    storage = await open_storage(tmp_path)
    for entry_id in range(3):
        await storage.add_entry(1, entry_id, entry_id - 1, payload(entry_id))
    await storage.close()
    overwrite(tmp_path / "index" / f"{1:016x}.idx", 16 + 16 * 1, b"\x07" * 16)  # entry 1's slot
    storage = await open_storage(tmp_path)
    try:
        with pytest.raises(BookieError) as info:
            storage.read_entry(1, 1)
        assert info.value.code.name == "CORRUPT"
        assert storage.read_entry(1, 2) == payload(2)
    finally:
        await storage.close()
    storage = await open_storage(tmp_path)
    try:
        assert storage.recovery_report["full_rebuild"] is True
        assert [storage.read_entry(1, e) for e in range(3)] == [payload(e) for e in range(3)]
    finally:
        await storage.close()


# name, damage, the bytes a restart must keep aside in `<segment>.log.broken` (None: no copy)
CUT_TAILS: list[tuple[str, Callable[[Path], None], Callable[[bytes], bytes | None]]] = [
    ("garbage tail", append(GARBAGE), lambda _log: GARBAGE),
    ("torn payload", truncate_to(record_end(8) + 700), lambda log: log[record_end(8) : record_end(8) + 700]),
    ("zero tail", append(bytes(8192)), lambda _log: None),
    (
        "oversized garbage",
        append(b"\x07" * (MAX_BROKEN_BYTES + 5000)),
        lambda _log: b"\x07" * MAX_BROKEN_BYTES,
    ),
]


@pytest.mark.parametrize(("name", "damage", "expected"), CUT_TAILS, ids=[row[0] for row in CUT_TAILS])
async def test_a_cut_tail_is_kept_aside_bounded_and_synced(
    tmp_path: Path, name: str, damage: Callable[[Path], None], expected: Callable[[bytes], bytes | None]
) -> None:
    storage = await open_storage(tmp_path)
    for entry_id in range(ENTRIES):
        await storage.add_entry(1, entry_id, entry_id - 1, payload(entry_id))
    storage.abandon()
    log_bytes = only_segment(tmp_path).read_bytes()
    damage(tmp_path)
    want = expected(log_bytes)

    storage = await open_storage(tmp_path)
    try:
        copies = list((tmp_path / "journal").glob("*" + BROKEN_SUFFIX))
        if want is None:
            assert copies == [] and storage.recovery_report["truncated_bytes"] == 0
        else:
            assert [c.name for c in copies] == [only_segment(tmp_path).name + BROKEN_SUFFIX]
            assert copies[0].read_bytes() == want
            assert storage.recovery_report["truncated_bytes"] >= len(want)
        # The cut is real: the log goes on right after the last valid record.
        await storage.add_entry(1, ENTRIES, ENTRIES - 1, payload(ENTRIES))
    finally:
        storage.abandon()
    storage = await open_storage(tmp_path)
    try:
        assert_survivors(storage, [*range(9 if name == "torn payload" else ENTRIES), ENTRIES])
    finally:
        await storage.close()


async def test_only_the_newest_cut_tails_are_kept(tmp_path: Path) -> None:
    for round_ in range(MAX_BROKEN_FILES + 2):
        storage = await open_storage(tmp_path, journal_max_size_bytes=4096)
        await storage.add_entry(round_ + 1, 0, -1, payload(0))
        segment = storage.stats()["current_segment"]
        storage.abandon()
        overwrite(
            tmp_path / "journal" / f"{segment:08x}-0000.log", SEGMENT_HEADER_SIZE + RECORD_BYTES, GARBAGE
        )
        # The next start cuts the garbage; a new segment each round gives each copy its own name.
        storage = await open_storage(tmp_path, journal_max_size_bytes=4096)
        await storage.add_entry(round_ + 100, 0, -1, payload(0) * 4)
        await storage.close()
    assert len(list((tmp_path / "journal").glob("*" + BROKEN_SUFFIX))) == MAX_BROKEN_FILES
