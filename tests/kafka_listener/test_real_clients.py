"""Real Kafka clients (aiokafka 0.14, kafka-python 3, confluent-kafka/librdkafka) form consumer
groups through the group handlers, over a stand-in server (stand_in.py): two consumers split a
topic's two partitions and the one left takes both when the other leaves; commits are stored,
and a consumer of a new coordinator over the same store resumes from them."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass
from typing import Any

import pytest

from app.kafka_listener import group_handlers as gh
from app.kafka_listener.cluster import KafkaNode
from app.kafka_listener.group_offsets import GroupCoordinator
from app.kafka_listener.groups import GroupConfig
from managed_ledger.metadata.memory import InMemoryMetadataStore
from tests.kafka_listener.stand_in import StandIn
from tests.topics.conftest import Env, make_env

TOPIC = "orders"
WAIT_S = 30.0
CONFIG = GroupConfig(initial_rebalance_delay_ms=300, min_session_timeout_ms=100)
# Sessions long enough that a loaded test machine does not expire a member by accident.
CLIENT = {"session_timeout_ms": 10_000, "heartbeat_interval_ms": 300, "enable_auto_commit": False}


class StandInView:
    def __init__(self, stand_in: StandIn) -> None:
        self._stand_in = stand_in

    @property
    def me(self) -> KafkaNode:
        return self._stand_in.node

    async def nodes(self) -> Sequence[KafkaNode]:
        return (self._stand_in.node,)


@dataclass
class Broker:
    env: Env
    stand_in: StandIn
    coordinator: GroupCoordinator

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.stand_in.node.port}"


async def _broker(env: Env) -> AsyncIterator[Broker]:
    stand_in = StandIn(TOPIC, 2)
    coordinator = GroupCoordinator(env.service, StandInView(stand_in), CONFIG)
    stand_in.handlers.update(gh.handlers(coordinator))
    async with stand_in.serving():
        try:
            yield Broker(env, stand_in, coordinator)
        finally:
            await coordinator.close()


@pytest.fixture
async def env() -> AsyncIterator[Env]:
    e = await make_env(InMemoryMetadataStore())
    await e.service.create_topic(f"public/default/{TOPIC}", partitions=2)
    yield e
    await e.service.close()
    await e.factory.close()


@pytest.fixture
async def broker(env: Env) -> AsyncIterator[Broker]:
    async for b in _broker(env):
        yield b


async def until(predicate: Callable[[], bool], what: str) -> None:
    deadline = time.monotonic() + WAIT_S
    while not predicate():
        if time.monotonic() > deadline:
            raise TimeoutError(f"waited {WAIT_S} s for {what}")
        await asyncio.sleep(0.05)


async def test_aiokafka_consumers_split_rebalance_and_resume(env: Env, broker: Broker) -> None:
    from aiokafka import AIOKafkaConsumer, TopicPartition

    def consumer(bootstrap: str) -> AIOKafkaConsumer:
        return AIOKafkaConsumer(
            TOPIC, bootstrap_servers=bootstrap, group_id="g", fetch_max_wait_ms=100, **CLIENT
        )

    async def polling(c: AIOKafkaConsumer) -> None:
        while True:
            await c.getmany(timeout_ms=100)

    a, b = consumer(broker.bootstrap), consumer(broker.bootstrap)
    await a.start()
    await b.start()
    polls = [asyncio.create_task(polling(c)) for c in (a, b)]
    try:
        await until(lambda: len(a.assignment()) == len(b.assignment()) == 1, "the split")
        assert a.assignment() | b.assignment() == {TopicPartition(TOPIC, 0), TopicPartition(TOPIC, 1)}
        for c in (a, b):  # each commits the partition it has: 0 at 5, 1 at 9
            (tp,) = c.assignment()
            await c.commit({tp: 5 if tp.partition == 0 else 9})
        polls[1].cancel()
        await b.stop()  # LeaveGroup
        await until(lambda: len(a.assignment()) == 2, "the rebalance after b left")
    finally:
        for task in polls:
            task.cancel()
        await a.stop()
        await b.stop()
    await broker.coordinator.close()  # the broker restarts: a new coordinator, the same store
    async for again in _broker(env):
        resumed = consumer(again.bootstrap)
        await resumed.start()
        try:
            await until(lambda: len(resumed.assignment()) == 2, "the restarted group")  # noqa: B023
            assert await resumed.committed(TopicPartition(TOPIC, 1)) == 9
            assert await resumed.position(TopicPartition(TOPIC, 0)) == 5
        finally:
            await resumed.stop()


def _threads(consume: Callable[[str, threading.Event], None], names: Sequence[str]) -> dict[str, Any]:
    stops = {n: threading.Event() for n in names}
    threads = {n: threading.Thread(target=consume, args=(n, stops[n]), daemon=True) for n in names}
    for t in threads.values():
        t.start()
    return {"stops": stops, "threads": threads}


async def _stop(run: dict[str, Any], name: str) -> None:
    run["stops"][name].set()
    await asyncio.to_thread(run["threads"][name].join, WAIT_S)
    assert not run["threads"][name].is_alive()


async def test_kafka_python_consumers_split_and_rebalance(broker: Broker) -> None:
    from kafka import KafkaConsumer

    assigned: dict[str, set[Any]] = {}

    def consume(name: str, stop: threading.Event) -> None:
        c = KafkaConsumer(
            TOPIC, bootstrap_servers=broker.bootstrap, group_id="kp", fetch_max_wait_ms=100, **CLIENT
        )
        try:
            while not stop.is_set():
                c.poll(timeout_ms=100)
                assigned[name] = set(c.assignment())
            if name == "a":
                c.commit({tp: _offset_and_metadata(7) for tp in c.assignment()})
        finally:
            c.close()

    run = _threads(consume, ["a", "b"])
    try:
        await until(lambda: len(assigned) == 2 and all(len(s) == 1 for s in assigned.values()), "the split")
        await _stop(run, "b")
        await until(lambda: len(assigned["a"]) == 2, "the rebalance after b left")
    finally:
        for name in ("a", "b"):
            await _stop(run, name)
    assert [o.offset for o in await broker.env.service.group_offsets("kp")] == [7, 7]


def _offset_and_metadata(offset: int) -> Any:
    from kafka.structs import OffsetAndMetadata

    try:
        return OffsetAndMetadata(offset, "", -1)
    except TypeError:  # older field list
        return OffsetAndMetadata(offset, "")


async def test_confluent_kafka_consumers_split_rebalance_and_commit(broker: Broker) -> None:
    from confluent_kafka import Consumer, TopicPartition

    assigned: dict[str, list[Any]] = {}

    def consume(name: str, stop: threading.Event) -> None:
        c = Consumer(
            {
                "bootstrap.servers": broker.bootstrap,
                "group.id": "cf",
                "session.timeout.ms": 10_000,
                "heartbeat.interval.ms": 300,
                "enable.auto.commit": False,
                "fetch.wait.max.ms": 100,
            }
        )
        try:
            c.subscribe([TOPIC])
            while not stop.is_set():
                c.poll(0.1)
                assigned[name] = c.assignment()
            if name == "a":
                c.commit(offsets=[TopicPartition(TOPIC, 0, 11)], asynchronous=False)
        finally:
            c.close()

    run = _threads(consume, ["a", "b"])
    try:
        await until(lambda: len(assigned) == 2 and all(len(p) == 1 for p in assigned.values()), "the split")
        await _stop(run, "b")
        await until(lambda: len(assigned["a"]) == 2, "the rebalance after b left")
    finally:
        for name in ("a", "b"):
            await _stop(run, name)
    assert [(o.partition, o.offset) for o in await broker.env.service.group_offsets("cf")] == [(0, 11)]
