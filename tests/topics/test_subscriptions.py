"""Durable subscriptions: delivery, acks, ack timeout redelivery, nack, exclusive, seeks."""

from __future__ import annotations

import asyncio

import pytest

from managed_ledger.entry_format import Message
from managed_ledger.position import MessageId
from tests.topics.conftest import Env
from topics.api import Delivery, SubscriptionOptions
from topics.errors import (
    ConsumerBusyError,
    SubscriptionNotFoundError,
    TooManyMessagesRequestedError,
    WaitTooLongError,
)
from topics.service import TopicService

T = "public/default/orders"
EARLIEST = SubscriptionOptions(initial_position="earliest", ack_timeout_ms=1_000)


async def produce(svc: TopicService, *values: str, topic: str = T) -> list[MessageId]:
    results = await svc.produce(topic, None, [Message(v.encode()) for v in values])
    return [r.message_id for r in results if r.message_id is not None]


def values(deliveries: list[Delivery]) -> list[str]:
    return [d.message.value.decode() for d in deliveries]


async def test_create_is_idempotent_and_latest_skips_old(svc: TopicService) -> None:
    await produce(svc, "old")
    assert await svc.create_subscription(T, "s", SubscriptionOptions()) is True
    assert await svc.create_subscription(T, "s", SubscriptionOptions()) is False
    await produce(svc, "new")
    assert values(await svc.receive(T, "s", 10, 0, None)) == ["new"]
    assert await svc.list_subscriptions(T) == ["s"]


async def test_unknown_subscription_and_wait_cap(svc: TopicService) -> None:
    await produce(svc, "a")
    with pytest.raises(SubscriptionNotFoundError):
        await svc.receive(T, "nope", 10, 0, None)
    await svc.create_subscription(T, "s", EARLIEST)
    with pytest.raises(WaitTooLongError) as err:
        await svc.receive(T, "s", 10, 10**9, None)
    assert err.value.limit == 30_000
    with pytest.raises(TooManyMessagesRequestedError):
        await svc.receive(T, "s", 10_001, 0, None)
    await svc.delete_subscription(T, "s")
    with pytest.raises(SubscriptionNotFoundError):
        await svc.ack(T, "s", [])


async def test_pending_until_acked_then_redelivered_after_timeout(svc: TopicService, env: Env) -> None:
    ids = await produce(svc, "a", "b", "c")
    await svc.create_subscription(T, "s", EARLIEST)
    first = await svc.receive(T, "s", 10, 0, None)
    assert values(first) == ["a", "b", "c"] and all(d.redelivery_count == 0 for d in first)
    assert await svc.receive(T, "s", 10, 0, None) == []  # pending, not redelivered yet
    await svc.ack(T, "s", [ids[1]])
    env.clock.advance(1_001)
    again = await svc.receive(T, "s", 10, 0, None)
    assert values(again) == ["a", "c"] and [d.redelivery_count for d in again] == [1, 1]
    env.clock.advance(1_001)
    assert [d.redelivery_count for d in await svc.receive(T, "s", 10, 0, None)] == [2, 2]
    await svc.ack(T, "s", [ids[0], ids[2]])
    env.clock.advance(5_000)
    assert await svc.receive(T, "s", 10, 0, None) == []
    sub = (await svc.stats(T))["subscriptions"]["s"]
    assert (sub["type"], sub["msgBacklog"], sub["unackedMessages"]) == ("shared", 0, 0)


async def test_nack_redelivers_at_once(svc: TopicService) -> None:
    ids = await produce(svc, "a", "b")
    await svc.create_subscription(T, "s", EARLIEST)
    await svc.receive(T, "s", 10, 0, None)
    await svc.nack(T, "s", [ids[1]])
    again = await svc.receive(T, "s", 10, 0, None)
    assert values(again) == ["b"] and again[0].redelivery_count == 1


async def test_batch_entry_acked_on_cursor_only_when_all_its_messages_are(svc: TopicService) -> None:
    ids = await produce(svc, "a", "b", "c")
    await svc.create_subscription(T, "s", EARLIEST)
    await svc.receive(T, "s", 10, 0, None)
    await svc.ack(T, "s", ids[:2])
    assert (await svc.stats(T))["subscriptions"]["s"]["msgBacklog"] == 1
    await svc.ack(T, "s", ids[2:])
    stats = await svc.stats(T)
    assert stats["subscriptions"]["s"]["msgBacklog"] == 0
    internal = await svc.internal_stats(T)
    assert internal["cursors"]["s"]["markDeletePosition"] == str(ids[0].position)


async def test_small_pages_split_a_batch(svc: TopicService) -> None:
    await produce(svc, *[str(i) for i in range(7)])
    await svc.create_subscription(T, "s", EARLIEST)
    got: list[str] = []
    for _ in range(4):
        got += values(await svc.receive(T, "s", 2, 0, None))
    assert got == [str(i) for i in range(7)]


async def test_whole_entries_hands_the_last_batch_out_whole_past_the_limit(svc: TopicService) -> None:
    await produce(svc, *[str(i) for i in range(7)])  # one entry of 7
    await produce(svc, "next")
    await svc.create_subscription(T, "s", EARLIEST)
    assert values(await svc.receive(T, "s", 2, 0, None, whole_entries=True)) == [str(i) for i in range(7)]
    assert values(await svc.receive(T, "s", 2, 0, None, whole_entries=True)) == ["next"]


async def test_ack_by_id_of_a_message_not_delivered_in_this_session(env: Env) -> None:
    svc = env.service
    ids = await produce(svc, "a", "b")
    await svc.create_subscription(T, "s", EARLIEST)
    svc = await env.restart()
    await svc.ack(T, "s", ids)
    assert await svc.receive(T, "s", 10, 0, None) == []


async def test_cumulative_ack(svc: TopicService) -> None:
    a = await produce(svc, "a1", "a2", "a3")
    b = await produce(svc, "b1")
    await svc.create_subscription(T, "s", EARLIEST)
    assert len(await svc.receive(T, "s", 10, 0, None)) == 4
    await svc.ack_cumulative(T, "s", a[1])  # inside a batch: a3 and b1 stay pending
    assert (await svc.stats(T))["subscriptions"]["s"]["unackedMessages"] == 2
    await svc.nack(T, "s", [a[2], b[0]])
    assert values(await svc.receive(T, "s", 10, 0, None)) == ["a3", "b1"]
    await svc.ack_cumulative(T, "s", b[0])
    sub = (await svc.stats(T))["subscriptions"]["s"]
    assert (sub["type"], sub["msgBacklog"], sub["unackedMessages"]) == ("shared", 0, 0)


async def test_cumulative_ack_inside_a_batch_whose_rest_was_acked_acks_the_entry(svc: TopicService) -> None:
    ids = await produce(svc, "a1", "a2", "a3")
    await svc.create_subscription(T, "s", EARLIEST)
    await svc.receive(T, "s", 10, 0, None)
    await svc.ack(T, "s", [ids[2]])
    await svc.ack_cumulative(T, "s", ids[1])  # with a3 acked before, the whole entry is
    assert (await svc.stats(T))["subscriptions"]["s"]["msgBacklog"] == 0


async def test_exclusive_one_consumer_then_takeover_after_idle(svc: TopicService, env: Env) -> None:
    await produce(svc, "a", "b")
    await svc.create_subscription(T, "x", SubscriptionOptions("earliest", "exclusive", ack_timeout_ms=60_000))
    assert values(await svc.receive(T, "x", 1, 0, "c1")) == ["a"]
    with pytest.raises(ConsumerBusyError):
        await svc.receive(T, "x", 1, 0, "c2")
    assert values(await svc.receive(T, "x", 1, 0, "c1")) == ["b"]
    env.clock.advance(60_001)  # c1 went away: c2 takes over and gets c1's unacked, in order
    taken = await svc.receive(T, "x", 10, 0, "c2")
    assert values(taken) == ["a", "b"] and all(d.redelivery_count == 1 for d in taken)
    with pytest.raises(ConsumerBusyError):
        await svc.receive(T, "x", 1, 0, "c1")


async def test_seek_earliest_latest_id_and_time(svc: TopicService, env: Env) -> None:
    ids = await produce(svc, "a", "b")
    env.clock.advance(10)
    t_c = env.clock.now_ms()
    ids += await produce(svc, "c", "d")
    await svc.create_subscription(T, "s", EARLIEST)
    await svc.receive(T, "s", 10, 0, None)
    await svc.ack(T, "s", ids)
    await svc.seek(T, "s", "earliest")
    assert values(await svc.receive(T, "s", 10, 0, None)) == ["a", "b", "c", "d"]
    await svc.seek(T, "s", ids[1])
    assert values(await svc.receive(T, "s", 10, 0, None)) == ["b", "c", "d"]
    await svc.seek(T, "s", t_c)
    assert values(await svc.receive(T, "s", 10, 0, None)) == ["c", "d"]
    await svc.reset_cursor(T, "s", 0)
    assert len(await svc.receive(T, "s", 10, 0, None)) == 4
    await svc.seek(T, "s", "latest")
    assert await svc.receive(T, "s", 10, 0, None) == []
    await produce(svc, "e")
    assert values(await svc.receive(T, "s", 10, 0, None)) == ["e"]


async def test_long_poll_wakes_on_produce(svc: TopicService) -> None:
    await svc.create_subscription(T, "s", SubscriptionOptions())
    waiter = asyncio.create_task(svc.receive(T, "s", 10, 10_000, None))
    await asyncio.sleep(0.01)
    assert not waiter.done()
    await produce(svc, "late")
    got = await asyncio.wait_for(waiter, 5)
    assert values(got) == ["late"]


async def test_long_poll_returns_empty_at_wait_end(svc: TopicService) -> None:
    await svc.create_subscription(T, "s", SubscriptionOptions())
    assert await svc.receive(T, "s", 10, 20, None) == []


async def test_concurrent_consumers_never_share_a_message(svc: TopicService) -> None:
    await produce(svc, *[str(i) for i in range(100)])
    await svc.create_subscription(T, "s", EARLIEST)
    pages = await asyncio.gather(*(svc.receive(T, "s", 7, 0, f"c{i}") for i in range(20)))
    got = [v for page in pages for v in values(page)]
    assert sorted(got, key=int) == [str(i) for i in range(100)]


async def test_restart_delivers_unacked_again(env: Env) -> None:
    svc = env.service
    ids = [(await produce(svc, v))[0] for v in ("a", "b", "c")]
    batch = await produce(svc, "d1", "d2")
    await svc.create_subscription(T, "s", EARLIEST)
    await svc.receive(T, "s", 10, 0, None)
    await svc.ack(T, "s", [ids[0], ids[2], batch[0]])
    svc = await env.restart()
    # The close flushed the cursor with its delivery state: d1's ack inside the batch holds, and
    # what was delivered before comes again as a redelivery.
    again = await svc.receive(T, "s", 10, 0, None)
    assert values(again) == ["b", "d2"] and [d.redelivery_count for d in again] == [1, 1]
    assert (await svc.get_policies(T)).deduplication_enabled is False


async def test_subscription_options_survive_restart(env: Env) -> None:
    svc = env.service
    await svc.create_subscription(T, "x", SubscriptionOptions("earliest", "exclusive", ack_timeout_ms=5))
    svc = await env.restart()
    await produce(svc, "a")
    await svc.receive(T, "x", 1, 0, "c1")
    with pytest.raises(ConsumerBusyError):
        await svc.receive(T, "x", 1, 0, "c2")
    env.clock.advance(6)
    assert (await svc.receive(T, "x", 1, 0, "c1"))[0].redelivery_count == 1


async def test_exclusive_redelivers_in_id_order_before_new_messages(svc: TopicService) -> None:
    ids = [(await produce(svc, v))[0] for v in ("a", "b", "c")]
    await svc.create_subscription(T, "x", SubscriptionOptions("earliest", "exclusive"))
    assert values(await svc.receive(T, "x", 3, 0, "c1")) == ["a", "b", "c"]
    await produce(svc, "d")
    await svc.nack(T, "x", [ids[2], ids[0]])
    assert values(await svc.receive(T, "x", 10, 0, "c1")) == ["a", "c", "d"]
