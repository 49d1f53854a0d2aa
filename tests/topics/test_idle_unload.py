"""Idle topic unload (topics.idle): a topic nobody asked for during the idle time is closed and
dropped from memory, its ownership kept; its next request opens it again with its cursor
position and dedup state intact. Only topics whose deadline came are visited."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from managed_ledger.entry_format import Message
from managed_ledger.metadata.memory import InMemoryMetadataStore
from tests.topics.conftest import Env, make_env
from topics.api import SubscriptionOptions
from topics.config import TopicsConfig
from topics.service import TopicService

IDLE_MS = 60_000
T = "public/default/idle"


@pytest.fixture
async def ienv() -> AsyncIterator[Env]:
    e = await make_env(InMemoryMetadataStore(), TopicsConfig(idle_topic_unload_ms=IDLE_MS))
    yield e
    await e.service.close()
    await e.factory.close()


async def run_idle(svc: TopicService) -> int:
    """Run the idle checks that are due; wait for the unloads they started."""
    idle = svc.maintenance.idle
    ran = idle.scheduler.run_due()
    for task in list(idle._unloading):
        await task
    return ran


async def produce(svc: TopicService, topic: str, *seqs: int) -> list[bool]:
    """Produce with sequence ids as producer `p`; which were duplicates."""
    messages = [Message(f"v{s}".encode(), sequence_id=s) for s in seqs]
    return [r.duplicate for r in await svc.produce(topic, "p", messages)]


async def test_an_idle_topic_is_unloaded_and_comes_back_intact(ienv: Env) -> None:
    svc = ienv.service
    await svc.create_topic(T)
    await svc.set_policy(T, "deduplicationEnabled", True)
    await svc.create_subscription(T, "s", SubscriptionOptions("earliest"))
    assert await produce(svc, T, 1, 2, 3) == [False, False, False]
    got = await svc.receive(T, "s", 2, 0, None)
    await svc.ack(T, "s", [d.message.message_id for d in got])
    ml = svc.registry.topics[T].mls[0]
    ienv.clock.advance(IDLE_MS - 1)
    assert await run_idle(svc) == 0 and T in svc.registry.topics  # not idle long enough
    ienv.clock.advance(1)
    assert await run_idle(svc) == 1
    assert T not in svc.registry.topics and svc.maintenance.idle.unloaded == 1
    assert ml not in ienv.factory._ledgers.values()  # its managed ledger is closed
    assert svc.registry.open_locks == {}  # no per-topic leftovers
    # Back on its next request: the acks were flushed, the dedup state snapshotted.
    assert await produce(svc, T, 3, 4) == [True, False]
    assert T in svc.registry.topics
    got = await svc.receive(T, "s", 10, 0, None)
    assert [d.message.value for d in got] == [b"v3", b"v4"]


async def test_a_topic_in_use_stays_and_only_due_topics_are_visited(ienv: Env) -> None:
    svc = ienv.service
    for i in range(30):
        await produce(svc, f"public/default/t{i}", 1)
    await svc.create_subscription(T, "s", SubscriptionOptions("earliest"))
    await produce(svc, T, 1)
    await svc.receive(T, "s", 1, 0, None)  # delivered, not acked: work left in memory
    idle = svc.maintenance.idle
    ienv.clock.advance(IDLE_MS // 2)
    await produce(svc, "public/default/t0", 2)  # t0 is asked for again: its deadline moves
    ienv.clock.advance(IDLE_MS // 2)
    before = idle.scheduler.runs
    await run_idle(svc)
    assert idle.scheduler.runs - before == 31  # every topic's first deadline came
    assert sorted(svc.registry.topics) == ["public/default/idle", "public/default/t0"]
    before = idle.scheduler.runs
    ienv.clock.advance(IDLE_MS // 2)
    await run_idle(svc)
    assert idle.scheduler.runs - before == 1  # only t0's deadline: the rest are not looked at
    assert sorted(svc.registry.topics) == ["public/default/idle"]  # unacked messages: kept
    ienv.clock.advance(IDLE_MS // 2)
    assert await run_idle(svc) == 1 and T in svc.registry.topics


async def test_idle_unload_is_off_by_default(env: Env) -> None:
    svc = env.service
    await produce(svc, T, 1)
    env.clock.advance(10**9)
    assert svc.maintenance.idle.scheduler.run_due() == 0 and T in svc.registry.topics
