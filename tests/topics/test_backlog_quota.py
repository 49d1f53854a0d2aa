"""Backlog quotas (Pulsar's three policies) over the real managed ledger with the manual clock:
each policy at its boundary (a backlog exactly at the limit passes, one byte or one millisecond
over does not), a held produce released by an ack and one timing out, eviction moving only the
slowest cursors and by exactly the bytes over, bad quotas refused, and the namespace level."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest

from managed_ledger.entry_format import Message
from managed_ledger.metadata.memory import InMemoryMetadataStore
from managed_ledger.position import Position
from tests.topics.conftest import Env, make_env
from topics.api import BacklogQuota, SubscriptionOptions
from topics.config import TopicsConfig
from topics.errors import (
    BacklogQuotaExceededError,
    InvalidPolicyError,
    NamespaceNotFoundError,
    StorageUnavailableError,
)
from topics.service import TopicService

T = "public/default/quota"
EARLIEST = SubscriptionOptions("earliest", ack_timeout_ms=600_000)
BOUND_S = 5.0  # every wait below is bounded by this


@pytest.fixture
async def env() -> AsyncIterator[Env]:
    config = TopicsConfig(backlog_quota_hold_timeout_ms=300, backlog_quota_check_interval_ms=60_000)
    e = await make_env(InMemoryMetadataStore(), config)
    yield e
    await e.service.close()
    await e.factory.close()


async def produce(svc: TopicService, n: int = 1) -> None:
    """n entries of one message each, all the same size."""
    for _ in range(n):
        await svc.produce(T, None, [Message(b"x" * 100)])


async def entry_size(svc: TopicService) -> int:
    """The stored size of one entry (every entry here has the same size)."""
    await svc.create_topic(T)
    await svc.create_subscription(T, "slow", EARLIEST)
    await produce(svc)
    ml = svc._topics[T].mls[0]
    return ml.total_size_bytes


def entries(svc: TopicService) -> int:
    return svc._topics[T].mls[0].entries_added_counter


async def events(svc: TopicService) -> dict[str, int]:
    stats = await svc.stats(T)
    return dict(stats["backlogQuotaEvents"])


def quota(policy: str, size: int | None = None, time: int | None = None) -> dict[str, object]:
    body: dict[str, object] = {"policy": policy}
    if size is not None:
        body["limitSize"] = size
    if time is not None:
        body["limitTime"] = time
    return body


async def test_producer_exception_at_the_limit_and_one_byte_over(svc: TopicService) -> None:
    e = await entry_size(svc)
    await produce(svc, 3)  # backlog: 4 entries
    await svc.set_backlog_quota(T, "destination_storage", quota("producer_exception", size=4 * e))
    await produce(svc)  # exactly at the limit: taken (the backlog is now 5 entries)
    await svc.set_backlog_quota(T, "destination_storage", quota("producer_exception", size=5 * e - 1))
    before = entries(svc)
    with pytest.raises(BacklogQuotaExceededError) as refused:
        await produce(svc)
    assert entries(svc) == before  # nothing stored
    assert (refused.value.quota_type, refused.value.limit) == ("destination_storage", 5 * e - 1)
    await svc.set_backlog_quota(T, "destination_storage", quota("producer_exception", size=5 * e))
    await produce(svc)  # at the limit again
    await svc.set_backlog_quota(T, "destination_storage", quota("producer_exception", size=5 * e))
    with pytest.raises(BacklogQuotaExceededError):
        await produce(svc)  # 6 entries: over
    await svc.skip(T, "slow", 1)  # an ack brings the backlog back to the limit
    await produce(svc)
    assert await events(svc) == {"held": 0, "refused": 2, "evicted": 0}


async def test_without_subscriptions_there_is_no_backlog(svc: TopicService) -> None:
    await svc.create_topic(T)
    await svc.set_backlog_quota(T, "destination_storage", quota("producer_exception", size=0))
    await produce(svc, 3)
    await svc.create_subscription(T, "s", EARLIEST)  # from now on: 3 entries of backlog
    with pytest.raises(BacklogQuotaExceededError):
        await produce(svc)


async def test_message_age_at_the_limit_and_one_millisecond_over(svc: TopicService, env: Env) -> None:
    await entry_size(svc)  # one message published now
    await svc.set_backlog_quota(T, "message_age", quota("producer_exception", time=10))
    env.clock.advance(10_000)
    await produce(svc)  # the oldest unacked message is exactly 10 s old: taken
    env.clock.advance(1)
    with pytest.raises(BacklogQuotaExceededError) as refused:
        await produce(svc)
    assert (refused.value.quota_type, refused.value.limit) == ("message_age", 10)
    await svc.skip(T, "slow", 1)  # the oldest is now the one published 1 ms ago
    await produce(svc)


async def test_a_held_produce_goes_through_when_an_ack_brings_the_backlog_under(
    svc: TopicService,
) -> None:
    e = await entry_size(svc)
    await produce(svc)  # 2 entries
    await svc.set_backlog_quota(T, "destination_storage", quota("producer_request_hold", size=e))
    svc._config = TopicsConfig(backlog_quota_hold_timeout_ms=10_000, backlog_quota_check_interval_ms=60_000)
    held = asyncio.create_task(produce(svc))
    await asyncio.sleep(0.1)
    assert not held.done() and entries(svc) == 2
    await svc.skip(T, "slow", 1)  # the ack wakes it (the periodic re-check is a minute away)
    await asyncio.wait_for(held, BOUND_S)
    assert entries(svc) == 3
    assert await events(svc) == {"held": 1, "refused": 0, "evicted": 0}


async def test_a_held_produce_times_out_with_the_refusal_and_stores_nothing(svc: TopicService) -> None:
    e = await entry_size(svc)
    await produce(svc)
    await svc.set_backlog_quota(T, "destination_storage", quota("producer_request_hold", size=e))
    started = asyncio.get_running_loop().time()
    with pytest.raises(BacklogQuotaExceededError):
        await asyncio.wait_for(produce(svc), BOUND_S)
    assert 0.25 <= asyncio.get_running_loop().time() - started < BOUND_S  # the 300 ms hold
    assert entries(svc) == 2
    assert await events(svc) == {"held": 1, "refused": 1, "evicted": 0}


async def test_a_held_produce_goes_through_when_the_quota_is_removed(svc: TopicService) -> None:
    e = await entry_size(svc)
    await produce(svc)
    await svc.set_backlog_quota(T, "destination_storage", quota("producer_request_hold", size=e))
    svc._config = TopicsConfig(backlog_quota_hold_timeout_ms=10_000, backlog_quota_check_interval_ms=60_000)
    held = asyncio.create_task(produce(svc))
    await asyncio.sleep(0.05)
    await svc.delete_backlog_quota(T, "destination_storage")
    await asyncio.wait_for(held, BOUND_S)
    assert entries(svc) == 3


async def test_eviction_moves_only_the_slowest_cursors_and_just_far_enough(svc: TopicService) -> None:
    e = await entry_size(svc)
    await svc.create_subscription(T, "slower", EARLIEST)
    await svc.create_subscription(T, "fast", EARLIEST)
    await produce(svc, 9)  # entries 0..9
    await svc.skip(T, "fast", 9)  # fast has acked 0..8: one entry behind
    ml = svc._topics[T].mls[0]
    ledger = ml.last_confirmed_position.ledger_id  # type: ignore[union-attr]
    await svc.skip(T, "slower", 2)
    await svc.set_backlog_quota(T, "destination_storage", quota("consumer_backlog_eviction", size=3 * e))
    await produce(svc)  # taken (entry 10), then the backlog is cut to 3 entries: 8, 9, 10
    marks = {name: c.mark_delete_position for name, c in ml.cursors.items()}
    assert marks == {
        "slow": Position(ledger, 7),
        "slower": Position(ledger, 7),
        "fast": Position(ledger, 8),
    }
    assert ml.size_after(Position(ledger, 7)) == 3 * e
    assert entries(svc) == 11
    assert await events(svc) == {"held": 0, "refused": 0, "evicted": 2}
    # Exactly at the limit: nothing more to evict, even when checked again.
    assert await svc.check_backlog_quotas() == []


async def test_the_periodic_check_evicts_by_size_and_by_age(svc: TopicService, env: Env) -> None:
    e = await entry_size(svc)
    await produce(svc, 3)  # 4 entries, 0 s old
    await svc.set_namespace_backlog_quota(
        "public/default", "destination_storage", quota("consumer_backlog_eviction", size=2 * e + 1)
    )
    assert await svc.check_backlog_quotas() == [T]
    ml = svc._topics[T].mls[0]
    assert ml.size_after(ml.cursors["slow"].mark_delete_position) == 2 * e
    await svc.delete_namespace_backlog_quota("public/default", "destination_storage")
    env.clock.advance(5_000)
    await produce(svc)  # 3 entries of backlog: two 5 s old, one new
    await svc.set_backlog_quota(T, "message_age", quota("consumer_backlog_eviction", time=5))
    assert await svc.check_backlog_quotas() == []  # exactly 5 s: not over
    env.clock.advance(1)
    assert await svc.check_backlog_quotas() == [T]
    assert ml.size_after(ml.cursors["slow"].mark_delete_position) == e  # only the new one stays
    assert (await events(svc))["evicted"] == 2


@pytest.mark.parametrize(
    ("quota_type", "body"),
    [
        ("destination_storage", {"limitSize": -1, "policy": "producer_exception"}),
        ("message_age", {"limitTime": -5, "policy": "producer_exception"}),
        ("destination_storage", {"limitSize": 10, "policy": "drop_everything"}),
        ("destination_storage", {"limitSize": 10}),
        ("storage", {"limitSize": 10, "policy": "producer_exception"}),
        ("destination_storage", {"policy": "producer_exception"}),
        ("destination_storage", {"limitTime": 10, "policy": "producer_exception"}),
        # 0: no time limit (Pulsar's), so this message_age quota has none; the one in effect's
        # limitTime does not stand in for it once the body says 0
        ("message_age", {"limitSize": 10, "limitTime": 0, "policy": "producer_exception"}),
        ("destination_storage", {"limitSize": 10, "policy": "producer_exception", "limit": 3}),
        ("destination_storage", {"limitSize": True, "policy": "producer_exception"}),
        ("destination_storage", [10]),
    ],
)
async def test_bad_quotas_are_refused_and_change_nothing(
    svc: TopicService, quota_type: str, body: object
) -> None:
    await svc.create_topic(T)
    await svc.set_backlog_quota(T, "message_age", quota("producer_exception", time=60))
    with pytest.raises(InvalidPolicyError):
        await svc.set_backlog_quota(T, quota_type, body)  # type: ignore[arg-type]
    with pytest.raises(InvalidPolicyError):
        await svc.set_namespace_backlog_quota("public/default", quota_type, body)  # type: ignore[arg-type]
    assert await svc.get_backlog_quotas(T) == {"message_age": BacklogQuota("producer_exception", None, 60)}
    assert (await svc.get_namespace_policies("public/default")).backlog_quotas == {}


async def test_quotas_resolve_per_type_topic_over_namespace(svc: TopicService) -> None:
    await svc.create_topic(T)
    ns = "public/default"
    await svc.set_namespace_backlog_quota(ns, "destination_storage", quota("producer_exception", size=100))
    await svc.set_namespace_backlog_quota(ns, "message_age", quota("producer_request_hold", time=60))
    await svc.set_backlog_quota(T, "message_age", quota("consumer_backlog_eviction", time=5))
    assert await svc.get_backlog_quotas(T) == {
        "destination_storage": BacklogQuota("producer_exception", 100, None),
        "message_age": BacklogQuota("consumer_backlog_eviction", None, 5),
    }
    await svc.delete_backlog_quota(T, "message_age")
    assert (await svc.get_backlog_quotas(T))["message_age"] == BacklogQuota("producer_request_hold", None, 60)
    await svc.delete_namespace_backlog_quota(ns, "message_age")
    await svc.delete_namespace_backlog_quota(ns, "destination_storage")
    assert await svc.get_backlog_quotas(T) == {}


async def test_namespace_policies_fall_back_merge_and_apply_at_once(svc: TopicService) -> None:
    await svc.create_topic(T)
    ns = "public/default"
    defaults = await svc.get_namespace_policies(ns)
    await svc.set_namespace_policy(ns, "retention", {"retentionTimeInMinutes": 30})
    await svc.set_namespace_policy(ns, "retention", {"retentionSizeInMB": 7})  # the time stays
    own = await svc.get_namespace_policies(ns)
    assert (own.retention_time_minutes, own.retention_size_mb) == (30, 7)
    topic = await svc.get_policies(T)  # open, no own value: sees it at once
    assert (topic.retention_time_minutes, topic.retention_size_mb) == (30, 7)
    await svc.set_policy(T, "retention", {"retentionTimeInMinutes": 1, "retentionSizeInMB": 1})
    await svc.set_namespace_policy(ns, "retention", {"retentionSizeInMB": 9})
    assert (await svc.get_policies(T)).retention_size_mb == 1  # the topic's own wins
    await svc.delete_namespace_policy(ns, "retention")
    assert (await svc.get_namespace_policies(ns)).retention_size_mb == defaults.retention_size_mb
    with pytest.raises(InvalidPolicyError):  # min over the max once merged: nothing changes
        await svc.set_namespace_policy(ns, "rolloverPolicy", {"minRolloverTimeMs": 10**12})
    assert (await svc.get_namespace_policies(ns)).min_rollover_time_ms == defaults.min_rollover_time_ms
    with pytest.raises(NamespaceNotFoundError):
        await svc.get_namespace_policies("public/nowhere")
    with pytest.raises(NamespaceNotFoundError):
        await svc.delete_namespace_policy("public/nowhere", "retention")


async def test_a_held_produce_ends_when_its_topic_is_unloaded(svc: TopicService) -> None:
    e = await entry_size(svc)
    await produce(svc)
    await svc.set_backlog_quota(T, "destination_storage", quota("producer_request_hold", size=e))
    svc._config = TopicsConfig(backlog_quota_hold_timeout_ms=10_000, backlog_quota_check_interval_ms=60_000)
    held = asyncio.create_task(produce(svc))
    await asyncio.sleep(0.05)
    await svc.unload(T)
    with pytest.raises(StorageUnavailableError):  # the closed topic's append: retry (503), not a 429
        await asyncio.wait_for(held, BOUND_S)
