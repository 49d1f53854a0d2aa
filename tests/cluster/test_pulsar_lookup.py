"""Several brokers (real processes, PostgreSQL): a Pulsar client that reaches a broker which does
not own its topic is sent by LOOKUP to the owner (Redirect, authoritative, the owner's Pulsar
address from the broker registry), and produces and consumes there. A consumer whose broker
lost the topic while it stayed connected (the broker was paused past its lease, and another
took the topic over) is closed by the broker and follows the topic to its new owner; a client
whose broker is killed looks the topic up again and loses nothing acknowledged."""

from __future__ import annotations

import time

import pulsar
import pytest

from tests.cluster.conftest import StartCluster
from tests.cluster.harness import (
    KEEP_ALL,
    Broker,
    CarefulClient,
    Cluster,
    admin,
    brokers_listed,
    lookup_path,
    owner_url,
    produce,
    read_all,
)
from tests.support import wait_until

pytestmark = pytest.mark.timeout(300)
TOPIC = "pulsar-owned"


def test_lookup_redirects_to_the_owner(start_cluster: StartCluster) -> None:
    cluster = start_cluster(2, QUIRE_PULSAR_PORT="auto")
    with cluster.client() as http:
        assert http.put(admin(TOPIC)).status_code in (200, 204)
        owner = owner_url(http, TOPIC)
        native = http.get(lookup_path(TOPIC)).json()["nativeUrl"]
    other = next(b for b in cluster.brokers if b.url != owner)
    assert native == next(b for b in cluster.brokers if b.url == owner).pulsar  # REST lookup too
    # Asked at the broker that does not own the topic; without the redirect that broker
    # refuses (ServiceNotReady) and the client gives up after its operation timeout.
    client = pulsar.Client(other.pulsar, operation_timeout_seconds=20)
    try:
        name = f"persistent://public/default/{TOPIC}"
        consumer = client.subscribe(name, "s", initial_position=pulsar.InitialPosition.Earliest)
        producer = client.create_producer(name)
        sent = producer.send(b"to the owner")
        got = consumer.receive(10_000)
        assert (got.data(), got.message_id()) == (b"to the owner", sent)
    finally:
        client.close()
    with cluster.client() as http:
        r = http.get(f"/v1/topics/public/default/{TOPIC}/messages", params={"start": "earliest"})
        assert [m["value"] for m in r.json()["messages"]] == ["to the owner"]


def _received_all(consumer: pulsar.Consumer, wanted: set[bytes], timeout_s: float = 60) -> list[bytes]:
    """Messages received (and acked) until every one of `wanted` came; acks are sent in the
    background and a broker lost before storing one delivers its message again (at least once),
    so what came before may come again."""
    got: list[bytes] = []
    deadline = time.monotonic() + timeout_s
    while not wanted <= set(got):
        left_ms = int((deadline - time.monotonic()) * 1000)
        assert left_ms > 0, f"received {got}, still missing {sorted(wanted - set(got))}"
        try:
            message = consumer.receive(min(left_ms, 5_000))
        except pulsar.Timeout:
            continue
        consumer.acknowledge(message)
        got.append(message.data())
    return got


def _owned_by_one_of_two(start_cluster: StartCluster, topic: str) -> tuple[Cluster, Broker, Broker]:
    """A cluster of two brokers with Pulsar listeners, `topic` created; its owner and the other."""
    cluster = start_cluster(2, QUIRE_PULSAR_PORT="auto", **KEEP_ALL)
    with cluster.client() as http:
        assert http.put(admin(topic)).status_code in (200, 204)
        owner = owner_url(http, topic)
    owning = next(b for b in cluster.brokers if b.url == owner)
    return cluster, owning, next(b for b in cluster.brokers if b is not owning)


def test_a_consumer_follows_its_topic_when_its_paused_broker_lost_it(start_cluster: StartCluster) -> None:
    topic = "pulsar-moved"
    cluster, paused, other = _owned_by_one_of_two(start_cluster, topic)
    # The consumer's client alone on its connection: a producer's SEND_ERROR on a shared one
    # would close it, and the consumer would move with it.
    client = pulsar.Client(paused.pulsar, operation_timeout_seconds=20)
    try:
        name = f"persistent://public/default/{topic}"
        consumer = client.subscribe(name, "s", initial_position=pulsar.InitialPosition.Earliest)
        with CarefulClient([paused.url]) as http:
            produce(http, topic, "p", [0])
        assert _received_all(consumer, {b"p:0"}) == [b"p:0"]

        cluster.pause(paused)
        try:
            wait_until(lambda: paused.broker_id not in brokers_listed(other.url), 60, "the lease ending")
            with CarefulClient([other.url]) as http:
                produce(http, topic, "p", [1])  # the other broker takes the topic over
                assert owner_url(http, topic) == other.url
        finally:
            cluster.resume(paused)
        with CarefulClient([other.url]) as http:
            produce(http, topic, "p", [2])
        # Without the broker closing it, the consumer stayed on the stale broker, which answered
        # each of its receives "not the owner", for ever.
        got = _received_all(consumer, {b"p:1", b"p:2"})
        assert set(got) <= {b"p:0", b"p:1", b"p:2"}
    finally:
        client.close()


def test_a_killed_owner_loses_no_acknowledged_pulsar_message(start_cluster: StartCluster) -> None:
    topic = "pulsar-killed"
    cluster, killed, other = _owned_by_one_of_two(start_cluster, topic)
    # Both clients know only the surviving broker: they are sent to the owner, and back.
    client = pulsar.Client(other.pulsar, operation_timeout_seconds=30)
    try:
        name = f"persistent://public/default/{topic}"
        consumer = client.subscribe(name, "s", initial_position=pulsar.InitialPosition.Earliest)
        producer = client.create_producer(name, send_timeout_millis=60_000)
        acknowledged = [producer.send(b"before-%d" % i) for i in range(20)]
        assert len(acknowledged) == 20
        cluster.kill9(killed)
        acknowledged += [producer.send(b"after-%d" % i) for i in range(20)]
        expected = [b"before-%d" % i for i in range(20)] + [b"after-%d" % i for i in range(20)]
        got = _received_all(consumer, set(expected))
        assert set(got) == set(expected)
    finally:
        client.close()
    with cluster.client() as http:
        stored = [m["value"] for m in read_all(http, topic)]
    assert sorted(stored) == sorted(v.decode() for v in expected)  # each once
