"""Redelivery limits and dead letters (Pulsar's DeadLetterPolicy) on the topic service over the
in-memory store with a manual clock: a message is delivered at most max_redeliveries + 1 times,
then written to the dead-letter topic with where it came from and why, and acked here; the limit
holds across a broker restart (the counts are durable); a write that fails is tried again."""

from __future__ import annotations

import pytest

from managed_ledger.entry_format import Message
from tests.topics.conftest import Env
from topics.api import SubscriptionOptions
from topics.errors import InvalidArgumentError, InvalidNameError, TopicNotFoundError
from topics.service import TopicService

T = "public/default/orders"
DLQ = "public/default/orders-s-DLQ"


async def read_all(svc: TopicService, topic: str) -> list[tuple[str, str | None, dict[str, str]]]:
    page = await svc.read(topic, "earliest", 100, False, 0)
    return [(m.value.decode(), m.key, dict(m.properties or {})) for m in page.messages]


async def test_poison_message_goes_to_the_dead_letter_topic_after_exactly_n_plus_one_deliveries(
    svc: TopicService, env: Env
) -> None:
    (poison,) = [
        r.message_id
        for r in await svc.produce(T, None, [Message(b"poison", key="k", properties={"src": "feed"})])
    ]
    await svc.produce(T, None, [Message(b"good")])
    options = SubscriptionOptions("earliest", "shared", ack_timeout_ms=1_000, max_redeliveries=2)
    await svc.create_subscription(T, "s", options)
    counts = []
    for round_ in range(3):
        got = await svc.receive(T, "s", 10, 0, None)
        counts += [d.redelivery_count for d in got if d.message.message_id == poison]
        good = [d.message.message_id for d in got if d.message.message_id != poison]
        if good:
            await svc.ack(T, "s", good)
        if round_ == 0:
            await svc.nack(T, "s", [poison])  # the first redelivery by a nack...
        else:
            env.clock.advance(1_001)  # ...the others by the ack timeout
    assert counts == [0, 1, 2]
    assert await svc.receive(T, "s", 10, 0, None) == []  # not a fourth time
    assert await read_all(svc, DLQ) == [
        (
            "poison",
            "k",
            {
                "src": "feed",
                "REAL_TOPIC": T,
                "REAL_SUBSCRIPTION": "s",
                "ORIGIN_MESSAGE_ID": str(poison),
                "DEAD_LETTER_REASON": "ack timeout",
            },
        )
    ]
    env.clock.advance(10_000)
    assert await svc.receive(T, "s", 10, 0, None) == []  # acked on the original
    assert (await svc.stats(T))["subscriptions"]["s"]["msgBacklog"] == 0


async def test_the_limit_holds_across_a_restart(svc: TopicService, env: Env) -> None:
    await svc.produce(T, None, [Message(b"poison")])
    options = SubscriptionOptions("earliest", "shared", ack_timeout_ms=1_000, max_redeliveries=1)
    await svc.create_subscription(T, "s", options)
    assert [d.redelivery_count for d in await svc.receive(T, "s", 10, 0, None)] == [0]
    env.clock.advance(1_001)
    assert [d.redelivery_count for d in await svc.receive(T, "s", 10, 0, None)] == [1]
    svc = await env.restart()  # the count is stored with the cursor on close
    assert await svc.receive(T, "s", 10, 0, None) == []
    assert [v for v, _, _ in await read_all(svc, DLQ)] == ["poison"]


async def test_a_custom_dead_letter_topic_and_no_limit_by_default(svc: TopicService, env: Env) -> None:
    await svc.produce(T, None, [Message(b"m")])
    await svc.create_subscription(T, "unlimited", SubscriptionOptions("earliest", ack_timeout_ms=10))
    for expected in range(5):
        assert [d.redelivery_count for d in await svc.receive(T, "unlimited", 10, 0, None)] == [expected]
        env.clock.advance(11)
    options = SubscriptionOptions(
        "earliest", "exclusive", max_redeliveries=1, dead_letter_topic="public/default/poison"
    )
    await svc.create_subscription(T, "x", options)
    for _ in range(2):
        (d,) = await svc.receive(T, "x", 10, 0, "c1")
        await svc.nack(T, "x", [d.message.message_id])
    assert await svc.receive(T, "x", 10, 0, "c1") == []
    assert [(v, p["DEAD_LETTER_REASON"]) for v, _, p in await read_all(svc, "public/default/poison")] == [
        ("m", "nacked")
    ]


async def test_a_dead_letter_that_cannot_be_written_stays_and_is_tried_again(
    svc: TopicService, env: Env, monkeypatch: pytest.MonkeyPatch
) -> None:
    await svc.produce(T, None, [Message(b"poison")])
    options = SubscriptionOptions("earliest", ack_timeout_ms=5_000, max_redeliveries=1)
    await svc.create_subscription(T, "s", options)
    (d,) = await svc.receive(T, "s", 10, 0, None)
    await svc.nack(T, "s", [d.message.message_id])
    (d,) = await svc.receive(T, "s", 10, 0, None)
    await svc.nack(T, "s", [d.message.message_id])

    async def broken(topic: str, messages: list[Message]) -> None:
        raise OSError("the dead-letter topic's broker is down")

    sub = svc._topics[T].subscriptions["s"]
    real = sub._dead_letter
    monkeypatch.setattr(sub, "_dead_letter", broken)
    assert await svc.receive(T, "s", 10, 0, None) == []
    with pytest.raises(TopicNotFoundError):
        await read_all(svc, DLQ)  # nothing was written
    monkeypatch.setattr(sub, "_dead_letter", real)
    env.clock.advance(4_999)
    assert await svc.receive(T, "s", 10, 0, None) == []  # not yet: it waits out the ack timeout
    with pytest.raises(TopicNotFoundError):
        await read_all(svc, DLQ)
    env.clock.advance(2)
    assert await svc.receive(T, "s", 10, 0, None) == []  # written now, and acked: not delivered
    assert [v for v, _, _ in await read_all(svc, DLQ)] == ["poison"]
    assert sub.dead_lettered == 1


async def test_bad_limits_are_refused(svc: TopicService) -> None:
    with pytest.raises(InvalidArgumentError):
        await svc.create_subscription(T, "s", SubscriptionOptions(max_redeliveries=-1))
    with pytest.raises(InvalidNameError):
        await svc.create_subscription(T, "s", SubscriptionOptions(dead_letter_topic="no slashes"))
