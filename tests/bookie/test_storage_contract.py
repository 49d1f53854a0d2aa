"""The `LedgerStorageApi` contract, run against the tests' in-memory fake and the real engine.

The server's unit tests run on the fake (`tests/bookie/fakes.py`); these cases keep it honest:
whatever they pin, the fake and the engine on a real directory must both do.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
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
from bookie.storage.engine import LedgerStorage, StorageConfig
from bookie.storage.records import MAX_PAYLOAD_BYTES
from tests.bookie.fakes import MemoryStorage, is_fenced


class _Usage:
    """A disk usage the test sets, for the engine's read-only switch."""

    def __init__(self) -> None:
        self.fraction = 0.1

    def __call__(self, _path: Path) -> float:
        return self.fraction


class Subject:
    def __init__(self, storage: LedgerStorageApi, usage: _Usage | None) -> None:
        self.storage = storage
        self._usage = usage

    def set_read_only(self, on: bool) -> None:
        if isinstance(self.storage, MemoryStorage):
            self.storage.read_only_flag = on
        else:
            assert isinstance(self.storage, LedgerStorage) and self._usage is not None
            self._usage.fraction = 0.99 if on else 0.1
            self.storage.check_disk()


@pytest.fixture(params=["memory", "engine"])
async def subject(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Subject]:
    if request.param == "memory":
        storage: LedgerStorageApi = MemoryStorage()
        usage = None
    else:
        usage = _Usage()
        config = StorageConfig(tmp_path, disk_check_interval_s=3600, gc_interval_s=3600)
        storage = LedgerStorage(config, disk_usage=usage)
    await storage.start()
    try:
        yield Subject(storage, usage)
    finally:
        await storage.close()


async def test_adds_read_back_with_lac_and_last_entry(subject: Subject) -> None:
    s = subject.storage
    for entry_id in range(5):
        await s.add_entry(1, entry_id, entry_id - 1, b"e%d" % entry_id)
    assert [s.read_entry(1, e) for e in range(5)] == [b"e%d" % e for e in range(5)]
    assert s.read_last_add_confirmed(1) == 3
    assert s.last_entry_id(1) == 4


async def test_lac_never_goes_back(subject: Subject) -> None:
    s = subject.storage
    await s.add_entry(1, 0, 5, b"a")  # a writer may send its LAC late, out of order
    await s.add_entry(1, 1, 2, b"b")
    assert s.read_last_add_confirmed(1) == 5


async def test_retried_add_with_same_bytes_returns_at_once_and_changes_nothing(subject: Subject) -> None:
    s = subject.storage
    await s.add_entry(1, 0, -1, b"a")
    await s.add_entry(1, 1, 0, b"b")
    await s.add_entry(1, 0, 7, b"a")  # a retry: its LAC is not applied
    assert s.read_entry(1, 0) == b"a"
    assert s.read_last_add_confirmed(1) == 0
    assert s.last_entry_id(1) == 1


async def test_retried_add_with_other_bytes_is_bad_request(subject: Subject) -> None:
    s = subject.storage
    await s.add_entry(1, 0, -1, b"a")
    with pytest.raises(BookieError) as info:
        await s.add_entry(1, 0, -1, b"other")
    assert info.value.code == ErrorCode.BAD_REQUEST
    assert s.read_entry(1, 0) == b"a"


async def test_unknown_ledger_and_entry(subject: Subject) -> None:
    s = subject.storage
    with pytest.raises(NoSuchLedgerError):
        s.read_entry(9, 0)
    with pytest.raises(NoSuchLedgerError):
        s.read_last_add_confirmed(9)
    with pytest.raises(NoSuchLedgerError):
        s.last_entry_id(9)
    await s.add_entry(9, 0, -1, b"x")
    with pytest.raises(NoSuchEntryError):
        s.read_entry(9, 1)


@pytest.mark.parametrize(
    ("ledger_id", "entry_id", "lac", "size"),
    [
        (-1, 0, -1, 1),
        (1, -1, -1, 1),
        (2**64, 0, -1, 1),
        (1, 2**63, -1, 1),
        (1, 2**31, -1, 1),
        (1, 0, 2**63, 1),
    ],
    ids=[
        "negative ledger",
        "negative entry",
        "ledger past u64",
        "entry past i64",
        "entry past the index",
        "lac past i64",
    ],
)
async def test_bad_ids_are_refused_and_change_nothing(
    subject: Subject, ledger_id: int, entry_id: int, lac: int, size: int
) -> None:
    s = subject.storage
    with pytest.raises(BookieError) as info:
        await s.add_entry(ledger_id, entry_id, lac, b"x" * size)
    assert info.value.code == ErrorCode.BAD_REQUEST
    assert s.stats()["ledgers"] == 0


async def test_oversize_payload_is_refused(subject: Subject) -> None:
    s = subject.storage
    with pytest.raises(BookieError) as info:
        await s.add_entry(1, 0, -1, bytes(MAX_PAYLOAD_BYTES + 1))
    assert info.value.code == ErrorCode.BAD_REQUEST
    with pytest.raises(NoSuchLedgerError):
        s.read_entry(1, 0)


async def test_fence_refuses_adds_but_not_recovery_adds(subject: Subject) -> None:
    s = subject.storage
    await s.add_entry(1, 0, -1, b"a")
    await s.add_entry(1, 1, 0, b"b")
    assert await s.fence(1) == 0
    assert await is_fenced(s, 1)
    with pytest.raises(FencedError):
        await s.add_entry(1, 2, 1, b"c")
    await s.add_entry(1, 2, 1, b"c", recovery=True)
    assert s.read_entry(1, 2) == b"c"
    assert await s.fence(1) == 1  # fencing again is harmless and reports the LAC


async def test_fencing_an_unknown_ledger_creates_it_empty(subject: Subject) -> None:
    s = subject.storage
    assert await s.fence(5) == -1
    assert await is_fenced(s, 5)
    assert s.last_entry_id(5) == -1
    assert not await is_fenced(s, 6)


async def test_delete_forgets_the_ledger_and_is_idempotent(subject: Subject) -> None:
    s = subject.storage
    await s.add_entry(1, 0, -1, b"a")
    await s.add_entry(2, 0, -1, b"b")
    await s.delete_ledger(1)
    await s.delete_ledger(1)
    await s.delete_ledger(77)
    with pytest.raises(NoSuchLedgerError):
        s.read_entry(1, 0)
    assert s.read_entry(2, 0) == b"b"
    assert s.stats()["ledgers"] == 1


async def test_ledger_ids_lists_every_ledger_held_and_none_deleted(subject: Subject) -> None:
    """What the ledger garbage collector compares with the metadata (`bookie.ledger_gc`)."""
    s = subject.storage
    assert s.ledger_ids() == []
    await s.add_entry(3, 0, -1, b"a")
    await s.add_entry(1, 0, -1, b"b")
    await s.fence(9)  # fenced only: held all the same
    await s.delete_ledger(1)
    assert sorted(s.ledger_ids()) == [3, 9]


async def test_read_only_refuses_adds_and_serves_reads(subject: Subject) -> None:
    s = subject.storage
    await s.add_entry(1, 0, -1, b"a")
    subject.set_read_only(True)
    assert s.read_only
    with pytest.raises(ReadOnlyError):
        await s.add_entry(1, 1, 0, b"b")
    assert s.read_entry(1, 0) == b"a"
    assert await s.fence(1) == -1  # fences (and deletes) are still taken
    subject.set_read_only(False)
    assert not s.read_only
    await s.add_entry(2, 0, -1, b"c")


async def test_stats_shape(subject: Subject) -> None:
    s = subject.storage
    await s.add_entry(1, 0, -1, b"a")
    stats = s.stats()
    assert stats["ledgers"] == 1
    assert stats["read_only"] is False
    assert stats["adds"] == 1
