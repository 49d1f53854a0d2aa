"""The storage engine on real files: adds, reads, fence, LAC, delete, group commit, restart,
read-only mode, disk failure, and memory that does not grow with the data stored."""

from __future__ import annotations

import asyncio
import gc
import os
import tracemalloc
from pathlib import Path

import pytest

from bookie.errors import (
    BookieError,
    ErrorCode,
    FencedError,
    NoSuchEntryError,
    NoSuchLedgerError,
    ReadOnlyError,
)
from bookie.storage.api import LedgerStorageApi
from bookie.storage.config import MARKER_RESERVE_BYTES
from bookie.storage.engine import EXIT_CODE_DISK_FAILURE, LedgerStorage, StorageConfig
from bookie.storage.records import RECORD_HEADER_SIZE, SEGMENT_HEADER_SIZE
from tests.bookie.fakes import is_fenced


def make(path: Path, **overrides: object) -> LedgerStorage:
    options: dict[str, object] = {"disk_check_interval_s": 3600, "gc_interval_s": 3600, **overrides}
    return LedgerStorage(StorageConfig(path, **options), disk_usage=lambda _p: 0.1)  # type: ignore[arg-type]


async def started(path: Path, **overrides: object) -> LedgerStorage:
    storage = make(path, **overrides)
    await storage.start()
    return storage


def test_implements_the_seam(tmp_path: Path) -> None:
    storage: LedgerStorageApi = make(tmp_path)
    assert storage.read_only is False


async def test_add_read_lac_and_restart(tmp_path: Path) -> None:
    storage = await started(tmp_path)
    await storage.add_entry(7, 0, -1, b"zero")
    await storage.add_entry(7, 1, 0, b"one")
    await storage.add_entry(7, 2, 1, b"")
    assert storage.read_entry(7, 1) == b"one"
    assert storage.read_entry(7, 2) == b""
    assert storage.last_entry_id(7) == 2
    assert storage.read_last_add_confirmed(7) == 1
    with pytest.raises(NoSuchEntryError):
        storage.read_entry(7, 3)
    with pytest.raises(NoSuchLedgerError):
        storage.read_entry(8, 0)
    with pytest.raises(NoSuchLedgerError):
        storage.read_last_add_confirmed(8)
    await storage.close()
    storage = await started(tmp_path)
    try:
        assert [storage.read_entry(7, e) for e in range(3)] == [b"zero", b"one", b""]
        assert storage.read_last_add_confirmed(7) == 1
    finally:
        await storage.close()


async def test_acknowledged_adds_survive_a_crash(tmp_path: Path) -> None:
    storage = await started(tmp_path, journal_max_size_bytes=8192)
    await asyncio.gather(*(storage.add_entry(1, e, e - 1, b"%d" % e * 50) for e in range(400)))
    storage.abandon()  # no close: no checkpoint, no flush
    storage = await started(tmp_path, journal_max_size_bytes=8192)
    try:
        assert all(storage.read_entry(1, e) == b"%d" % e * 50 for e in range(400))
        assert storage.read_last_add_confirmed(1) == 398
    finally:
        await storage.close()


async def test_one_fsync_covers_every_waiting_add(tmp_path: Path) -> None:
    storage = await started(tmp_path)
    try:
        await asyncio.gather(
            *(storage.add_entry(ledger, e, -1, b"x" * 100) for ledger in range(4) for e in range(250))
        )
        counters = storage.stats()
        assert counters["adds"] == 1000
        assert isinstance(counters["fsyncs"], int) and counters["fsyncs"] <= 3  # not one per add
    finally:
        await storage.close()


async def test_ids_can_be_sparse_as_on_a_striped_bookie(tmp_path: Path) -> None:
    storage = await started(tmp_path)
    try:
        for entry_id in (0, 2, 3, 5):
            await storage.add_entry(4, entry_id, entry_id - 1, b"e%d" % entry_id)
        with pytest.raises(NoSuchEntryError):
            storage.read_entry(4, 1)
        await storage.add_entry(4, 1, 0, b"e1")  # a gap filled later is a new entry
        assert [storage.read_entry(4, e) for e in range(4)] == [b"e0", b"e1", b"e2", b"e3"]
        assert storage.last_entry_id(4) == 5
    finally:
        await storage.close()


async def test_retry_with_same_bytes_succeeds_other_bytes_refused(tmp_path: Path) -> None:
    storage = await started(tmp_path)
    try:
        await storage.add_entry(1, 0, -1, b"same")
        await storage.add_entry(1, 0, -1, b"same")
        with pytest.raises(BookieError) as info:
            await storage.add_entry(1, 0, -1, b"other")
        assert info.value.code == ErrorCode.BAD_REQUEST
        # The same, while the first copy is still waiting for its fsync.
        results = await asyncio.gather(
            storage.add_entry(1, 1, 0, b"twice"),
            storage.add_entry(1, 1, 0, b"twice"),
            storage.add_entry(1, 1, 0, b"thrice"),
            return_exceptions=True,
        )
        assert list(results[:2]) == [None, None]
        assert isinstance(results[2], BookieError) and results[2].code == ErrorCode.BAD_REQUEST
        assert storage.read_entry(1, 1) == b"twice"
    finally:
        await storage.close()


async def test_fence_is_durable_and_allows_recovery_adds(tmp_path: Path) -> None:
    storage = await started(tmp_path)
    await storage.add_entry(3, 0, -1, b"a")
    await storage.add_entry(3, 1, 0, b"b")
    assert await storage.fence(3) == 0
    with pytest.raises(FencedError):
        await storage.add_entry(3, 2, 1, b"c")
    await storage.add_entry(3, 2, 1, b"c", recovery=True)
    assert await storage.fence(99) == -1  # an unknown ledger is fenced empty
    storage.abandon()
    storage = await started(tmp_path)
    try:
        assert await is_fenced(storage, 3) and await is_fenced(storage, 99)
        with pytest.raises(FencedError):
            await storage.add_entry(3, 3, 2, b"d")
        assert storage.read_entry(3, 2) == b"c"
        assert storage.read_last_add_confirmed(3) == 1
    finally:
        await storage.close()


async def test_fence_refuses_adds_that_arrive_while_it_syncs(tmp_path: Path) -> None:
    storage = await started(tmp_path)
    try:
        await storage.add_entry(5, 0, -1, b"a")
        fence = asyncio.ensure_future(storage.fence(5))
        await asyncio.sleep(0)  # the fence request is in, its fsync not yet done
        with pytest.raises(FencedError):
            await storage.add_entry(5, 1, 0, b"b")
        assert await fence == -1
    finally:
        await storage.close()


async def test_delete_is_durable_and_idempotent(tmp_path: Path) -> None:
    storage = await started(tmp_path)
    await storage.add_entry(1, 0, -1, b"a")
    await storage.add_entry(2, 0, -1, b"b")
    await storage.delete_ledger(1)
    await storage.delete_ledger(1)
    await storage.delete_ledger(12345)
    with pytest.raises(NoSuchLedgerError):
        storage.read_entry(1, 0)
    storage.abandon()
    storage = await started(tmp_path)
    try:
        with pytest.raises(NoSuchLedgerError):
            storage.read_entry(1, 0)
        assert storage.read_entry(2, 0) == b"b"
        assert not (tmp_path / "index" / f"{1:016x}.idx").exists()
    finally:
        await storage.close()


async def test_index_rebuilt_from_the_log_when_removed(tmp_path: Path) -> None:
    storage = await started(tmp_path, journal_max_size_bytes=4096)
    for entry_id in range(60):
        await storage.add_entry(entry_id % 3, entry_id // 3, entry_id // 3 - 1, b"p%d" % entry_id)
    await storage.fence(1)
    await storage.delete_ledger(2)
    await storage.close()
    for file in (tmp_path / "index").iterdir():
        file.unlink()
    storage = await started(tmp_path, journal_max_size_bytes=4096)
    try:
        assert storage.recovery_report["full_rebuild"] is True
        for entry_id in range(60):
            ledger, entry = entry_id % 3, entry_id // 3
            if ledger == 2:
                with pytest.raises(NoSuchLedgerError):
                    storage.read_entry(ledger, entry)
            else:
                assert storage.read_entry(ledger, entry) == b"p%d" % entry_id
        assert await is_fenced(storage, 1) and not await is_fenced(storage, 0)
        assert storage.read_last_add_confirmed(0) == 18
    finally:
        await storage.close()


async def test_read_only_past_high_water_back_below_low_water(tmp_path: Path) -> None:
    usage = [0.5]
    config = StorageConfig(
        tmp_path, disk_usage_high_water=0.9, disk_usage_low_water=0.8, disk_check_interval_s=3600
    )
    storage = LedgerStorage(config, disk_usage=lambda _p: usage[0])
    await storage.start()
    try:
        await storage.add_entry(1, 0, -1, b"a")
        usage[0] = 0.95
        assert storage.check_disk() is True and storage.read_only
        with pytest.raises(ReadOnlyError):
            await storage.add_entry(1, 1, 0, b"b")
        assert storage.read_entry(1, 0) == b"a"  # reads still served
        usage[0] = 0.85  # between the marks: stays read-only (no flapping)
        assert storage.check_disk() is True
        usage[0] = 0.79
        assert storage.check_disk() is False
        await storage.add_entry(1, 1, 0, b"b")
        assert storage.stats()["read_only"] is False
    finally:
        await storage.close()


async def test_read_only_checked_periodically(tmp_path: Path) -> None:
    usage = [0.99]
    config = StorageConfig(tmp_path, disk_check_interval_s=0.01)
    storage = LedgerStorage(config, disk_usage=lambda _p: usage[0])
    await storage.start()
    try:
        assert storage.read_only  # measured at start
        usage[0] = 0.1
        for _ in range(500):  # bounded wait for the periodic check
            if not storage.read_only:
                break
            await asyncio.sleep(0.01)
        assert not storage.read_only
    finally:
        await storage.close()


async def test_failed_write_stops_the_process_and_acknowledges_nothing(tmp_path: Path) -> None:
    exits: list[int] = []
    config = StorageConfig(tmp_path, disk_check_interval_s=3600, gc_interval_s=3600)
    storage = LedgerStorage(config, disk_usage=lambda _p: 0.1, exit_fn=exits.append)
    await storage.start()
    await storage.add_entry(1, 0, -1, b"fine")
    # A real EBADF on the next write: swap the journal's descriptor for a read-only one.
    read_only_fd = os.open(tmp_path / "journal" / "00000001-0000.log", os.O_RDONLY)
    os.dup2(read_only_fd, storage._segments._write_fd)
    os.close(read_only_fd)
    with pytest.raises(BookieError) as info:
        await storage.add_entry(1, 1, 0, b"lost")
    assert info.value.code == ErrorCode.INTERNAL
    assert exits == [EXIT_CODE_DISK_FAILURE]
    with pytest.raises(BookieError):
        await storage.add_entry(1, 2, 1, b"after")
    storage.abandon()
    storage = await started(tmp_path)
    try:
        assert storage.read_entry(1, 0) == b"fine"
        with pytest.raises(NoSuchEntryError):
            storage.read_entry(1, 1)
    finally:
        await storage.close()


async def test_a_cancelled_waiter_does_not_cancel_the_others(tmp_path: Path) -> None:
    storage = await started(tmp_path)
    try:
        first = asyncio.ensure_future(storage.add_entry(1, 0, -1, b"a"))
        second = asyncio.ensure_future(storage.add_entry(1, 1, 0, b"b"))
        await asyncio.sleep(0)
        first.cancel()
        await second
        assert storage.read_entry(1, 1) == b"b"
        with pytest.raises(asyncio.CancelledError):
            await first
    finally:
        await storage.close()


async def _traced_after(storage: LedgerStorage, ledgers: int, start: int, count: int) -> int:
    payload = b"m" * 100
    for first in range(start, start + count, 500):
        await asyncio.gather(
            *(storage.add_entry(e % ledgers, e // ledgers, -1, payload) for e in range(first, first + 500))
        )
    for e in range(start, start + count, 97):
        assert storage.read_entry(e % ledgers, e // ledgers) == payload
    gc.collect()
    return tracemalloc.get_traced_memory()[0]


async def test_memory_does_not_grow_with_data_stored(tmp_path: Path) -> None:
    storage = await started(tmp_path, journal_max_size_bytes=256 * 1024)
    tracemalloc.start()
    try:
        await _traced_after(storage, 8, 0, 1000)  # warm caches and every ledger's state
        base = tracemalloc.get_traced_memory()[0]
        small = await _traced_after(storage, 8, 1000, 2000) - base
        large = await _traced_after(storage, 8, 3000, 20000) - base
    finally:
        tracemalloc.stop()
        await storage.close()
    # 10x more entries (2 MB of payload): a dict of every entry would grow ~10x. The index is on
    # disk, so the growth is a small constant, far below the data stored.
    assert large < max(4 * small, 256 * 1024), (small, large)


async def test_more_ledgers_than_open_index_files(tmp_path: Path) -> None:
    storage = await started(tmp_path, index_max_open_files=4)
    for round_ in range(3):
        await asyncio.gather(
            *(storage.add_entry(ledger, round_, round_ - 1, b"%d" % ledger) for ledger in range(20))
        )
    await storage.close()
    storage = await started(tmp_path, index_max_open_files=4)
    try:
        assert storage.recovery_report["full_rebuild"] is False
        assert all(storage.read_entry(ledger, 2) == b"%d" % ledger for ledger in range(20))
        assert all(storage.read_last_add_confirmed(ledger) == 1 for ledger in range(20))
    finally:
        await storage.close()


async def test_segments_are_preallocated_and_a_sealed_one_holds_only_its_records(tmp_path: Path) -> None:
    max_bytes = 8192
    storage = await started(tmp_path, journal_max_size_bytes=max_bytes)
    journal = tmp_path / "journal"
    reserved = max_bytes + MARKER_RESERVE_BYTES
    try:
        assert (journal / "00000001-0000.log").stat().st_size == reserved
        for entry_id in range(12):  # 1034-byte records: the segment rolls after the 8th
            await storage.add_entry(1, entry_id, entry_id - 1, bytes(1000))
        sealed = (journal / "00000001-0000.log").stat().st_size
        assert sealed == SEGMENT_HEADER_SIZE + 8 * (RECORD_HEADER_SIZE + 1000)
        assert (journal / "00000002-0000.log").stat().st_size == reserved
        assert storage.stats()["journal_bytes"] == SEGMENT_HEADER_SIZE * 2 + 12 * (RECORD_HEADER_SIZE + 1000)
    finally:
        storage.abandon()
    # A crash leaves the current segment's zeroed reservation: replay reads it as the end of the
    # log, cuts nothing, skips nothing, and the log goes on where the records end.
    storage = await started(tmp_path, journal_max_size_bytes=max_bytes)
    try:
        report = storage.recovery_report
        assert report["truncated_bytes"] == 0
        assert list(journal.glob("*.broken")) == []
        await storage.add_entry(1, 12, 11, b"after")
        assert [storage.read_entry(1, e) for e in range(12)] == [bytes(1000)] * 12
    finally:
        await storage.close()
    storage = await started(tmp_path, journal_max_size_bytes=max_bytes)
    try:
        assert storage.read_entry(1, 12) == b"after"
        assert (journal / "00000002-0000.log").stat().st_size == reserved
    finally:
        await storage.close()


async def test_a_large_segment_is_preallocated_a_chunk_ahead_not_whole(tmp_path: Path) -> None:
    from bookie.storage.journal import PREALLOCATE_CHUNK_BYTES

    storage = await started(tmp_path, journal_max_size_bytes=256 * 1024**2)
    current = tmp_path / "journal" / "00000001-0000.log"
    try:
        assert current.stat().st_size == PREALLOCATE_CHUNK_BYTES + SEGMENT_HEADER_SIZE
        payload = bytes(64 * 1024)
        for entry_id in range(300):  # ~19 MiB: past the first chunk, so the reservation grows
            await storage.add_entry(1, entry_id, entry_id - 1, payload)
        written = SEGMENT_HEADER_SIZE + 300 * (RECORD_HEADER_SIZE + len(payload))
        size = current.stat().st_size
        assert written + MARKER_RESERVE_BYTES <= size <= written + PREALLOCATE_CHUNK_BYTES
        assert storage.read_entry(1, 299) == payload
    finally:
        await storage.close()
