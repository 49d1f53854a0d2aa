"""One publish path for every door: the REST produce (`TopicService.produce`) and the Kafka
produce (`kafka_produce`) both store through `Topic.publish`, so its rules -- the writable check,
the backlog quota, the meters -- hold for both alike, and a fix to one is a fix to both."""

from __future__ import annotations

from typing import Any

import pytest

from managed_ledger.entry_format import Message
from tests.topics.test_kafka_ops import kbatch
from topics.api import SubscriptionOptions
from topics.errors import BacklogQuotaExceededError, TopicTerminatedError
from topics.service import TopicService
from topics.topic import Topic, Write

T = "public/default/doors"


async def rest(svc: TopicService, n: int = 1) -> None:
    await svc.produce(T, None, [Message(b"x" * 100) for _ in range(n)])


async def kafka(svc: TopicService, n: int = 1) -> None:
    await svc.kafka_produce(T, 0, kbatch(n))


async def test_both_doors_publish_through_the_topic(
    svc: TopicService, monkeypatch: pytest.MonkeyPatch
) -> None:
    seen: list[str] = []
    publish = Topic.publish

    async def spy(self: Topic, writes: list[Write], publisher: str | None = None) -> None:
        seen.append(type(writes[0]).__name__)
        await publish(self, writes, publisher)

    monkeypatch.setattr(Topic, "publish", spy)
    await svc.create_topic(T)
    await rest(svc)
    await kafka(svc)
    assert seen == ["MessagesWrite", "KafkaWrite"]


async def test_a_backlog_quota_refuses_both_doors_and_counts_both(svc: TopicService) -> None:
    await svc.create_topic(T)
    await svc.create_subscription(T, "slow", SubscriptionOptions("earliest"))
    await rest(svc)
    await kafka(svc)
    await svc.set_backlog_quota(T, "destination_storage", {"policy": "producer_exception", "limitSize": 1})
    before = svc._topics[T].mls[0].entries_added_counter
    with pytest.raises(BacklogQuotaExceededError):
        await rest(svc)
    with pytest.raises(BacklogQuotaExceededError):
        await kafka(svc)
    assert svc._topics[T].mls[0].entries_added_counter == before  # neither door wrote
    stats: dict[str, Any] = await svc.stats(T)
    assert stats["backlogQuotaEvents"]["refused"] == 2


async def test_the_meters_count_both_doors(svc: TopicService) -> None:
    await svc.create_topic(T)
    await rest(svc, 3)  # one entry of three messages
    await kafka(svc, 2)  # one entry of two records
    stats: dict[str, Any] = await svc.stats(T)
    assert stats["msgInCounter"] == 5
    t = svc._topics[T]
    assert t.meters.entries_in[0] == 2


async def test_a_terminated_topic_refuses_both_doors(svc: TopicService) -> None:
    await svc.create_topic(T)
    await rest(svc)
    await svc.terminate(T)
    with pytest.raises(TopicTerminatedError):
        await rest(svc)
    with pytest.raises(TopicTerminatedError):
        await kafka(svc)
