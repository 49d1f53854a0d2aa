"""Partitioned topics over `pulsar-client`: PARTITIONED_METADATA answers the partitions, the
client routes by key and produces to and consumes from each `<topic>-partition-<n>`, and REST
reads of the partitioned topic see what it stored."""

from __future__ import annotations

import uuid
from collections import defaultdict
from collections.abc import Iterator
from pathlib import Path

import httpx
import pulsar
import pytest

from tests.pulsar_listener.support import CLIENT_TIMEOUT_S, Standalone, serving

pytestmark = pytest.mark.timeout(300)
RECEIVE_MS = 10_000


def partitioned(standalone: Standalone, partitions: int) -> tuple[str, str]:
    """A fresh partitioned topic: its Pulsar name and its Quire name."""
    name = f"pt-{uuid.uuid4().hex[:10]}"
    quire_name = f"public/default/{name}"
    r = httpx.put(
        f"{standalone.http}/admin/v2/persistent/{quire_name}/partitions", json=partitions, timeout=10
    )
    assert r.status_code == 204, r.text
    return f"persistent://public/default/{name}", quire_name


def rest_read(standalone: Standalone, quire_name: str) -> list[dict[str, object]]:
    r = httpx.get(
        f"{standalone.http}/v1/topics/{quire_name}/messages",
        params={"start": "earliest", "max_messages": 1000},
        timeout=10,
    )
    assert r.status_code == 200, r.text
    return list(r.json()["messages"])


def mid(message_id: pulsar.MessageId) -> str:
    return f"{message_id.ledger_id()}:{message_id.entry_id()}:{max(message_id.batch_index(), 0)}"


def test_partitioned_metadata_answers_the_partitions(client: pulsar.Client, standalone: Standalone) -> None:
    name, _ = partitioned(standalone, 3)
    assert client.get_topic_partitions(name) == [f"{name}-partition-{i}" for i in range(3)]
    plain = f"persistent://public/default/plain-{uuid.uuid4().hex[:10]}"
    assert client.get_topic_partitions(plain) == [plain]  # not created yet: not partitioned


def test_a_keyed_producer_routes_each_key_to_one_partition_and_rest_reads_them_all(
    client: pulsar.Client, standalone: Standalone
) -> None:
    name, quire_name = partitioned(standalone, 4)
    producer = client.create_producer(name, producer_name="router", batching_enabled=False)
    sent: dict[str, tuple[str, str]] = {}  # value -> (key, id)
    partitions_of_key: dict[str, set[int]] = defaultdict(set)
    for i in range(40):
        key = f"key-{i % 8}"
        receipt = producer.send(f"v{i}".encode(), partition_key=key)
        partitions_of_key[key].add(receipt.partition())
        sent[f"v{i}"] = (key, mid(receipt))
    assert all(len(p) == 1 for p in partitions_of_key.values()), dict(partitions_of_key)
    used = set().union(*partitions_of_key.values())
    assert used <= {0, 1, 2, 3}
    assert len(used) > 1  # eight keys over four partitions: not all on one (the client's hash)
    rest = rest_read(standalone, quire_name)
    got = {str(r["value"]): (str(r["key"]), str(r["message_id"])) for r in rest}
    assert got == sent  # every message, with the receipt's id and the key


def test_a_consumer_of_the_partitioned_topic_gets_every_partition_with_its_index(
    client: pulsar.Client, standalone: Standalone
) -> None:
    name, _ = partitioned(standalone, 3)
    consumer = client.subscribe(name, "s", initial_position=pulsar.InitialPosition.Earliest)
    producer = client.create_producer(name, batching_enabled=False)
    receipts = {f"p{i}": producer.send(f"p{i}".encode(), partition_key=f"key{i}") for i in range(12)}
    got = [consumer.receive(RECEIVE_MS) for _ in range(12)]
    for m in got:
        consumer.acknowledge(m)
    by_value = {m.data().decode(): m for m in got}
    assert sorted(by_value) == sorted(receipts)
    for value, m in by_value.items():
        assert m.message_id().partition() == receipts[value].partition()
        assert m.topic_name() == f"{name}-partition-{receipts[value].partition()}"
        assert mid(m.message_id()) == mid(receipts[value])
    consumer.close()
    again = client.subscribe(name, "s")
    with pytest.raises(pulsar.Timeout):  # all acked: nothing comes again
        again.receive(1000)


def test_redeliver_unacknowledged_on_a_partitioned_topic(
    client: pulsar.Client, standalone: Standalone
) -> None:
    name, _ = partitioned(standalone, 3)
    consumer = client.subscribe(name, "s", initial_position=pulsar.InitialPosition.Earliest)
    producer = client.create_producer(name)
    for i in range(6):
        producer.send(f"p{i}".encode(), partition_key=f"key{i}")
    got = sorted(consumer.receive(RECEIVE_MS).data() for _ in range(6))
    assert got == sorted(f"p{i}".encode() for i in range(6))
    consumer.redeliver_unacknowledged_messages()
    again = [consumer.receive(RECEIVE_MS) for _ in range(6)]
    assert sorted(m.data() for m in again) == got
    assert all(m.redelivery_count() >= 1 for m in again)


def test_one_partition_by_its_name(client: pulsar.Client, standalone: Standalone) -> None:
    """A producer and a consumer of `<topic>-partition-1` alone: only that partition's messages."""
    name, quire_name = partitioned(standalone, 2)
    whole = client.create_producer(name, batching_enabled=False)
    routed = [whole.send(f"w{i}".encode(), partition_key=f"k{i}") for i in range(6)]
    one = client.create_producer(f"{name}-partition-1", batching_enabled=False)
    direct = one.send(b"direct")
    assert direct.partition() == -1  # the client set the partition, not knowing it is one
    consumer = client.subscribe(
        f"{name}-partition-1", "only-one", initial_position=pulsar.InitialPosition.Earliest
    )
    expected = sorted([b"direct"] + [f"w{i}".encode() for i, r in enumerate(routed) if r.partition() == 1])
    got = [consumer.receive(RECEIVE_MS) for _ in expected]
    assert sorted(m.data() for m in got) == expected
    with pytest.raises(pulsar.Timeout):
        consumer.receive(1000)
    assert len(rest_read(standalone, quire_name)) == 7


def test_failover_consumers_share_the_partitions(client: pulsar.Client, standalone: Standalone) -> None:
    """Failover on a partitioned topic: each partition has one active consumer (Pulsar's i mod n),
    so two consumers split the partitions and together get everything."""
    name, _ = partitioned(standalone, 4)
    options = {
        "consumer_type": pulsar.ConsumerType.Failover,
        "initial_position": pulsar.InitialPosition.Earliest,
    }
    first = client.subscribe(name, "fo", consumer_name="a", **options)  # type: ignore[arg-type]
    second = client.subscribe(name, "fo", consumer_name="b", **options)  # type: ignore[arg-type]
    producer = client.create_producer(name, batching_enabled=False)
    for i in range(40):
        producer.send(f"f{i}".encode(), partition_key=f"key{i}")
    partitions: dict[str, set[int]] = {"a": set(), "b": set()}
    values: list[bytes] = []
    for label, consumer in (("a", first), ("b", second)):
        while True:
            try:
                m = consumer.receive(2000)
            except pulsar.Timeout:
                break
            consumer.acknowledge(m)
            partitions[label].add(m.message_id().partition())
            values.append(m.data())
    assert sorted(values) == sorted(f"f{i}".encode() for i in range(40))
    assert partitions["a"] and partitions["b"]
    assert not partitions["a"] & partitions["b"]


def test_a_reader_of_a_partitioned_topic_reads_every_partition(
    client: pulsar.Client, standalone: Standalone
) -> None:
    """The client opens one reader per partition; each reads only its partition."""
    name, _ = partitioned(standalone, 3)
    producer = client.create_producer(name, batching_enabled=False)
    receipts = {f"r{i}": producer.send(f"r{i}".encode(), partition_key=f"key{i}") for i in range(9)}
    reader = client.create_reader(name, pulsar.MessageId.earliest)
    got = [reader.read_next(RECEIVE_MS) for _ in range(9)]
    assert sorted(m.data().decode() for m in got) == sorted(receipts)
    for m in got:
        assert m.message_id().partition() == receipts[m.data().decode()].partition()
    with pytest.raises(pulsar.Timeout):
        reader.read_next(1000)
    one = client.create_reader(f"{name}-partition-0", pulsar.MessageId.earliest)
    mine = sorted(v for v, r in receipts.items() if r.partition() == 0)
    assert sorted(one.read_next(RECEIVE_MS).data().decode() for _ in mine) == mine


@pytest.fixture(scope="module")
def partitioned_by_default(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Standalone]:
    env = {"QUIRE_ALLOW_AUTO_TOPIC_CREATION_TYPE": "partitioned", "QUIRE_DEFAULT_NUM_PARTITIONS": "3"}
    yield from serving(Path(tmp_path_factory.mktemp("pulsar-auto-partitioned")), env)


def test_auto_creation_partitioned_when_the_broker_says_so(partitioned_by_default: Standalone) -> None:
    name = f"auto-{uuid.uuid4().hex[:10]}"
    c = pulsar.Client(partitioned_by_default.service_url, operation_timeout_seconds=CLIENT_TIMEOUT_S)
    try:
        producer = c.create_producer(f"persistent://public/default/{name}", batching_enabled=False)
        receipts = [producer.send(f"a{i}".encode(), partition_key=f"k{i}") for i in range(6)]
        assert {r.partition() for r in receipts} <= {0, 1, 2}
    finally:
        c.close()
    r = httpx.get(
        f"{partitioned_by_default.http}/admin/v2/persistent/public/default/{name}/partitions", timeout=10
    )
    assert r.status_code == 200 and r.json() == {"partitions": 3}
    assert len(rest_read(partitioned_by_default, f"public/default/{name}")) == 6
