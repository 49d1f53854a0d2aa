"""The bookie's scrub (`bookie/scrubber.py`) on the real storage engine in a temporary directory:
a copy whose stored bytes were flipped is found by the scrub and by a read, and listed once per
ledger; the scrub reads no faster than its rate; a recovery add over the rotten copy repairs it
(and an ordinary add does not). The repair with real processes is test_rot_repair_process.py."""

from __future__ import annotations

from pathlib import Path

import pytest

from bookie.errors import BookieError, ErrorCode
from bookie.scrubber import CORRUPT_COST_BYTES, RateLimit, Scrubber, ScrubConfig
from bookie.storage.engine import LedgerStorage
from bookie.storage.records import ADD, RECORD_HEADER_SIZE, scan_segment
from tests.bookie.test_storage_engine import started

PAYLOAD = b"p" * 1_000


class FakeTime:
    """A clock that only moves when someone sleeps on it."""

    def __init__(self) -> None:
        self.now = 0.0
        self.slept: list[float] = []

    def clock(self) -> float:
        return self.now

    async def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)
        self.now += seconds


class Reports:
    def __init__(self, fail: bool = False) -> None:
        self.calls: list[tuple[int, set[int]]] = []
        self.fail = fail

    async def __call__(self, ledger_id: int, entry_ids: set[int]) -> bool:
        if self.fail:
            raise OSError("the store is out of reach")
        self.calls.append((ledger_id, set(entry_ids)))
        return True


def flip(data_dir: Path, *copies: tuple[int, int]) -> None:
    """Flip one bit of each (ledger, entry)'s stored payload, as bit rot would (all found first:
    a segment scan stops at the first record that fails its checksum)."""
    found: dict[tuple[int, int], tuple[Path, int]] = {}
    for path in sorted((data_dir / "journal").glob("*.log")):
        _, records = scan_segment(path)
        for rec in records:
            if rec.type == ADD and (rec.ledger_id, rec.entry_id) in copies:
                found[rec.ledger_id, rec.entry_id] = (path, rec.offset + RECORD_HEADER_SIZE + 7)
    assert set(found) == set(copies), found
    for path, where in found.values():
        with open(path, "r+b") as f:
            f.seek(where)
            byte = f.read(1)[0]
            f.seek(where)
            f.write(bytes([byte ^ 0x10]))


async def _storage(tmp_path: Path) -> LedgerStorage:
    storage = await started(tmp_path)
    for ledger_id in (1, 2):
        for e in range(10):
            await storage.add_entry(ledger_id, e, e - 1, PAYLOAD)
    return storage


def _scrubber(storage: LedgerStorage, report: Reports, time: FakeTime, rate: int = 10**9) -> Scrubber:
    scrubber = Scrubber(storage, report, ScrubConfig(0, rate), time.clock, time.sleep)
    storage.on_corrupt = scrubber.notice
    return scrubber


async def test_the_scrub_finds_rotten_copies_and_lists_them_per_ledger(tmp_path: Path) -> None:
    storage = await _storage(tmp_path)
    try:
        flip(tmp_path, (1, 3), (1, 8), (2, 0))
        report = Reports()
        scrubber = _scrubber(storage, report, FakeTime())
        assert await scrubber.scrub_once() == 3
        await scrubber.list_pending()
        assert sorted(report.calls) == [(1, {3, 8}), (2, {0})]
        counters = scrubber.counters
        assert (counters.passes, counters.entries_scrubbed, counters.rotten_found) == (1, 20, 3)
        assert counters.rotten_listed == 3
        assert counters.bytes_scrubbed == 17 * len(PAYLOAD) + 3 * CORRUPT_COST_BYTES
        await scrubber.list_pending()
        assert len(report.calls) == 2  # listed once
    finally:
        await storage.close()


async def test_a_clean_disk_lists_nothing(tmp_path: Path) -> None:
    storage = await _storage(tmp_path)
    try:
        report = Reports()
        scrubber = _scrubber(storage, report, FakeTime())
        assert await scrubber.scrub_once() == 0
        await scrubber.list_pending()
        assert report.calls == [] and scrubber.counters.entries_scrubbed == 20
    finally:
        await storage.close()


async def test_a_read_that_meets_a_rotten_copy_lists_it(tmp_path: Path) -> None:
    storage = await _storage(tmp_path)
    try:
        flip(tmp_path, (2, 5))
        report = Reports(fail=True)
        scrubber = _scrubber(storage, report, FakeTime())
        with pytest.raises(BookieError) as bad:
            storage.read_entry(2, 5)
        assert bad.value.code == ErrorCode.CORRUPT
        await scrubber.list_pending()  # the store is out of reach: kept for the next try
        assert report.calls == [] and scrubber.counters.rotten_listed == 0
        report.fail = False
        await scrubber.list_pending()
        assert report.calls == [(2, {5})] and scrubber.counters.rotten_listed == 1
    finally:
        await storage.close()


async def test_the_scrub_reads_no_faster_than_its_rate(tmp_path: Path) -> None:
    storage = await _storage(tmp_path)
    try:
        time = FakeTime()
        rate = 4 * len(PAYLOAD)  # four entries a second: twenty take five seconds
        scrubber = _scrubber(storage, Reports(), time, rate)
        await scrubber.scrub_once()
        assert time.now == pytest.approx(20 * len(PAYLOAD) / rate)
        assert max(time.slept) <= len(PAYLOAD) / rate + 1e-9  # paced entry by entry, not in a burst
    finally:
        await storage.close()


async def test_rate_limit_sleeps_only_while_ahead() -> None:
    time = FakeTime()
    limit = RateLimit(100, time.clock, time.sleep)
    await limit.spend(50)
    assert time.now == pytest.approx(0.5)
    time.now += 2.0  # time went by without spending: the next spends are not delayed
    await limit.spend(100)
    assert time.now == pytest.approx(2.5) and len(time.slept) == 1
    await limit.spend(200)
    assert time.now == pytest.approx(3.5)


async def test_a_recovery_add_rewrites_a_rotten_copy_and_an_ordinary_add_does_not(tmp_path: Path) -> None:
    storage = await _storage(tmp_path)
    try:
        flip(tmp_path, (1, 4))
        noticed: list[tuple[int, int]] = []
        storage.on_corrupt = lambda ledger_id, entry_id: noticed.append((ledger_id, entry_id))
        with pytest.raises(BookieError) as bad:
            await storage.add_entry(1, 4, 3, PAYLOAD)
        assert bad.value.code == ErrorCode.CORRUPT and noticed == [(1, 4)]
        await storage.add_entry(1, 4, -1, PAYLOAD, recovery=True)
        assert noticed == [(1, 4)]  # the repair itself does not list the copy again
        assert storage.read_entry(1, 4) == PAYLOAD
        assert storage.last_entry_id(1) == 9 and storage.read_last_add_confirmed(1) == 8
        with pytest.raises(BookieError) as other:
            await storage.add_entry(1, 4, -1, b"other bytes", recovery=True)
        assert other.value.code == ErrorCode.BAD_REQUEST
    finally:
        await storage.close()
    reopened = await started(tmp_path)  # the repair is durable: the index points at the new copy
    try:
        assert reopened.read_entry(1, 4) == PAYLOAD
    finally:
        await reopened.close()
