"""The ledger lifecycle (`bookie.ledgers.LedgerManager`) over every pair of implementations:
the in-memory and SQL metadata stores (SQLite and PostgreSQL), the in-memory ledger client and
the TCP client on a real `quire bookie` process."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from bookie.api import LedgerClient
from bookie.client import BookieLedgerClient
from bookie.errors import BookieError, ErrorCode, FencedError, NoSuchLedgerError
from bookie.ledger_metadata import BadVersionError, LedgerMetadataStore, LedgerState, NotFoundError
from bookie.ledgers import LedgerManager, StaticPlacement, ledger_spec
from bookie.memory import InMemoryLedgerClient
from bookie.registry import BookieRecord, BookieState, MetadataBookieRegistry, NotEnoughBookiesError
from bookie.types import LedgerSpec
from managed_ledger.metadata.memory import InMemoryMetadataStore
from managed_ledger.metadata.sql import SqlMetadataStore
from tests.conftest import drop_postgres_schema, fresh_postgres_schema_url

CLOCK_MS = 1_700_000_000_000


def clock() -> int:
    return CLOCK_MS


def payload(i: int) -> bytes:
    return b"entry-%04d" % i


@pytest.fixture(params=["memory-store", "sqlite", "postgres"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[LedgerMetadataStore]:
    """The metadata stores as `metadata_url` (tests/conftest.py) makes them, plus the in-memory one."""
    if request.param == "memory-store":
        yield InMemoryMetadataStore()
        return
    if request.param == "sqlite":
        url, cleanup = f"sqlite:///{tmp_path / 'metadata.db'}", None
    else:
        base = request.getfixturevalue("postgres_url")
        url, schema = fresh_postgres_schema_url(base)
        cleanup = (base, schema)
    sql = SqlMetadataStore(url)
    try:
        yield sql
    finally:
        sql.close()
        if cleanup is not None:
            drop_postgres_schema(*cleanup)


@pytest.fixture(params=["memory-client", pytest.param("bookie", marks=pytest.mark.process)])
async def client_and_ensemble(
    request: pytest.FixtureRequest,
) -> AsyncIterator[tuple[LedgerClient, tuple[str, ...]]]:
    client: LedgerClient
    if request.param == "memory-client":
        client, ensemble = InMemoryLedgerClient(), ("memory:0",)
    else:
        # A bookie per test: each test's store numbers its ledgers from 1 again.
        bookie = request.getfixturevalue("bookie_process")
        client, ensemble = BookieLedgerClient(), (bookie.address,)
    try:
        yield client, ensemble
    finally:
        await client.close()


@pytest.fixture
def client(client_and_ensemble: tuple[LedgerClient, tuple[str, ...]]) -> LedgerClient:
    return client_and_ensemble[0]


@pytest.fixture
def ensemble(client_and_ensemble: tuple[LedgerClient, tuple[str, ...]]) -> tuple[str, ...]:
    return client_and_ensemble[1]


@pytest.fixture
def manager(store: LedgerMetadataStore, client: LedgerClient) -> LedgerManager:
    return LedgerManager(store, client, clock=clock)


async def assert_gone(store: LedgerMetadataStore, client: LedgerClient, spec: LedgerSpec) -> None:
    """Neither a row nor bookie data is left of the ledger."""
    assert spec.ledger_id not in [m.ledger_id for m in store.list_ledgers()]
    with pytest.raises(NotFoundError):
        store.get_ledger(spec.ledger_id)
    with pytest.raises(NoSuchLedgerError):
        await client.read_entries(spec, 0, 0)


async def test_create_then_close_records_last_entry_and_length(
    manager: LedgerManager, store: LedgerMetadataStore, ensemble: tuple[str, ...]
) -> None:
    handle = await manager.create(ensemble=ensemble)
    row = store.get_ledger(handle.ledger_id)
    assert row.state == LedgerState.OPEN and row.ensemble == ensemble and row.created_ms == CLOCK_MS
    assert await manager.spec(handle.ledger_id) == handle.spec == ledger_spec(row)
    ids = await asyncio.gather(*(handle.add_entry(payload(i)) for i in range(30)))
    assert ids == list(range(30))
    closed = await manager.close(handle)
    assert closed == store.get_ledger(handle.ledger_id)
    assert closed.state == LedgerState.CLOSED and closed.last_entry_id == 29
    assert closed.length_bytes == sum(len(payload(i)) for i in range(30))
    assert closed.closed_ms == CLOCK_MS
    assert await manager.read(handle.ledger_id, 0, 29) == [payload(i) for i in range(30)]


async def test_an_empty_ledger_closes_at_minus_one(manager: LedgerManager, ensemble: tuple[str, ...]) -> None:
    closed = await manager.close(await manager.create(ensemble=ensemble))
    assert (closed.state, closed.last_entry_id, closed.length_bytes) == (LedgerState.CLOSED, -1, 0)


async def test_bad_quorums_create_no_row(
    manager: LedgerManager, store: LedgerMetadataStore, ensemble: tuple[str, ...]
) -> None:
    with pytest.raises(ValueError, match="quorum"):
        await manager.create(ensemble=ensemble, write_quorum=2, ack_quorum=1)
    assert store.list_ledgers() == []


class _RefusingClient:
    """A client whose bookies refuse new ledgers (everything else passes through)."""

    def __init__(self, inner: LedgerClient) -> None:
        self._inner = inner

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    async def create_ledger(self, spec: LedgerSpec, on_ensemble_change: Any = None) -> Any:
        raise BookieError(ErrorCode.UNAVAILABLE, "no bookie takes new ledgers")


async def test_a_writer_that_cannot_start_leaves_no_row(
    store: LedgerMetadataStore, client: LedgerClient, ensemble: tuple[str, ...]
) -> None:
    refusing = LedgerManager(store, _RefusingClient(client), clock=clock)  # type: ignore[arg-type]
    with pytest.raises(BookieError):
        await refusing.create(ensemble=ensemble)
    assert store.list_ledgers() == []


async def test_recover_and_close_fences_the_writer_and_is_idempotent(
    manager: LedgerManager, store: LedgerMetadataStore, client: LedgerClient, ensemble: tuple[str, ...]
) -> None:
    handle = await manager.create(ensemble=ensemble)
    await asyncio.gather(*(handle.add_entry(payload(i)) for i in range(12)))
    # The writer's process "dies" here; another one recovers the ledger.
    successor = LedgerManager(store, client, clock=clock)
    closed = await successor.recover_and_close(handle.ledger_id)
    assert closed.state == LedgerState.CLOSED and closed.last_entry_id == 11
    assert closed.length_bytes == sum(len(payload(i)) for i in range(12))
    with pytest.raises(FencedError):
        await handle.add_entry(b"too late")
    assert await successor.recover_and_close(handle.ledger_id) == closed  # no second CAS
    assert store.get_ledger(handle.ledger_id).version == closed.version


async def test_recovering_an_untouched_ledger_closes_it_empty(
    manager: LedgerManager, ensemble: tuple[str, ...]
) -> None:
    handle = await manager.create(ensemble=ensemble)
    closed = await manager.recover_and_close(handle.ledger_id)
    assert (closed.state, closed.last_entry_id, closed.length_bytes) == (LedgerState.CLOSED, -1, 0)


async def test_closing_after_a_failed_add_recovers(
    manager: LedgerManager, client: LedgerClient, ensemble: tuple[str, ...]
) -> None:
    if not isinstance(client, InMemoryLedgerClient):
        pytest.skip("only the in-memory client can be told to fail an add")
    handle = await manager.create(ensemble=ensemble)
    await handle.add_entry(b"kept")
    client.fail_adds = BookieError(ErrorCode.UNAVAILABLE, "bookie gone")
    with pytest.raises(BookieError):
        await handle.add_entry(b"lost")
    client.fail_adds = None
    closed = await manager.close(handle)
    assert (closed.state, closed.last_entry_id, closed.length_bytes) == (LedgerState.CLOSED, 0, 4)


async def test_delete_removes_bookie_data_and_row_and_is_idempotent(
    manager: LedgerManager, store: LedgerMetadataStore, client: LedgerClient, ensemble: tuple[str, ...]
) -> None:
    handle = await manager.create(ensemble=ensemble)
    await handle.add_entry(b"a")
    spec = handle.spec
    await manager.close(handle)
    await manager.delete(spec.ledger_id)
    await assert_gone(store, client, spec)
    await manager.delete(spec.ledger_id)  # already gone
    await manager.delete(10_000)  # never existed


async def test_an_open_ledger_can_be_deleted(
    manager: LedgerManager, store: LedgerMetadataStore, client: LedgerClient, ensemble: tuple[str, ...]
) -> None:
    handle = await manager.create(ensemble=ensemble)
    await handle.add_entry(b"half-written")
    await manager.delete(handle.ledger_id)
    await assert_gone(store, client, handle.spec)


class _CrashingClient(_RefusingClient):
    """The process "dies" when it asks the bookies to delete a ledger."""

    async def delete_ledger(self, spec: LedgerSpec) -> None:
        raise RuntimeError("killed before the bookies deleted the ledger")


class _CrashingStore:
    """The process "dies" right before it deletes a ledger row."""

    def __init__(self, inner: LedgerMetadataStore) -> None:
        self._inner = inner

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    def delete_ledger(self, ledger_id: int) -> None:
        raise RuntimeError("killed before the row was deleted")


@pytest.mark.parametrize("crash", ["after-mark", "after-bookie-delete"])
async def test_a_crash_between_delete_steps_is_finished_by_the_sweep(
    crash: str, store: LedgerMetadataStore, client: LedgerClient, ensemble: tuple[str, ...]
) -> None:
    manager = LedgerManager(store, client, clock=clock)
    kept = await manager.create(ensemble=ensemble)
    await kept.add_entry(b"kept")
    await manager.close(kept)
    doomed = await manager.create(ensemble=ensemble)
    await asyncio.gather(*(doomed.add_entry(payload(i)) for i in range(5)))
    await manager.close(doomed)
    if crash == "after-mark":
        dying = LedgerManager(store, _CrashingClient(client), clock=clock)  # type: ignore[arg-type]
    else:
        dying = LedgerManager(_CrashingStore(store), client, clock=clock)  # type: ignore[arg-type]
    with pytest.raises(RuntimeError, match="killed"):
        await dying.delete(doomed.ledger_id)

    # What the crash left: a row marked DELETING that nothing may read any more.
    assert store.get_ledger(doomed.ledger_id).state == LedgerState.DELETING
    with pytest.raises(NotFoundError):
        await manager.spec(doomed.ledger_id)
    with pytest.raises(NotFoundError):
        await manager.recover_and_close(doomed.ledger_id)

    fresh = LedgerManager(store, client, clock=clock)
    assert await fresh.finish_deletions() == 1
    await assert_gone(store, client, doomed.spec)
    assert await fresh.finish_deletions() == 0
    assert [m.ledger_id for m in store.list_ledgers()] == [kept.ledger_id]
    assert await fresh.read(kept.ledger_id, 0, 0) == [b"kept"]


async def test_a_row_marked_deleting_is_finished_by_delete_too(
    manager: LedgerManager, store: LedgerMetadataStore, client: LedgerClient, ensemble: tuple[str, ...]
) -> None:
    handle = await manager.create(ensemble=ensemble)
    await handle.add_entry(b"x")
    row = await manager.close(handle)
    store.update_ledger(replace(row, state=LedgerState.DELETING))  # the first step, then a crash
    await manager.delete(row.ledger_id)
    await assert_gone(store, client, handle.spec)


# --- ensemble history: change_ensemble (the writer's) and replace_bookie (re-replication's) ------
@pytest.fixture
def meta_manager(store: LedgerMetadataStore) -> LedgerManager:
    """A manager whose bookie side does not matter: these tests change metadata only."""
    return LedgerManager(store, InMemoryLedgerClient(), clock=clock)


async def test_change_ensemble_appends_a_segment_by_cas(
    meta_manager: LedgerManager, store: LedgerMetadataStore
) -> None:
    handle = await meta_manager.create(write_quorum=2, ack_quorum=2, ensemble=("a:1", "b:1", "c:1"))
    changed = await meta_manager.change_ensemble(handle.ledger_id, 7, ("a:1", "d:1", "c:1"))
    assert changed.ensembles == ((0, ("a:1", "b:1", "c:1")), (7, ("a:1", "d:1", "c:1")))
    assert changed.ensemble == ("a:1", "b:1", "c:1") and changed.version == handle.metadata.version + 1
    # A second change at the same entry replaces that segment (none of its entries was acked).
    again = await meta_manager.change_ensemble(handle.ledger_id, 7, ("a:1", "e:1", "c:1"))
    assert again.ensembles == ((0, ("a:1", "b:1", "c:1")), (7, ("a:1", "e:1", "c:1")))
    later = await meta_manager.change_ensemble(handle.ledger_id, 9, ("f:1", "e:1", "c:1"))
    assert store.get_ledger(handle.ledger_id) == later and len(later.ensembles) == 3
    spec = ledger_spec(later)
    assert [spec.write_set(e) for e in (6, 7, 8, 9, 10)] == [
        ("a:1", "b:1"),
        ("e:1", "c:1"),
        ("c:1", "a:1"),
        ("f:1", "e:1"),
        ("e:1", "c:1"),
    ]
    with pytest.raises(ValueError):  # before the last segment: history only grows
        await meta_manager.change_ensemble(handle.ledger_id, 8, ("a:1", "e:1", "c:1"))
    with pytest.raises(ValueError):  # a bookie twice in one ensemble
        await meta_manager.change_ensemble(handle.ledger_id, 12, ("a:1", "a:1", "c:1"))
    assert store.get_ledger(handle.ledger_id) == later


async def test_change_ensemble_at_entry_zero_changes_the_first_ensemble(meta_manager: LedgerManager) -> None:
    handle = await meta_manager.create(write_quorum=2, ack_quorum=1, ensemble=("a:1", "b:1"))
    changed = await meta_manager.change_ensemble(handle.ledger_id, 0, ("a:1", "c:1"))
    assert changed.ensemble == ("a:1", "c:1") and changed.ensembles == ((0, ("a:1", "c:1")),)


async def test_change_ensemble_of_a_ledger_recovered_by_someone_else_is_fenced(
    meta_manager: LedgerManager, store: LedgerMetadataStore
) -> None:
    handle = await meta_manager.create(write_quorum=2, ack_quorum=2, ensemble=("a:1", "b:1"))
    await meta_manager.recover_and_close(handle.ledger_id)
    closed = store.get_ledger(handle.ledger_id)
    with pytest.raises(FencedError):
        await meta_manager.change_ensemble(handle.ledger_id, 0, ("a:1", "c:1"))
    assert store.get_ledger(handle.ledger_id) == closed


async def test_change_ensemble_retries_a_lost_race_on_the_fresh_row(
    meta_manager: LedgerManager, store: LedgerMetadataStore
) -> None:
    handle = await meta_manager.create(write_quorum=2, ack_quorum=2, ensemble=("a:1", "b:1", "c:1"))
    # Someone else moves the row (a bookie swapped in by re-replication) after we created it.
    await meta_manager.replace_bookie(handle.ledger_id, 0, "c:1", "z:1")
    changed = await meta_manager.change_ensemble(handle.ledger_id, 3, ("a:1", "d:1", "z:1"))
    assert changed.ensembles == ((0, ("a:1", "b:1", "z:1")), (3, ("a:1", "d:1", "z:1")))


async def test_replace_bookie_swaps_one_bookie_of_one_segment(
    meta_manager: LedgerManager, store: LedgerMetadataStore
) -> None:
    handle = await meta_manager.create(write_quorum=2, ack_quorum=2, ensemble=("a:1", "b:1", "c:1"))
    handle.metadata = await meta_manager.change_ensemble(handle.ledger_id, 5, ("a:1", "d:1", "c:1"))
    closed = await meta_manager.close(handle)
    swapped = await meta_manager.replace_bookie(handle.ledger_id, 5, "c:1", "e:1")
    assert swapped.ensembles == ((0, ("a:1", "b:1", "c:1")), (5, ("a:1", "d:1", "e:1")))
    assert (swapped.state, swapped.version) == (LedgerState.CLOSED, closed.version + 1)
    first = await meta_manager.replace_bookie(handle.ledger_id, 0, "a:1", "f:1")
    assert first.ensemble == ("f:1", "b:1", "c:1") and first.ensembles[0] == (0, ("f:1", "b:1", "c:1"))
    assert store.get_ledger(handle.ledger_id) == first
    with pytest.raises(BadVersionError):  # someone replaced it first
        await meta_manager.replace_bookie(handle.ledger_id, 0, "a:1", "g:1")
    with pytest.raises(ValueError):
        await meta_manager.replace_bookie(handle.ledger_id, 0, "b:1", "c:1")
    with pytest.raises(NotFoundError):
        await meta_manager.replace_bookie(handle.ledger_id, 3, "b:1", "g:1")
    with pytest.raises(NotFoundError):
        await meta_manager.replace_bookie(10_000, 0, "b:1", "g:1")
    assert store.get_ledger(handle.ledger_id) == first


# --- placement -----------------------------------------------------------------------------------
async def test_create_takes_the_ensemble_from_the_static_placement(store: LedgerMetadataStore) -> None:
    placement = StaticPlacement(("a:1", "b:1", "c:1"))
    manager = LedgerManager(store, InMemoryLedgerClient(), clock=clock, placement=placement)
    first = await manager.create(2, 2, 1)
    second = await manager.create(2, 2, 1)
    assert first.metadata.ensemble == ("a:1", "b:1") and second.metadata.ensemble == ("b:1", "c:1")
    assert placement.choose_ensemble(2, exclude=("b:1",)) in {("a:1", "c:1"), ("c:1", "a:1")}
    with pytest.raises(NotEnoughBookiesError):
        await manager.create(4, 2, 1)
    assert [m.ledger_id for m in store.list_ledgers()] == [first.ledger_id, second.ledger_id]


async def test_create_takes_live_writable_bookies_from_the_registry() -> None:
    store = InMemoryMetadataStore()
    now = clock()
    for name, state, age_ms in [
        ("a:1", BookieState.WRITABLE, 0),
        ("b:1", BookieState.WRITABLE, 0),
        ("c:1", BookieState.READ_ONLY, 0),
        ("d:1", BookieState.WRITABLE, 60_000),  # heartbeat expired: down
    ]:
        store.put_bookie(BookieRecord(name, "i-" + name, state, heartbeat_ms=now - age_ms))
    registry = MetadataBookieRegistry(store, clock_ms=clock)
    manager = LedgerManager(store, InMemoryLedgerClient(), clock=clock, placement=registry)
    handle = await manager.create(2, 2, 2)
    assert sorted(handle.metadata.ensemble) == ["a:1", "b:1"]
    with pytest.raises(NotEnoughBookiesError):
        await manager.create(3, 2, 2)
