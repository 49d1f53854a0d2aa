"""Pulsar's subscription types through the listener, with `pulsar-client`: exclusive (one
consumer; the next takes over what was not acked), failover (one active consumer, first by
name; when it closes the standby gets the rest, in order) and key_shared (each key sticks to one
consumer, in order)."""

from __future__ import annotations

import time
from collections import defaultdict

import pulsar
import pytest

from tests.pulsar_listener.test_clients import topic

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
