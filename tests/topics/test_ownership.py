"""Topic ownership between brokers, in one process: two topic services (two "brokers") over one
metadata store and one set of bookies (in-memory fakes of both; the process tests in
tests/cluster/ run the real thing). Leases are short and real (the monotonic clock decides when
a broker stops serving), so every wait here is bounded by a few hundred milliseconds."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass

import pytest

from bookie.memory import InMemoryLedgerClient
from managed_ledger.entry_format import Message
from managed_ledger.errors import ManagedLedgerFencedError
from managed_ledger.factory import ManagedLedgerFactory
from managed_ledger.metadata.memory import InMemoryMetadataStore
from topics.config import TopicsConfig
from topics.errors import NotOwnerError, OwnershipUnavailableError
from topics.ownership import Ownership, OwnershipConfig
from topics.service import TopicService

LEASE_MS = 2_000
HEARTBEAT_MS = 200


@dataclass
class Broker:
    service: TopicService
    ownership: Ownership
    factory: ManagedLedgerFactory


class Cluster:
    def __init__(self) -> None:
        self.lease_ms = LEASE_MS
        self.store = InMemoryMetadataStore()
        self.client = InMemoryLedgerClient()
        self.brokers: list[Broker] = []

    async def start_broker(self, port: int) -> Broker:
        ownership = Ownership(
            self.store,
            OwnershipConfig(
                broker_id=f"127.0.0.1:{port}",
                http_url=f"http://127.0.0.1:{port}",
                lease_ms=self.lease_ms,
                heartbeat_interval_ms=HEARTBEAT_MS,
                owner_cache_ms=0,
            ),
        )
        factory = ManagedLedgerFactory(self.client, self.store, ["b1:3181"], timers=False)
        service = TopicService(self.store, factory, self.client, TopicsConfig(), ownership=ownership)
        await service.start()
        broker = Broker(service, ownership, factory)
        self.brokers.append(broker)
        return broker

    async def close(self) -> None:
        for b in self.brokers:
            await b.service.close()
            await b.factory.close()


@pytest.fixture
async def cluster() -> AsyncIterator[Cluster]:
    c = Cluster()
    yield c
    await c.close()


async def _produce(broker: Broker, topic: str, value: bytes = b"v") -> str:
    [result] = await broker.service.produce(topic, None, [Message(value=value)])
    return str(result.message_id)


async def _serve(cluster: Cluster, topic: str, value: bytes) -> tuple[Broker, str]:
    """Produce at whichever broker owns the topic (following the redirect as a client does)."""
    first = cluster.brokers[0]
    try:
        return first, await _produce(first, topic, value)
    except NotOwnerError as exc:
        owner = next(b for b in cluster.brokers if b.ownership.me.http_url == exc.owner_url)
        return owner, await _produce(owner, topic, value)


async def test_a_topic_has_one_owner_and_the_other_broker_names_it(cluster: Cluster) -> None:
    a = await cluster.start_broker(1)
    b = await cluster.start_broker(2)
    owner, _ = await _serve(cluster, "public/default/x", b"1")
    other = b if owner is a else a
    with pytest.raises(NotOwnerError) as info:
        await _produce(other, "public/default/x")
    assert info.value.owner_url == owner.ownership.me.http_url
    assert await other.service.lookup("public/default/x") == owner.ownership.me
    assert (await owner.service.stats("public/default/x"))["ownerBroker"] == owner.ownership.me.broker_id


async def test_lookup_spreads_topics_over_the_brokers(cluster: Cluster) -> None:
    a = await cluster.start_broker(1)
    b = await cluster.start_broker(2)
    await a.ownership.heartbeat()  # a learns that b is live
    owners = [await a.service.lookup(f"public/default/t{i}") for i in range(10)]
    counts = {info.broker_id: 0 for info in (a.ownership.me, b.ownership.me)}
    for info in owners:
        assert info is not None
        counts[info.broker_id] += 1
    assert counts == {a.ownership.me.broker_id: 5, b.ownership.me.broker_id: 5}


async def test_unload_releases_and_the_topic_keeps_its_messages(cluster: Cluster) -> None:
    a = await cluster.start_broker(1)
    first = await _produce(a, "public/default/x", b"1")
    await a.service.unload("public/default/x")
    assert "public/default/x" not in a.ownership.owned
    b = await cluster.start_broker(2)
    b.ownership.draining = False
    a.ownership.draining = True  # a takes nothing new: the next request goes to b
    await a.ownership.heartbeat()
    with pytest.raises(NotOwnerError):
        await _produce(a, "public/default/x")
    second = await _produce(b, "public/default/x", b"2")
    page = await b.service.read("public/default/x", "earliest", 10, False, 0)
    assert [str(m.message_id) for m in page.messages] == [first, second]


async def test_a_broker_past_its_lease_stops_serving_and_its_ledger_is_fenced(cluster: Cluster) -> None:
    a = await cluster.start_broker(1)
    await _produce(a, "public/default/x", b"1")
    [ml] = a.service._topics["public/default/x"].mls
    # a stops renewing (as if paused): its lease runs out locally before it does in the store.
    task = a.ownership._task
    assert task is not None
    task.cancel()
    deadline = time.monotonic() + 10
    while a.ownership.valid():
        assert time.monotonic() < deadline, "the lease never lapsed"
        await asyncio.sleep(0.02)
    assert ml.is_fenced
    with pytest.raises(ManagedLedgerFencedError):
        await ml.append(b"stale")
    with pytest.raises(OwnershipUnavailableError):
        await _produce(a, "public/default/x")
    # Once its lease has ended in the store too, another broker takes the topic over.
    b = await cluster.start_broker(2)
    deadline = time.monotonic() + 10
    while True:
        try:
            await _produce(b, "public/default/x", b"2")
            break
        except NotOwnerError:
            assert time.monotonic() < deadline, "b never took the topic over"
            await asyncio.sleep(0.05)
    page = await b.service.read("public/default/x", "earliest", 10, False, 0)
    assert [m.value for m in page.messages] == [b"1", b"2"]
    # a's next heartbeat notices, drops what it had and comes back with a new session.
    old_session = a.ownership.session
    await a.ownership.heartbeat()
    assert a.ownership.valid() and a.ownership.session != old_session
    assert "public/default/x" not in a.service._topics
    with pytest.raises(NotOwnerError):
        await _produce(a, "public/default/x")


async def test_a_long_poll_on_a_topic_that_moves_answers_empty(cluster: Cluster) -> None:
    a = await cluster.start_broker(1)
    await a.service.create_subscription("public/default/x", "s", _options())
    waiting = asyncio.create_task(a.service.receive("public/default/x", "s", 10, 10_000, None))
    reading = asyncio.create_task(a.service.read("public/default/x", "latest", 10, False, 10_000))
    await asyncio.sleep(0.05)
    started = time.monotonic()
    await a.service.unload("public/default/x")
    assert await asyncio.wait_for(waiting, 2) == []
    assert (await asyncio.wait_for(reading, 2)).messages == []
    assert time.monotonic() - started < 2


async def test_handover_releases_every_topic_to_the_other_broker(cluster: Cluster) -> None:
    a = await cluster.start_broker(1)
    for i in range(3):
        await _produce(a, f"public/default/t{i}", b"x")
    b = await cluster.start_broker(2)
    await a.ownership.heartbeat()
    await a.service.handover()
    assert a.ownership.owned == frozenset() and a.service._topics == {}
    for i in range(3):
        with pytest.raises(NotOwnerError) as info:
            await _produce(a, f"public/default/t{i}")
        assert info.value.owner_url == b.ownership.me.http_url
        page = await b.service.read(f"public/default/t{i}", "earliest", 10, False, 0)
        assert [m.value for m in page.messages] == [b"x"]


def _options() -> object:
    from topics.api import SubscriptionOptions

    return SubscriptionOptions(initial_position="earliest")


@pytest.mark.parametrize("fast", [True, False], ids=["fast-path", "fastapi"])
async def test_a_request_at_a_non_owner_is_redirected_with_its_path_and_query(
    cluster: Cluster, fast: bool
) -> None:
    import httpx

    from app.main import create_app

    cluster.lease_ms = 60_000  # nothing here is about lapsing: a loaded machine must not make it lapse
    a = await cluster.start_broker(1)
    b = await cluster.start_broker(2)
    owner, _ = await _serve(cluster, "public/default/x", b"1")
    other = b if owner is a else a
    app = create_app(other.service, close_topics=False)
    app.state.fast_path.enabled = fast
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://test") as http:
        produce = await http.post("/v1/topics/public/default/x/messages", json={"messages": [{"value": "v"}]})
        read = await http.get("/v1/topics/public/default/x/messages?start=earliest&max_messages=5")
        stats = await http.get("/admin/v2/persistent/public/default/x/stats")
        lookup = await http.get("/lookup/v2/topic/persistent/public/default/x")
    base = owner.ownership.me.http_url
    assert produce.status_code == 307
    assert produce.headers["location"] == base + "/v1/topics/public/default/x/messages"
    assert produce.headers["content-type"] == "application/problem+json"
    assert read.status_code == 307
    assert (
        read.headers["location"]
        == base + "/v1/topics/public/default/x/messages?start=earliest&max_messages=5"
    )
    assert stats.status_code == 307
    assert stats.headers["location"] == base + "/admin/v2/persistent/public/default/x/stats"
    assert lookup.status_code == 200
    assert lookup.json() == {"brokerUrl": base, "httpUrl": base, "kafkaUrl": None, "nativeUrl": None}
