"""A deletion does not wait for a bookie that is down, and that bookie deletes its copy itself
when it is back (`bookie.ledger_gc`; reliability review 2026-11-28, finding 4).

Real bookie servers over TCP (`tests/bookie/local_cluster.py`), the real client and ledger
manager, the in-memory and the SQLite metadata stores; and one `quire bookie` process."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterator
from dataclasses import replace
from pathlib import Path

import pytest

from bookie.client import BookieClientConfig, BookieLedgerClient
from bookie.errors import NoSuchLedgerError
from bookie.ledger_gc import LedgerGarbageCollector
from bookie.ledger_metadata import LedgerMetadataStore, LedgerState, MetadataUnavailableError, NotFoundError
from bookie.ledgers import LedgerManager
from bookie.types import LedgerSpec
from managed_ledger.metadata.memory import InMemoryMetadataStore
from managed_ledger.metadata.sql import SqlMetadataStore
from tests.bookie.conftest import start_bookie_process
from tests.bookie.fakes import MemoryStorage
from tests.bookie.local_cluster import LocalBookie
from tests.support import wait_until


@pytest.fixture(params=["memory-store", "sqlite"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[LedgerMetadataStore]:
    if request.param == "memory-store":
        yield InMemoryMetadataStore()
        return
    sql = SqlMetadataStore(f"sqlite:///{tmp_path / 'meta.db'}")
    try:
        yield sql
    finally:
        sql.close()


@pytest.fixture
async def bookies() -> AsyncIterator[list[LocalBookie]]:
    started = [await LocalBookie().start() for _ in range(2)]
    try:
        yield started
    finally:
        for b in started:
            await b.stop()


def held(bookie: LocalBookie) -> list[int]:
    assert isinstance(bookie.storage, MemoryStorage)
    return sorted(bookie.storage.ledger_ids())


async def test_a_deletion_does_not_wait_for_a_down_bookie_which_deletes_its_copy_when_back(
    store: LedgerMetadataStore, bookies: list[LocalBookie]
) -> None:
    a, b = bookies
    client = BookieLedgerClient(BookieClientConfig(add_timeout_s=0.5))
    manager = LedgerManager(store, client)
    try:
        ledgers = []
        for _ in range(3):
            handle = await manager.create(2, 2, 2, ensemble=(a.address, b.address))
            await handle.add_entry(b"x")
            ledgers.append(await manager.close(handle))
        doomed, kept, deleting = (m.ledger_id for m in ledgers)
        await b.kill()
        await manager.delete(doomed)  # today: UNAVAILABLE, and the row stays DELETING for ever
        with pytest.raises(NotFoundError):
            store.get_ledger(doomed)
        assert held(a) == [kept, deleting]
        store.update_ledger(replace(ledgers[2], state=LedgerState.DELETING))  # a deleter died here
        await b.start()
        assert held(b) == [doomed, kept, deleting]

        collector = LedgerGarbageCollector(b.storage, store, interval_s=0)  # type: ignore[arg-type]
        assert await collector.collect() == [doomed, deleting]
        assert held(b) == [kept]
        assert await manager.read(kept, 0, 0) == [b"x"]
        assert await collector.collect() == []
    finally:
        await client.close()


async def test_the_collector_keeps_what_the_store_cannot_judge(store: LedgerMetadataStore) -> None:
    """A ledger above every id the store has shown (another store's, or one created after the
    listing) is kept; so is everything when the store holds no ledger at all."""
    storage = MemoryStorage()
    collector = LedgerGarbageCollector(storage, store, interval_s=0)
    await storage.add_entry(10**6, 0, -1, b"x")
    assert await collector.collect() == []  # an empty store: not the cluster's, or reset
    first, gone, last = (store.create_ledger(("b:1",), 1, 1, 0).ledger_id for _ in range(3))
    store.delete_ledger(gone)
    above = last + 100
    for ledger_id in (first, gone, above):
        await storage.add_entry(ledger_id, 0, -1, b"x")
    assert await collector.collect() == [gone]
    assert sorted(storage.ledger_ids()) == [first, above, 10**6]


class _Unreachable(InMemoryMetadataStore):
    def list_ledgers(self) -> list:  # type: ignore[type-arg]
        raise MetadataUnavailableError("database down")


class _ListsTooLittle(InMemoryMetadataStore):
    """A listing that misses a row (say, a replica behind): the row itself is still there."""

    def list_ledgers(self) -> list:  # type: ignore[type-arg]
        return super().list_ledgers()[-1:]


async def test_a_store_that_cannot_answer_or_misses_a_row_deletes_nothing() -> None:
    storage = MemoryStorage()
    await storage.add_entry(1, 0, -1, b"x")
    with pytest.raises(MetadataUnavailableError):
        await LedgerGarbageCollector(storage, _Unreachable(), interval_s=0).collect()
    store = _ListsTooLittle()
    first = store.create_ledger(("b:1",), 1, 1, 0)
    store.create_ledger(("b:1",), 1, 1, 0)
    await storage.add_entry(first.ledger_id, 0, -1, b"x")
    assert await LedgerGarbageCollector(storage, store, interval_s=0).collect() == []
    assert first.ledger_id in storage.ledger_ids()


@pytest.mark.process
def test_quire_bookie_runs_the_collector_only_on_the_clusters_store(tmp_path: Path) -> None:
    """Wiring: `quire bookie` with QUIRE_DATABASE_URL deletes a ledger whose row went; without
    it (its own SQLite file, which holds none of the cluster's ledgers) it never collects."""
    from app.processes.bookie import ledger_gc_interval_s
    from app.settings import Settings

    assert ledger_gc_interval_s(Settings(database_url="", bookie_ledger_gc_interval_s=5)) == 0
    assert ledger_gc_interval_s(Settings(database_url="sqlite:///x", bookie_ledger_gc_interval_s=5)) == 5

    url = f"sqlite:///{tmp_path / 'cluster.db'}"
    bookie = start_bookie_process(
        tmp_path, env={"QUIRE_DATABASE_URL": url, "QUIRE_BOOKIE_LEDGER_GC_INTERVAL_S": "0.2"}
    )
    store = SqlMetadataStore(url)

    async def write() -> tuple[int, int]:
        client = BookieLedgerClient()
        manager = LedgerManager(store, client)
        ids = []
        for _ in range(2):
            handle = await manager.create(ensemble=(bookie.address,))
            await handle.add_entry(b"x")
            ids.append((await manager.close(handle)).ledger_id)
        await client.close()
        return ids[0], ids[1]

    async def held(ledger_id: int) -> bool:
        client = BookieLedgerClient()
        try:
            await client.read_entries(LedgerSpec(ledger_id, (bookie.address,)), 0, 0)
        except NoSuchLedgerError:
            return False
        finally:
            await client.close()
        return True

    try:
        gone, kept = asyncio.run(write())
        store.update_ledger(replace(store.get_ledger(gone), state=LedgerState.DELETING))
        store.delete_ledger(gone)  # deleted while this bookie "was down": it never heard
        wait_until(lambda: not asyncio.run(held(gone)), 20, "the bookie to delete the ledger")
        assert asyncio.run(held(kept))
        assert "ledger garbage collector: deleted ledgers" in bookie.log()
    finally:
        bookie.stop()
        store.close()
