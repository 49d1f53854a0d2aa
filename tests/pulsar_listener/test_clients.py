"""`pulsar-client` (PyPI 3.13, C++ 4.2 inside) against a real `quire standalone`: produce and
consume, Pulsar and REST reading each other's messages, batches, shared and exclusive
subscriptions, acks that survive a reconnect."""

from __future__ import annotations

import contextlib
import uuid

import httpx
import pulsar
import pytest

from tests.pulsar_listener.support import CLIENT_TIMEOUT_S, Standalone

pytestmark = pytest.mark.timeout(300)
RECEIVE_MS = 10_000


def topic() -> tuple[str, str]:
    """A fresh topic: its Pulsar name and its Quire name."""
    name = f"t-{uuid.uuid4().hex[:10]}"
    return f"persistent://public/default/{name}", f"public/default/{name}"


def rest_read(standalone: Standalone, quire_name: str) -> list[dict[str, object]]:
    r = httpx.get(
        f"{standalone.http}/v1/topics/{quire_name}/messages", params={"start": "earliest"}, timeout=10
    )
    assert r.status_code == 200, r.text
    return list(r.json()["messages"])


def mid(message_id: pulsar.MessageId) -> str:
    """A Pulsar id as Quire writes it (batch index -1, a plain message, is Quire's 0)."""
    return f"{message_id.ledger_id()}:{message_id.entry_id()}:{max(message_id.batch_index(), 0)}"


def test_produce_consume_round_trip_and_rest_reads_the_same(
    client: pulsar.Client, standalone: Standalone
) -> None:
    name, quire_name = topic()
    consumer = client.subscribe(name, "s", initial_position=pulsar.InitialPosition.Earliest)
    producer = client.create_producer(name, producer_name="p1")
    sent = [
        producer.send(
            f"v{i}".encode(), properties={"i": str(i)}, partition_key=f"k{i}", event_timestamp=1000 + i
        )
        for i in range(3)
    ]
    got = [consumer.receive(RECEIVE_MS) for _ in range(3)]
    for m in got:
        consumer.acknowledge(m)
    assert [m.data() for m in got] == [b"v0", b"v1", b"v2"]
    assert [m.message_id() for m in got] == sent  # the consumer's ids are the receipts'
    assert [m.partition_key() for m in got] == ["k0", "k1", "k2"]
    assert [m.properties() for m in got] == [{"i": "0"}, {"i": "1"}, {"i": "2"}]
    assert [m.event_timestamp() for m in got] == [1000, 1001, 1002]
    rest = rest_read(standalone, quire_name)
    assert [r["message_id"] for r in rest] == [mid(s) for s in sent]
    assert [(r["key"], r["value"], r["properties"], r["event_time"]) for r in rest] == [
        (f"k{i}", f"v{i}", {"i": str(i)}, 1000 + i) for i in range(3)
    ]
    assert [r["publish_time"] for r in rest] == [m.publish_timestamp() for m in got]
    assert {r["producer_name"] for r in rest} == {"p1"}


def test_rest_produced_batch_reads_over_pulsar_with_its_batch_indexes(
    client: pulsar.Client, standalone: Standalone
) -> None:
    name, quire_name = topic()
    consumer = client.subscribe(name, "s", initial_position=pulsar.InitialPosition.Earliest)
    body = {"messages": [{"key": f"k{i}", "value": f"r{i}", "properties": {"n": str(i)}} for i in range(3)]}
    r = httpx.post(f"{standalone.http}/v1/topics/{quire_name}/messages", json=body, timeout=10)
    assert r.status_code == 200, r.text
    ids = [x["message_id"] for x in r.json()["results"]]
    got = [consumer.receive(RECEIVE_MS) for _ in range(3)]
    assert [mid(m.message_id()) for m in got] == ids
    assert [(m.partition_key(), m.data(), m.properties()) for m in got] == [
        (f"k{i}", f"r{i}".encode(), {"n": str(i)}) for i in range(3)
    ]
    for m in got:
        consumer.acknowledge(m)


def test_pulsar_batch_is_one_entry_keeping_batch_indexes(
    client: pulsar.Client, standalone: Standalone
) -> None:
    name, quire_name = topic()
    producer = client.create_producer(
        name, batching_enabled=True, batching_max_messages=5, batching_max_publish_delay_ms=1000
    )
    receipts: list[pulsar.MessageId] = []
    for i in range(5):
        producer.send_async(
            f"b{i}".encode(), lambda result, msg_id: receipts.append(msg_id), partition_key=f"k{i}"
        )
    producer.flush()
    rest = rest_read(standalone, quire_name)
    assert len(rest) == 5
    assert len({r["message_id"].rsplit(":", 1)[0] for r in rest}) == 1  # one entry
    assert [r["message_id"].rsplit(":", 1)[1] for r in rest] == ["0", "1", "2", "3", "4"]
    assert sorted(mid(m) for m in receipts) == [r["message_id"] for r in rest]
    consumer = client.subscribe(name, "s", initial_position=pulsar.InitialPosition.Earliest)
    got = [consumer.receive(RECEIVE_MS) for _ in range(5)]
    assert [m.data() for m in got] == [f"b{i}".encode() for i in range(5)]
    assert [mid(m.message_id()) for m in got] == [r["message_id"] for r in rest]


def test_shared_subscription_splits_and_exclusive_refuses_a_second(client: pulsar.Client) -> None:
    name, _ = topic()
    shared = pulsar.ConsumerType.Shared
    first = client.subscribe(name, "work", consumer_type=shared, receiver_queue_size=1)
    second = client.subscribe(name, "work", consumer_type=shared, receiver_queue_size=1)
    producer = client.create_producer(name)
    for i in range(10):
        producer.send(f"m{i}".encode())
    seen: list[bytes] = []
    for consumer in (first, second) * 10:
        try:
            m = consumer.receive(500)
        except pulsar.Timeout:
            continue
        seen.append(m.data())
        consumer.acknowledge(m)
        if len(seen) == 10:
            break
    assert sorted(seen) == sorted(f"m{i}".encode() for i in range(10))
    client.subscribe(name, "solo", consumer_type=pulsar.ConsumerType.Exclusive)
    with pytest.raises(pulsar.ConsumerBusy):
        client.subscribe(name, "solo", consumer_type=pulsar.ConsumerType.Exclusive)
    with pytest.raises(pulsar.ConsumerBusy):
        client.subscribe(name, "work", consumer_type=pulsar.ConsumerType.Exclusive)


def test_acks_survive_a_reconnect(standalone: Standalone) -> None:
    name, _ = topic()
    first = pulsar.Client(standalone.service_url, operation_timeout_seconds=CLIENT_TIMEOUT_S)
    try:
        consumer = first.subscribe(name, "keep", initial_position=pulsar.InitialPosition.Earliest)
        producer = first.create_producer(name)
        for i in range(4):
            producer.send(f"a{i}".encode())
        for _ in range(2):
            consumer.acknowledge(consumer.receive(RECEIVE_MS))
        consumer.receive(RECEIVE_MS)  # the third, not acked
        consumer.close()  # sends its pending acks first
    finally:
        first.close()
    second = pulsar.Client(standalone.service_url, operation_timeout_seconds=CLIENT_TIMEOUT_S)
    try:
        consumer = second.subscribe(name, "keep")
        got = [consumer.receive(RECEIVE_MS).data() for _ in range(2)]
        assert got == [b"a2", b"a3"]
        with pytest.raises(pulsar.Timeout):
            consumer.receive(1000)
    finally:
        second.close()


@pytest.mark.parametrize(
    "codec",
    [
        pulsar.CompressionType.LZ4,
        pulsar.CompressionType.ZLib,
        pulsar.CompressionType.ZSTD,
        pulsar.CompressionType.SNAPPY,
    ],
    ids=lambda c: str(c.name),
)
@pytest.mark.parametrize("batching", [True, False], ids=["batch", "single"])
def test_compressed_messages_are_stored_and_read_as_sent(
    client: pulsar.Client, standalone: Standalone, codec: pulsar.CompressionType, batching: bool
) -> None:
    """Each codec, batched and not: the listener decompresses into Quire's messages (REST reads
    the values), and a Pulsar consumer reads them back."""
    name, quire_name = topic()
    producer = client.create_producer(
        name,
        compression_type=codec,
        batching_enabled=batching,
        batching_max_messages=5,
        batching_max_publish_delay_ms=1000,
    )
    values = [(f"value-{i}-" * 40).encode() for i in range(5)]  # compressible
    for i, value in enumerate(values):
        producer.send_async(value, lambda result, msg_id: None, partition_key=f"k{i}")
    producer.flush()
    rest = rest_read(standalone, quire_name)
    assert [(r["key"], r["value"]) for r in rest] == [(f"k{i}", v.decode()) for i, v in enumerate(values)]
    entries = {r["message_id"].rsplit(":", 1)[0] for r in rest}
    assert len(entries) == (1 if batching else 5)
    consumer = client.subscribe(name, "s", initial_position=pulsar.InitialPosition.Earliest)
    assert [consumer.receive(RECEIVE_MS).data() for _ in values] == values


def test_topic_stats_show_each_pulsar_producer_and_consumer_connection(
    client: pulsar.Client, standalone: Standalone
) -> None:
    name, quire_name = topic()
    consumer = client.subscribe(
        name, "s", consumer_type=pulsar.ConsumerType.Shared, initial_position=pulsar.InitialPosition.Earliest
    )
    client.create_producer(name, producer_name="idle")
    busy = client.create_producer(name, producer_name="busy")
    busy.send(b"x")
    consumer.acknowledge(consumer.receive(RECEIVE_MS))
    r = httpx.get(f"{standalone.http}/admin/v2/persistent/{quire_name}/stats", timeout=10)
    assert r.status_code == 200, r.text
    stats = r.json()
    publishers = {p["producerName"]: p for p in stats["publishers"]}
    assert set(publishers) == {"idle", "busy"}
    assert (publishers["busy"]["msgCounter"], publishers["idle"]["msgCounter"]) == (1, 0)
    (consumer_stats,) = stats["subscriptions"]["s"]["consumers"]
    for entry in [*publishers.values(), consumer_stats]:
        assert entry["address"].startswith("127.0.0.1:"), entry
        assert entry["clientVersion"].startswith("Pulsar"), entry


def test_batches_larger_than_the_consumers_permits_all_arrive(client: pulsar.Client) -> None:
    """A consumer's queue (its permits) smaller than a batch: the listener sends each batch
    whole, as Pulsar's dispatcher does. Cut into two MESSAGEs of one entry, the client acked the
    first part as the whole entry and the broker took the second part as acked too: 2,000 of
    5,000 never reached the application, and the subscription's backlog said 0."""
    name, _ = topic()
    producer = client.create_producer(
        name,
        batching_enabled=True,
        batching_max_messages=500,
        batching_max_publish_delay_ms=50,
        block_if_queue_full=True,
    )
    failed: list[pulsar.Result] = []
    for i in range(5_000):
        producer.send_async(f"m{i}".encode(), lambda r, _: r == pulsar.Result.Ok or failed.append(r))
    producer.flush()
    assert failed == []
    consumer = client.subscribe(
        name,
        "small-queue",
        consumer_type=pulsar.ConsumerType.Shared,
        initial_position=pulsar.InitialPosition.Earliest,
        receiver_queue_size=300,
    )
    seen: set[bytes] = set()
    with contextlib.suppress(pulsar.Timeout):
        while len(seen) < 5_000:
            m = consumer.receive(5_000)
            seen.add(m.data())
            consumer.acknowledge(m)
    assert len(seen) == 5_000
