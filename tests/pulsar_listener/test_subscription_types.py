"""Pulsar's subscription types through the listener, with `pulsar-client`: exclusive (one
consumer; the next takes over what was not acked), failover (one active consumer, first by
name; when it closes the standby gets the rest, in order) and key_shared (each key sticks to one
consumer, in order)."""

from __future__ import annotations

import time
from collections import defaultdict
from datetime import timedelta

import mmh3
import pulsar
import pytest

from tests.pulsar_listener.support import Standalone
from tests.pulsar_listener.test_clients import rest_read, topic

pytestmark = pytest.mark.timeout(300)
RECEIVE_MS = 10_000
EARLIEST = pulsar.InitialPosition.Earliest


def send(client: pulsar.Client, name: str, values: list[tuple[str, str]]) -> None:
    producer = client.create_producer(name, batching_enabled=False)
    try:
        for key, value in values:
            producer.send(value.encode(), partition_key=key)
    finally:
        producer.close()


def idle(consumer: pulsar.Consumer, ms: int = 1500) -> bool:
    try:
        consumer.receive(ms)
    except pulsar.Timeout:
        return True
    return False


def test_exclusive_hands_what_was_not_acked_to_the_next_consumer(client: pulsar.Client) -> None:
    name, _ = topic()
    first = client.subscribe(
        name, "ex", consumer_type=pulsar.ConsumerType.Exclusive, initial_position=EARLIEST
    )
    send(client, name, [("", f"m{i}") for i in range(4)])
    for _ in range(2):
        first.acknowledge(first.receive(RECEIVE_MS))
    with pytest.raises(pulsar.ConsumerBusy):
        client.subscribe(name, "ex", consumer_type=pulsar.ConsumerType.Exclusive)
    first.close()
    second = client.subscribe(name, "ex", consumer_type=pulsar.ConsumerType.Exclusive)
    assert [second.receive(RECEIVE_MS).data() for _ in range(2)] == [b"m2", b"m3"]


def test_failover_serves_the_first_by_name_then_the_standby(client: pulsar.Client) -> None:
    name, _ = topic()
    failover = pulsar.ConsumerType.Failover
    standby = client.subscribe(
        name, "fo", consumer_type=failover, consumer_name="b", initial_position=EARLIEST
    )
    active = client.subscribe(
        name, "fo", consumer_type=failover, consumer_name="a", initial_position=EARLIEST
    )
    send(client, name, [("", f"m{i}") for i in range(6)])
    got = [active.receive(RECEIVE_MS) for _ in range(3)]
    assert [m.data() for m in got] == [b"m0", b"m1", b"m2"]
    for m in got:
        active.acknowledge(m)
    assert idle(standby)  # a standby gets nothing while the active consumer is there
    active.close()
    started = time.monotonic()
    assert [standby.receive(RECEIVE_MS).data() for _ in range(3)] == [b"m3", b"m4", b"m5"]
    assert time.monotonic() - started < 9  # at once, not after the consumer idle time (60 s)


def test_key_shared_keeps_each_key_on_one_consumer_in_order(client: pulsar.Client) -> None:
    name, _ = topic()
    key_shared = pulsar.ConsumerType.KeyShared
    consumers = [
        client.subscribe(
            name, "ks", consumer_type=key_shared, consumer_name=f"c{i}", initial_position=EARLIEST
        )
        for i in range(2)
    ]
    values = [(f"k{i % 6}", f"v{i}") for i in range(60)]
    send(client, name, values)
    where: dict[str, set[int]] = defaultdict(set)
    order: dict[str, list[str]] = defaultdict(list)
    deadline = time.monotonic() + 60
    received = 0
    while received < len(values) and time.monotonic() < deadline:
        for index, consumer in enumerate(consumers):
            try:
                m = consumer.receive(200)
            except pulsar.Timeout:
                continue
            consumer.acknowledge(m)
            where[m.partition_key()].add(index)
            order[m.partition_key()].append(m.data().decode())
            received += 1
    assert received == len(values)
    assert all(len(indexes) == 1 for indexes in where.values()), dict(where)
    for key, got in order.items():
        assert got == [v for k, v in values if k == key]


def _drain(consumers: list[pulsar.Consumer], expected: int) -> list[tuple[int, pulsar.Message]]:
    """(consumer index, message) of everything received and acked, until `expected` arrived
    and then nothing more for a while (so a duplicate would be seen)."""
    got: list[tuple[int, pulsar.Message]] = []
    deadline = time.monotonic() + 90
    quiet_since: float | None = None
    while time.monotonic() < deadline:
        progressed = False
        for index, consumer in enumerate(consumers):
            try:
                m = consumer.receive(200)
            except pulsar.Timeout:
                continue
            consumer.acknowledge(m)
            got.append((index, m))
            progressed = True
        if len(got) >= expected and not progressed:
            quiet_since = quiet_since or time.monotonic()
            if time.monotonic() - quiet_since > 2:
                break
        elif progressed:
            quiet_since = None
    return got


def _send_batched(
    client: pulsar.Client, name: str, values: list[tuple[str, str]], batching_type: pulsar.BatchingType
) -> None:
    producer = client.create_producer(
        name,
        batching_enabled=True,
        batching_type=batching_type,
        batching_max_messages=20,
        batching_max_publish_delay_ms=200,
    )
    try:
        for key, value in values:
            producer.send_async(value.encode(), lambda result, message_id: None, partition_key=key)
        producer.flush()
    finally:
        producer.close()


def _key_shared(
    client: pulsar.Client, name: str, sub: str, n: int, **kwargs: object
) -> list[pulsar.Consumer]:
    return [
        client.subscribe(
            name,
            sub,
            consumer_type=pulsar.ConsumerType.KeyShared,
            consumer_name=f"c{i}",
            initial_position=EARLIEST,
            receiver_queue_size=7,  # fewer permits than a batch has messages
            **kwargs,  # type: ignore[arg-type]
        )
        for i in range(n)
    ]


def test_key_shared_sends_a_batch_of_several_keys_whole_to_one_consumer(client: pulsar.Client) -> None:
    """Default batching puts several keys in a batch: the batch (one entry) goes whole to the
    consumer of its first key, as Pulsar's dispatcher routes a batch by its metadata's key, and
    is never cut at the consumer's permits; every message arrives exactly once."""
    name, _ = topic()
    consumers = _key_shared(client, name, "ks-batch", 2)
    values = [(f"k{i % 9}", f"v{i}") for i in range(200)]
    _send_batched(client, name, values, pulsar.BatchingType.Default)
    got = _drain(consumers, len(values))
    assert sorted(m.data().decode() for _, m in got) == sorted(v for _, v in values)  # once each
    where: dict[tuple[int, int], set[int]] = defaultdict(set)
    first_key: dict[tuple[int, int], str] = {}
    for index, m in got:
        entry = (m.message_id().ledger_id(), m.message_id().entry_id())
        where[entry].add(index)
        if m.message_id().batch_index() <= 0:
            first_key[entry] = m.partition_key()
    keys_of: dict[tuple[int, int], set[str]] = defaultdict(set)
    for _, m in got:
        keys_of[(m.message_id().ledger_id(), m.message_id().entry_id())].add(m.partition_key())
    assert any(len(keys) > 1 for keys in keys_of.values())  # batches of several keys were sent
    assert all(len(indexes) == 1 for indexes in where.values()), dict(where)
    by_first_key: dict[str, set[int]] = defaultdict(set)
    for entry, key in first_key.items():
        by_first_key[key] |= where[entry]
    assert all(len(indexes) == 1 for indexes in by_first_key.values()), dict(by_first_key)


def test_key_shared_with_key_based_batching_keeps_each_key_on_one_consumer(client: pulsar.Client) -> None:
    name, _ = topic()
    consumers = _key_shared(client, name, "ks-keyed", 2)
    values = [(f"k{i % 9}", f"v{i}") for i in range(200)]
    _send_batched(client, name, values, pulsar.BatchingType.KeyBased)
    got = _drain(consumers, len(values))
    assert sorted(m.data().decode() for _, m in got) == sorted(v for _, v in values)
    where: dict[str, set[int]] = defaultdict(set)
    order: dict[str, list[str]] = defaultdict(list)
    for index, m in got:
        where[m.partition_key()].add(index)
        order[m.partition_key()].append(m.data().decode())
    assert all(len(indexes) == 1 for indexes in where.values()), dict(where)
    assert {i for indexes in where.values() for i in indexes} == {0, 1}  # both consumers had keys
    for key, seen in order.items():
        assert seen == [v for k, v in values if k == key]


def _slot(key: str) -> int:
    return (mmh3.hash(key.encode(), 0, signed=False) & 0x7FFFFFFF) % 65536


def test_key_shared_sticky_ranges_take_the_keys_of_their_murmur3_slots(client: pulsar.Client) -> None:
    name, _ = topic()
    sticky = pulsar.KeySharedMode.Sticky
    ranges = [[(0, 32767)], [(32768, 65535)]]
    consumers = [
        client.subscribe(
            name,
            "ks-sticky",
            consumer_type=pulsar.ConsumerType.KeyShared,
            consumer_name=f"c{i}",
            initial_position=EARLIEST,
            key_shared_policy=pulsar.ConsumerKeySharedPolicy(key_shared_mode=sticky, sticky_ranges=r),
        )
        for i, r in enumerate(ranges)
    ]
    with pytest.raises(pulsar.ConsumerAssignError):
        client.subscribe(
            name,
            "ks-sticky",
            consumer_type=pulsar.ConsumerType.KeyShared,
            key_shared_policy=pulsar.ConsumerKeySharedPolicy(
                key_shared_mode=sticky, sticky_ranges=[(100, 200)]
            ),
        )
    values = [(f"key-{i % 40}", f"v{i}") for i in range(120)]
    send(client, name, values)
    got = _drain(consumers, len(values))
    assert sorted(m.data().decode() for _, m in got) == sorted(v for _, v in values)
    for index, m in got:
        start, end = ranges[index][0]
        assert start <= _slot(m.partition_key()) <= end, (index, m.partition_key())


@pytest.mark.parametrize("kind", ["Shared", "KeyShared", "Exclusive"])
def test_delayed_delivery_holds_a_message_until_its_time_on_shared_and_key_shared(
    client: pulsar.Client, standalone: Standalone, kind: str
) -> None:
    """`deliver_after`: not dispatched before the time on Shared and Key_Shared (the message sent
    after it comes first), at once on Exclusive (Pulsar ignores it there); REST reads it as any
    other. No duration is asserted, only an order and a lower bound: the time the client set is
    at least `sent_ms` + 2 s, and a message cannot arrive before the broker lets it go."""
    name, quire_name = topic()
    consumer = client.subscribe(
        name, "delayed", consumer_type=getattr(pulsar.ConsumerType, kind), initial_position=EARLIEST
    )
    producer = client.create_producer(name, batching_enabled=False)
    sent_ms = int(time.time() * 1000)
    producer.send(b"later", partition_key="k", deliver_after=timedelta(seconds=2))
    producer.send(b"now", partition_key="k")
    producer.close()
    got: list[tuple[bytes, int]] = []
    for _ in range(2):
        m = consumer.receive(60_000)
        got.append((m.data(), int(time.time() * 1000)))
        consumer.acknowledge(m)
    if kind == "Exclusive":
        assert [data for data, _ in got] == [b"later", b"now"]
    else:
        assert [data for data, _ in got] == [b"now", b"later"]
        assert got[1][1] >= sent_ms + 2_000
    assert [r["value"] for r in rest_read(standalone, quire_name)] == ["later", "now"]
