"""`GET /admin/v2/bookies/all` and the `quire_bookies` gauge, on the ASGI app with an in-memory
registry (the live test in tests/bookie/test_registration_process.py runs real processes)."""

from __future__ import annotations

from collections.abc import AsyncIterator

import httpx
import pytest

from app.registry import wait_for_bookies
from app.routes.cluster import install_registry
from bookie.recovery_store import UnderReplicatedLedger
from bookie.registry import BookieRecord, BookieState, MetadataBookieRegistry, RegistryConfig
from managed_ledger.metadata.memory import InMemoryMetadataStore
from tests.api.conftest import served

NOW_MS = 5_000_000


@pytest.fixture
def store() -> InMemoryMetadataStore:
    store = InMemoryMetadataStore()
    store.put_bookie(BookieRecord("a:1", "ia", BookieState.WRITABLE, NOW_MS, free_bytes=100, ledgers=2))
    store.put_bookie(BookieRecord("b:1", "ib", BookieState.READ_ONLY, NOW_MS - 1, free_bytes=1))
    store.put_bookie(BookieRecord("c:1", "ic", BookieState.WRITABLE, NOW_MS - 60_000, ledgers=5))
    return store


@pytest.fixture
async def client(store: InMemoryMetadataStore) -> AsyncIterator[httpx.AsyncClient]:
    async with served() as topics:
        registry = MetadataBookieRegistry(store, RegistryConfig(10_000), lambda: NOW_MS)
        install_registry(topics.app, registry, store)
        yield topics.client


async def test_every_registered_bookie_with_its_state(client: httpx.AsyncClient) -> None:
    r = await client.get("/admin/v2/bookies/all")
    assert r.status_code == 200, r.text
    assert r.json() == {
        "bookies": [
            {"bookieId": "a:1", "state": "writable", "ledgers": 2, "freeBytes": 100},
            {"bookieId": "b:1", "state": "read_only", "ledgers": 0, "freeBytes": 1},
            {"bookieId": "c:1", "state": "down", "ledgers": 5, "freeBytes": 0},
        ]
    }


async def test_gauge_counts_bookies_per_state(client: httpx.AsyncClient) -> None:
    text = (await client.get("/metrics")).text
    counts = (("writable", 1), ("read_only", 1), ("down", 1), ("decommissioning", 0), ("decommissioned", 0))
    for state, count in counts:
        assert f'quire_bookies{{state="{state}"}} {count}.0' in text


async def test_no_registry_is_a_503_problem() -> None:
    async with served() as topics:
        for r in (
            await topics.client.get("/admin/v2/bookies/all"),
            await topics.client.get("/admin/v2/bookies/underreplicated"),
            await topics.client.post("/admin/v2/bookies/a:1/decommission"),
        ):
            assert r.status_code == 503 and r.headers["content-type"] == "application/problem+json"
            assert "registry" in r.json()["detail"]


async def test_decommission_marks_the_bookie_and_is_idempotent(
    client: httpx.AsyncClient, store: InMemoryMetadataStore
) -> None:
    store.put_bookie(BookieRecord("d:1", "id", BookieState.WRITABLE, NOW_MS))  # one to write to meanwhile
    r = await client.post("/admin/v2/bookies/a:1/decommission")
    assert r.status_code == 204 and r.content == b""
    assert _states(await client.get("/admin/v2/bookies/all"))["a:1"] == "decommissioning"
    store.put_bookie(BookieRecord("a:1", "ia", BookieState.WRITABLE, NOW_MS))  # a heartbeat keeps it
    assert (await client.post("/admin/v2/bookies/a:1/decommission")).status_code == 204
    assert _states(await client.get("/admin/v2/bookies/all"))["a:1"] == "decommissioning"
    store.set_bookie_state("a:1", BookieState.DECOMMISSIONED)  # as the auditor does once drained
    assert (await client.post("/admin/v2/bookies/a:1/decommission")).status_code == 204
    assert _states(await client.get("/admin/v2/bookies/all"))["a:1"] == "decommissioned"


async def test_decommission_that_would_leave_too_few_writable_bookies_is_a_409_that_changes_nothing(
    client: httpx.AsyncClient, store: InMemoryMetadataStore
) -> None:
    """a:1 is the only live writable bookie (b:1 is read-only, c:1 down): taking it out would
    stop every produce, with no way back (found by a fuzzer's stateful phase)."""
    before = store.list_bookies()
    r = await client.post("/admin/v2/bookies/a:1/decommission")
    assert r.status_code == 409 and r.headers["content-type"] == "application/problem+json", r.text
    detail = r.json()["detail"]
    assert "a:1" in detail and "0 writable" in detail and "QUIRE_ENSEMBLE_SIZE" in detail, detail
    assert store.list_bookies() == before


async def test_decommission_counts_the_ensemble_size_the_broker_writes_with(
    store: InMemoryMetadataStore,
) -> None:
    store.put_bookie(BookieRecord("d:1", "id", BookieState.WRITABLE, NOW_MS))
    async with served() as topics:
        registry = MetadataBookieRegistry(store, RegistryConfig(10_000), lambda: NOW_MS)
        install_registry(topics.app, registry, store, ensemble_size=2)
        r = await topics.client.post("/admin/v2/bookies/a:1/decommission")
        assert r.status_code == 409 and "need 2" in r.json()["detail"], r.text
        store.put_bookie(BookieRecord("e:1", "ie", BookieState.WRITABLE, NOW_MS))
        assert (await topics.client.post("/admin/v2/bookies/a:1/decommission")).status_code == 204
    assert _stored(store)["a:1"] == BookieState.DECOMMISSIONING


async def test_a_decommission_can_be_cancelled(
    client: httpx.AsyncClient, store: InMemoryMetadataStore
) -> None:
    store.put_bookie(BookieRecord("d:1", "id", BookieState.WRITABLE, NOW_MS))
    assert (await client.post("/admin/v2/bookies/a:1/decommission")).status_code == 204
    r = await client.delete("/admin/v2/bookies/a:1/decommission")
    assert r.status_code == 204 and r.content == b""
    assert _states(await client.get("/admin/v2/bookies/all"))["a:1"] == "writable"
    # Cancelling again, or on a bookie never decommissioned, changes nothing.
    assert (await client.delete("/admin/v2/bookies/a:1/decommission")).status_code == 204
    assert (await client.delete("/admin/v2/bookies/b:1/decommission")).status_code == 204
    assert _stored(store)["b:1"] == BookieState.READ_ONLY
    # A drained bookie goes back to service too.
    store.set_bookie_state("d:1", BookieState.DECOMMISSIONED)
    assert (await client.delete("/admin/v2/bookies/d:1/decommission")).status_code == 204
    assert _stored(store)["d:1"] == BookieState.WRITABLE
    r = await client.delete("/admin/v2/bookies/z:9/decommission")
    assert r.status_code == 404 and r.headers["content-type"] == "application/problem+json"


def _stored(store: InMemoryMetadataStore) -> dict[str, BookieState]:
    return {r.bookie_id: r.state for r in store.list_bookies()}


async def test_decommission_of_an_unknown_bookie_is_a_404_that_changes_nothing(
    client: httpx.AsyncClient, store: InMemoryMetadataStore
) -> None:
    before = store.list_bookies()
    r = await client.post("/admin/v2/bookies/z:9/decommission")
    assert r.status_code == 404 and r.headers["content-type"] == "application/problem+json"
    assert "z:9" in r.json()["detail"] and store.list_bookies() == before


async def test_a_stopped_decommissioned_bookie_shows_decommissioned_not_down(
    client: httpx.AsyncClient, store: InMemoryMetadataStore
) -> None:
    store.set_bookie_state("c:1", BookieState.DECOMMISSIONED)  # c:1's heartbeat expired long ago
    assert _states(await client.get("/admin/v2/bookies/all"))["c:1"] == "decommissioned"


async def test_underreplicated_ledgers_listed_and_counted(
    client: httpx.AsyncClient, store: InMemoryMetadataStore
) -> None:
    assert (await client.get("/admin/v2/bookies/underreplicated")).json() == {"ledgers": []}
    assert "quire_underreplicated_ledgers 0.0" in (await client.get("/metrics")).text
    store.put_underreplicated(UnderReplicatedLedger(9, ("c:1",), claimed_by="w1", claim_expires_ms=1))
    store.put_underreplicated(UnderReplicatedLedger(4, ("c:1", "b:1")))
    r = await client.get("/admin/v2/bookies/underreplicated")
    assert r.status_code == 200 and r.json() == {
        "ledgers": [
            {"ledgerId": 4, "missingReplicas": ["b:1", "c:1"]},
            {"ledgerId": 9, "missingReplicas": ["c:1"]},
        ]
    }
    assert "quire_underreplicated_ledgers 2.0" in (await client.get("/metrics")).text


def _states(response: httpx.Response) -> dict[str, str]:
    assert response.status_code == 200, response.text
    return {b["bookieId"]: b["state"] for b in response.json()["bookies"]}


def test_broker_start_waits_until_enough_bookies_are_live(store: InMemoryMetadataStore) -> None:
    registry = MetadataBookieRegistry(store, RegistryConfig(10_000), lambda: NOW_MS)
    now = [0.0]
    joined = BookieRecord("d:1", "id", BookieState.WRITABLE, NOW_MS)

    def sleep(seconds: float) -> None:  # a bookie joins while the broker waits
        now[0] += seconds
        store.put_bookie(joined)

    assert wait_for_bookies(registry, 3, 5.0, monotonic=lambda: now[0], sleep=sleep) == 3
    assert now[0] > 0  # it did wait: two were live at first
    with pytest.raises(SystemExit, match="ensemble_size is 4 but only 3 bookie"):
        wait_for_bookies(
            registry, 4, 1.0, monotonic=lambda: now[0], sleep=lambda s: now.__setitem__(0, now[0] + s)
        )


async def test_ensemble_changes_are_counted_on_metrics(client: httpx.AsyncClient) -> None:
    from bookie.ledgers import COUNTERS, LedgerManager, StaticPlacement
    from bookie.memory import InMemoryLedgerClient

    store = InMemoryMetadataStore()
    ledgers = LedgerManager(store, InMemoryLedgerClient(), placement=StaticPlacement(["a:1", "b:1"]))
    handle = await ledgers.create(1, 1, 1)
    before = COUNTERS.ensemble_changes
    await ledgers.change_ensemble(handle.ledger_id, 0, ["b:1"])
    assert COUNTERS.ensemble_changes == before + 1
    text = (await client.get("/metrics")).text
    assert f"quire_ensemble_changes_total {before + 1}.0" in text
