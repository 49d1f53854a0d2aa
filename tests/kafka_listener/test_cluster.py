"""Which broker coordinates a group (rendezvous hashing over the live brokers), NOT_COORDINATOR
from the others, a group given up when it moves, and the coordinator on real timers."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence

from kio.schema.errors import ErrorCode

from app.kafka_listener.cluster import (
    BrokerListView,
    KafkaNode,
    SingleNode,
    choose_coordinator,
    node_id_for,
    parse_kafka_url,
)
from app.kafka_listener.group_offsets import GroupCoordinator, OffsetCommit
from app.kafka_listener.groups import GroupConfig
from managed_ledger.metadata.api import BrokerRecord
from managed_ledger.metadata.memory import InMemoryMetadataStore
from tests.kafka_listener.group_support import ME, ManualScheduler, join_request, settle
from tests.kafka_listener.test_groups import bounded
from tests.topics.conftest import make_env

OTHER = KafkaNode(2, "127.0.0.2", 9092)
GROUPS = [f"group-{i}" for i in range(400)]


class MovableView:
    """A cluster view a test changes by hand."""

    def __init__(self, nodes: Sequence[KafkaNode]) -> None:
        self.me = ME
        self.live = list(nodes)

    async def nodes(self) -> Sequence[KafkaNode]:
        return self.live


def _group_led_by(node: KafkaNode, nodes: Sequence[KafkaNode]) -> str:
    return next(g for g in GROUPS if choose_coordinator(g, nodes) == node)


def test_coordinators_spread_and_only_the_leaving_brokers_groups_move() -> None:
    nodes = [KafkaNode(i, f"h{i}", 9092) for i in range(1, 5)]
    before = {g: choose_coordinator(g, nodes) for g in GROUPS}
    counts = {n.node_id: sum(1 for c in before.values() if c == n) for n in nodes}
    assert all(60 < c < 140 for c in counts.values()), counts
    assert before == {g: choose_coordinator(g, list(reversed(nodes))) for g in GROUPS}  # order-free
    after = {g: choose_coordinator(g, nodes[:3]) for g in GROUPS}
    assert all(after[g] == before[g] for g in GROUPS if before[g] != nodes[3])
    assert choose_coordinator("g", []) is None


def test_node_ids_and_kafka_urls() -> None:
    assert node_id_for("127.0.0.1:8080") == node_id_for("127.0.0.1:8080")
    assert node_id_for("127.0.0.1:8080") != node_id_for("127.0.0.1:8081")
    assert all(0 <= node_id_for(f"b{i}") < 2**31 for i in range(100))
    assert parse_kafka_url("h:9092") == ("h", 9092)
    assert parse_kafka_url("PLAINTEXT://h.example:19092/") == ("h.example", 19092)
    assert parse_kafka_url("[::1]:9092") == ("::1", 9092)
    for bad in ("", "h", "h:", ":9092", "h:x", "h:0", "h:70000"):
        assert parse_kafka_url(bad) is None


async def test_broker_list_view_reads_the_registrations_and_keeps_the_last_list() -> None:
    calls = 0
    records = [
        BrokerRecord("a:8080", "s", "http://a:8080", kafka_url="a:9092"),
        BrokerRecord("b:8080", "s", "http://b:8080", kafka_url=""),  # no Kafka listener
        BrokerRecord("c:8080", "s", "http://c:8080", kafka_url="PLAINTEXT://c:9093"),
    ]

    async def brokers() -> list[BrokerRecord]:
        nonlocal calls
        calls += 1
        if calls > 1:
            raise RuntimeError("store down")
        return records

    me = KafkaNode(node_id_for("a:8080"), "a", 9092)
    view = BrokerListView(me, brokers, refresh_ms=0)
    listed = (me, KafkaNode(node_id_for("c:8080"), "c", 9093))
    assert await view.nodes() == listed
    assert await view.nodes() == listed and calls == 2  # the failed read kept the list
    empty = BrokerListView(me, _no_brokers, refresh_ms=60_000)
    assert await empty.nodes() == (me,)  # nothing registered: a broker alone


async def _no_brokers() -> list[BrokerRecord]:
    return []


async def test_another_brokers_group_is_answered_not_coordinator() -> None:
    env = await make_env(InMemoryMetadataStore())
    view = MovableView([ME, OTHER])
    coord = GroupCoordinator(
        env.service, view, GroupConfig(initial_rebalance_delay_ms=0, min_session_timeout_ms=10)
    )
    theirs = _group_led_by(OTHER, view.live)
    try:
        assert await coord.coordinator_for(theirs) == OTHER
        assert (await coord.join(join_request(group=theirs))).error == ErrorCode.not_coordinator
        assert (await coord.sync(theirs, 1, "m", {})).error == ErrorCode.not_coordinator
        assert await coord.heartbeat(theirs, 1, "m") == ErrorCode.not_coordinator
        assert await coord.leave(theirs, "m") == ErrorCode.not_coordinator
        commit = [OffsetCommit("public/default/t", 0, 1)]
        assert await coord.commit(theirs, -1, "", commit) == [ErrorCode.not_coordinator]
        assert await coord.fetch(theirs, None) == (ErrorCode.not_coordinator, [])
        view.live = []
        assert (await coord.join(join_request(group=theirs))).error == ErrorCode.coordinator_not_available
    finally:
        await coord.close()
        await env.service.close()
        await env.factory.close()


async def test_a_group_that_moves_is_given_up_and_its_waiters_answered() -> None:
    env = await make_env(InMemoryMetadataStore())
    view = MovableView([ME])
    sched = ManualScheduler()
    coord = GroupCoordinator(env.service, view, GroupConfig(initial_rebalance_delay_ms=100), scheduler=sched)
    group = _group_led_by(OTHER, [ME, OTHER])
    try:
        waiting = asyncio.create_task(coord.join(join_request(group=group, v4=False, session_ms=6_000)))
        await settle()
        view.live = [ME, OTHER]  # a broker joined: the group hashes to it now
        assert await coord.heartbeat(group, 0, "m") == ErrorCode.not_coordinator
        assert (await bounded(waiting)).error == ErrorCode.not_coordinator
        assert coord.group_ids() == [] and sched.live() == 0
    finally:
        await coord.close()
        await env.service.close()
        await env.factory.close()


async def test_a_silent_member_expires_on_real_timers() -> None:
    env = await make_env(InMemoryMetadataStore())
    config = GroupConfig(initial_rebalance_delay_ms=0, min_session_timeout_ms=10)
    coord = GroupCoordinator(env.service, SingleNode(ME), config)
    try:
        joined = await bounded(coord.join(join_request(v4=False, session_ms=100)))
        assert joined.error == ErrorCode.none  # its session starts now; it never heartbeats
        deadline = time.monotonic() + 5.0
        while coord.group_ids() and time.monotonic() < deadline:
            await asyncio.sleep(0.02)
        assert coord.group_ids() == []  # expired after 100 ms without a heartbeat
        assert await coord.heartbeat("g", joined.generation, joined.member_id) == ErrorCode.unknown_member_id
    finally:
        await coord.close()
        await env.service.close()
        await env.factory.close()


async def test_concurrent_requests_read_the_broker_list_once() -> None:
    calls = 0

    async def slow() -> list[BrokerRecord]:
        nonlocal calls
        calls += 1
        await asyncio.sleep(0.05)
        return [BrokerRecord("a:8080", "s", "http://a:8080", kafka_url="a:9092")]

    view = BrokerListView(KafkaNode(node_id_for("a:8080"), "a", 9092), slow, refresh_ms=60_000)
    answers = await asyncio.gather(*(view.nodes() for _ in range(5)))
    assert calls == 1 and answers[0] == (view.me,)
