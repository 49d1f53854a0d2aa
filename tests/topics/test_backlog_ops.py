"""A subscription's backlog from the admin side (Pulsar's peek, examinemessage, skip,
clear-backlog, expire, create at a position), against a model of the backlog: the messages not
acked yet, in order. Batches of several messages and acks inside them included."""

from __future__ import annotations

import random

import pytest

from managed_ledger.entry_format import Message
from managed_ledger.position import MessageId
from tests.topics.conftest import Env
from topics.api import SubscriptionOptions
from topics.errors import InvalidArgumentError, InvalidPolicyError, MessageNotFoundError
from topics.service import TopicService

T = "public/default/backlog"


async def produce_batches(svc: TopicService, env: Env, sizes: list[int]) -> list[MessageId]:
    ids: list[MessageId] = []
    for i, size in enumerate(sizes):
        results = await svc.produce(T, None, [Message(f"m{i}.{j}".encode()) for j in range(size)])
        ids += [r.message_id for r in results if r.message_id is not None]
        env.clock.advance(1_000)  # one second between batches
    return ids


async def peek_all(svc: TopicService, sub: str) -> list[MessageId]:
    out: list[MessageId] = []
    for n in range(1, 1_000):
        try:
            out.append((await svc.peek(T, sub, n)).message_id)
        except MessageNotFoundError:
            return out
    raise AssertionError("the backlog never ended")


async def test_peek_skip_expire_and_clear_against_a_model(svc: TopicService, env: Env) -> None:
    rng = random.Random(11)
    start_ms = env.clock.now_ms()
    ids = await produce_batches(svc, env, [1, 3, 2, 1, 4, 1, 2])  # 14 messages in 7 entries
    await svc.create_subscription(T, "s", SubscriptionOptions("earliest", ack_timeout_ms=600_000))
    backlog = list(ids)  # the model
    delivered = await svc.receive(T, "s", 6, 0, None)  # delivered and pending: still in the backlog
    assert [d.message.message_id for d in delivered] == ids[:6]
    acked = [*rng.sample(ids[:6], 3), ids[8]]  # ids[8] was never delivered
    await svc.ack(T, "s", acked)
    backlog = [m for m in backlog if m not in acked]
    assert await peek_all(svc, "s") == backlog
    assert (await svc.peek(T, "s", 2)).message_id == backlog[1]
    await svc.skip(T, "s", 3)
    backlog = backlog[3:]
    assert await peek_all(svc, "s") == backlog
    # Expire what was published more than 3.5 s before "now" (batches 0-2 went at +0..+2 s,
    # batch 3 at +3 s; now is +7 s): batches 0-3 go, whatever was acked in them already.
    assert env.clock.now_ms() == start_ms + 7_000
    env.clock.advance(500)
    await svc.expire_messages(T, "s", 4)
    backlog = [m for m in backlog if m.entry_id > 3 or m.ledger_id != ids[0].ledger_id]
    assert await peek_all(svc, "s") == backlog
    # What is left is delivered, in order, and nothing before it comes back.
    env.clock.advance(600_000)  # every pending message of before is redelivered if not acked
    got = [d.message.message_id for d in await svc.receive(T, "s", 100, 0, None)]
    assert got == backlog
    await svc.skip_all(T, "s")
    assert await peek_all(svc, "s") == []
    env.clock.advance(600_000)
    assert await svc.receive(T, "s", 100, 0, None) == []
    with pytest.raises(MessageNotFoundError):
        await svc.peek(T, "s", 1)
    with pytest.raises(InvalidArgumentError):
        await svc.peek(T, "s", 0)


async def test_expire_on_every_subscription_and_examine(svc: TopicService, env: Env) -> None:
    ids = await produce_batches(svc, env, [2, 1, 3])
    for sub in ("a", "b"):
        await svc.create_subscription(T, sub, SubscriptionOptions("earliest"))
    await svc.expire_messages(T, None, 2)  # now +3 s: batch 0 (+0 s) is older than 2 s; batch 1 is not
    for sub in ("a", "b"):
        assert await peek_all(svc, sub) == ids[2:]
    await svc.expire_messages(T, "a", 0)
    assert await peek_all(svc, "a") == [] and await peek_all(svc, "b") == ids[2:]
    assert (await svc.examine_message(T, "earliest", 1)).message_id == ids[0]
    assert (await svc.examine_message(T, "earliest", 2)).message_id == ids[2]
    assert (await svc.examine_message(T, "latest", 1)).message_id == ids[3]  # the last entry's first
    assert (await svc.examine_message(T, "latest", 3)).message_id == ids[0]
    with pytest.raises(MessageNotFoundError):
        await svc.examine_message(T, "latest", 4)
    with pytest.raises(InvalidArgumentError):
        await svc.expire_messages(T, "a", -1)


async def test_message_ttl_acks_old_messages_on_every_subscription(svc: TopicService, env: Env) -> None:
    ids = await produce_batches(svc, env, [2, 1, 1])  # at +0, +1, +2 s; now +3 s
    for sub in ("a", "b"):
        await svc.create_subscription(T, sub, SubscriptionOptions("earliest"))
    assert await svc.expire_by_ttl() == []  # no TTL anywhere: nothing happens
    await svc.set_policy(T, "messageTTL", 2)
    assert (await svc.get_policies(T)).message_ttl_seconds == 2
    assert await svc.expire_by_ttl() == [T]
    for sub in ("a", "b"):
        assert await peek_all(svc, sub) == ids[2:]  # +0 s is older than 2 s; +1 s is not
    env.clock.advance(10_000)
    await svc.expire_by_ttl()
    assert await peek_all(svc, "a") == [] and await peek_all(svc, "b") == []
    await svc.delete_policy(T, "messageTTL")
    assert (await svc.get_policies(T)).message_ttl_seconds == 0
    with pytest.raises(InvalidPolicyError):
        await svc.set_policy(T, "messageTTL", -1)
