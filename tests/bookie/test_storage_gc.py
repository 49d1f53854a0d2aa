"""The garbage collector on real files: space comes back, live entries stay, and a crash between
any two steps (injected through `gc_hook`) loses nothing live."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from bookie.errors import NoSuchLedgerError
from bookie.storage.engine import LedgerStorage, StorageConfig
from bookie.storage.records import SEGMENT_HEADER_SIZE, encode_add, parse_segment_name
from tests.bookie.fakes import is_fenced

SEGMENT_BYTES = 4096
ENTRIES = 60


def payload(ledger_id: int, entry_id: int) -> bytes:
    # Ledger 1 (the one deleted) holds most bytes of the segments it shares with ledger 2.
    return (b"%d:%d:" % (ledger_id, entry_id)).ljust(600 if ledger_id == 1 else 200, b".")


async def started(path: Path, gc_interval_s: float = 3600) -> LedgerStorage:
    config = StorageConfig(
        path, journal_max_size_bytes=SEGMENT_BYTES, disk_check_interval_s=3600, gc_interval_s=gc_interval_s
    )
    storage = LedgerStorage(config, disk_usage=lambda _p: 0.1)
    await storage.start()
    return storage


async def fill(storage: LedgerStorage) -> None:
    """Ledgers 1 and 2 interleaved in every segment; ledger 3 alone in the last ones."""
    for entry_id in range(ENTRIES):
        await storage.add_entry(1, entry_id, entry_id - 1, payload(1, entry_id))
        await storage.add_entry(2, entry_id, entry_id - 1, payload(2, entry_id))
    await storage.fence(2)
    for entry_id in range(ENTRIES):
        await storage.add_entry(3, entry_id, entry_id - 1, payload(3, entry_id))


def record(ledger_id: int, entry_id: int) -> bytes:
    return encode_add(ledger_id, entry_id, entry_id - 1, payload(ledger_id, entry_id))


def garble(file: Path, offset: int) -> None:
    with open(file, "r+b") as f:
        f.seek(offset)
        f.write(b"\x00garbled\x00")


def journal_bytes(path: Path) -> int:
    return sum(f.stat().st_size for f in (path / "journal").glob("*.log"))


async def assert_live(storage: LedgerStorage) -> None:
    with pytest.raises(NoSuchLedgerError):
        storage.read_entry(1, 0)
    for ledger_id in (2, 3):
        for entry_id in range(ENTRIES):
            assert storage.read_entry(ledger_id, entry_id) == payload(ledger_id, entry_id)
        assert storage.read_last_add_confirmed(ledger_id) == ENTRIES - 2
    assert await is_fenced(storage, 2)


def one_generation_each(path: Path) -> bool:
    names = [parse_segment_name(f.name) for f in (path / "journal").glob("*.log")]
    segments = [n[0] for n in names if n is not None]
    return len(segments) == len(set(segments)) and not list((path / "journal").glob("*.tmp"))


async def test_gc_reclaims_deleted_ledgers_and_keeps_live_ones(tmp_path: Path) -> None:
    storage = await started(tmp_path)
    await fill(storage)
    await storage.delete_ledger(1)
    before = journal_bytes(tmp_path)
    result = await storage.collect_garbage()
    assert result["segments_rewritten"] > 0 and result["bytes_reclaimed"] > 0
    assert journal_bytes(tmp_path) < before - ENTRIES * 150
    await assert_live(storage)
    again = await storage.collect_garbage()  # nothing more to gain: nothing rewritten
    assert again["segments_rewritten"] == 0
    await storage.close()

    storage = await started(tmp_path)
    try:
        await assert_live(storage)
    finally:
        await storage.close()
    for file in (tmp_path / "index").iterdir():  # the rewritten log still rebuilds the index
        file.unlink()
    storage = await started(tmp_path)
    try:
        assert storage.recovery_report["full_rebuild"] is True
        await assert_live(storage)
    finally:
        await storage.close()


async def test_gc_leaves_the_current_and_unchecked_segments_alone(tmp_path: Path) -> None:
    storage = await started(tmp_path)
    try:
        await storage.add_entry(1, 0, -1, b"x" * 100)
        await storage.delete_ledger(1)
        result = await storage.collect_garbage()  # only the current segment exists
        assert result["segments_scanned"] == 0
    finally:
        await storage.close()


@pytest.mark.parametrize("step", ["copied", "indexed"])
async def test_crash_between_gc_steps_loses_nothing(tmp_path: Path, step: str) -> None:
    storage = await started(tmp_path)
    await fill(storage)
    await storage.delete_ledger(1)

    def crash(at: str) -> None:
        if at == step:
            raise RuntimeError(f"injected crash after {at}")

    storage.gc.hook = crash
    with pytest.raises(RuntimeError):
        await storage.collect_garbage()
    storage.abandon()  # the process dies here: no close, no checkpoint
    assert not one_generation_each(tmp_path)  # the crash left two generations of a segment

    storage = await started(tmp_path)
    try:
        assert one_generation_each(tmp_path)
        await assert_live(storage)
        result = await storage.collect_garbage()  # and the collector carries on afterwards
        assert result["segments_scanned"] > 0
        await assert_live(storage)
    finally:
        await storage.close()


async def test_crash_while_copying_leaves_a_temporary_file_only(tmp_path: Path) -> None:
    storage = await started(tmp_path)
    await fill(storage)
    await storage.delete_ledger(1)
    await storage.close()
    (tmp_path / "journal" / "00000001-0001.log.tmp").write_bytes(b"QJNL half written")
    storage = await started(tmp_path)
    try:
        assert one_generation_each(tmp_path)
        await assert_live(storage)
    finally:
        await storage.close()


async def test_gc_runs_in_the_background(tmp_path: Path) -> None:
    storage = await started(tmp_path, gc_interval_s=0.02)
    try:
        await fill(storage)
        await storage.delete_ledger(1)
        for _ in range(500):  # bounded wait for a periodic run to rewrite something
            if storage.counters["gc_segments"]:
                break
            await asyncio.sleep(0.02)
        assert storage.counters["gc_segments"] > 0
        await assert_live(storage)
    finally:
        await storage.close()


async def test_gc_leaves_a_damaged_segment_whole(tmp_path: Path) -> None:
    storage = await started(tmp_path)
    await fill(storage)
    await storage.delete_ledger(1)
    await storage.close()  # a checkpoint past the sealed segments: they are eligible, not replayed
    first = sorted((tmp_path / "journal").glob("*.log"))[0]
    # Garble ledger 1's (dead) second record: ledger 2's live records follow it.
    garble(first, SEGMENT_HEADER_SIZE + len(record(1, 0)) + len(record(2, 0)) + 40)
    damaged = first.read_bytes()
    storage = await started(tmp_path)
    try:
        result = await storage.collect_garbage()
        # A copy would stop at the damage and drop ledger 2's live records after it.
        assert result["segments_damaged"] == 1 and result["segments_rewritten"] > 0
        assert first.exists() and first.read_bytes() == damaged
        await assert_live(storage)
    finally:
        await storage.close()
