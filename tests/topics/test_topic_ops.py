"""Terminate, truncate and truncate-before against a model of what each subscription and reader
sees afterwards, including after a restart over the same metadata (the state is stored)."""

from __future__ import annotations

import pytest

from managed_ledger.entry_format import Message
from managed_ledger.position import MessageId
from tests.topics.conftest import Env
from tests.topics.test_read_compacted import compact
from topics.api import SubscriptionOptions
from topics.errors import MessageIdBeyondEndError, MessageNotFoundError, TopicTerminatedError
from topics.service import TopicService

T = "public/default/ops"
FOREVER = 600_000  # an ack timeout no test reaches


async def produce(
    svc: TopicService, sizes: list[int], topic: str = T, key: str | None = None
) -> list[MessageId]:
    ids: list[MessageId] = []
    for i, size in enumerate(sizes):
        results = await svc.produce(topic, None, [Message(f"m{i}.{j}".encode(), key) for j in range(size)])
        ids += [r.message_id for r in results if r.message_id is not None]
    return ids


async def read_all(
    svc: TopicService, start: str | MessageId = "earliest", page: int = 100
) -> list[MessageId]:
    return [m.message_id for m in (await svc.read(T, start, page, False, 0)).messages]


async def receive_ids(svc: TopicService, sub: str) -> list[MessageId]:
    return [d.message.message_id for d in await svc.receive(T, sub, 100, 0, None)]


async def test_terminate_refuses_produce_and_tells_readers_and_subscriptions_the_end(env: Env) -> None:
    svc = env.service
    await svc.create_subscription(T, "s", SubscriptionOptions("earliest", ack_timeout_ms=FOREVER))
    ids = await produce(svc, [2, 3])
    done = await svc.terminate(T)
    assert done.message_id == ids[-1] == MessageId(ids[-1].ledger_id, ids[-1].entry_id, 2)
    stats = await svc.stats(T)
    with pytest.raises(TopicTerminatedError):
        await svc.produce(T, None, [Message(b"late")])
    assert (await svc.stats(T))["msgInCounter"] == stats["msgInCounter"]
    assert await svc.last_message_id(T, False) == ids[-1]
    assert (await svc.terminate(T)).message_id == ids[-1]  # twice: the same id
    # A reader: the page that reaches the last message says so, a shorter one does not.
    first = await svc.read(T, "earliest", 3, False, 0)
    assert not first.end_of_topic
    rest = await svc.read(T, ("after", first.messages[-1].message_id), 2, False, 0)
    assert [m.message_id for m in rest.messages] == ids[3:] and rest.end_of_topic
    at_end = await svc.read(T, "latest", 10, False, 5_000)  # no wait: nothing ever comes
    assert at_end.messages == [] and at_end.end_of_topic
    # A subscription: at the end once everything is acked, not merely delivered.
    assert await receive_ids(svc, "s") == ids
    assert not await svc.reached_end_of_topic(T, "s")
    await svc.ack(T, "s", ids[:4])
    assert not await svc.reached_end_of_topic(T, "s")
    await svc.ack(T, "s", ids[4:])
    assert await svc.receive(T, "s", 10, 5_000, None) == []
    assert await svc.reached_end_of_topic(T, "s")
    # Stored: a new broker over the same metadata refuses too, and answers the same id.
    svc = await env.restart()
    with pytest.raises(TopicTerminatedError):
        await svc.produce(T, None, [Message(b"after restart")])
    assert (await svc.terminate(T)).message_id == ids[-1]
    assert await svc.reached_end_of_topic(T, "s")
    assert await read_all(svc) == ids


async def test_terminate_an_empty_topic_and_a_partitioned_one(env: Env) -> None:
    svc = env.service
    await svc.create_topic("public/default/empty")
    assert (await svc.terminate("public/default/empty")).message_id is None
    with pytest.raises(TopicTerminatedError):
        await svc.produce("public/default/empty", None, [Message(b"x")])
    await svc.create_topic("public/default/parts", 2)
    ids = await produce(svc, [1, 1, 1, 1], "public/default/parts")
    done = await svc.terminate("public/default/parts")
    assert done.message_id is None and len(done.partitions) == 2
    assert sorted(m for m in done.partitions.values() if m is not None) == sorted(
        max(i for i in ids if i.ledger_id == lid) for lid in {i.ledger_id for i in ids}
    )
    with pytest.raises(TopicTerminatedError):
        await svc.produce("public/default/parts", None, [Message(b"x", "any-key")])


async def test_truncate_moves_every_subscription_to_the_end_and_deletes_the_ledgers(env: Env) -> None:
    svc = env.service
    await svc.create_subscription(T, "a", SubscriptionOptions("earliest", ack_timeout_ms=FOREVER))
    await svc.create_subscription(T, "b", SubscriptionOptions("earliest", ack_timeout_ms=FOREVER))
    await produce(svc, [2, 1])
    await svc.unload(T)  # a second ledger
    old = await produce(svc, [3])
    assert await receive_ids(svc, "a") != []  # "a" has messages pending when the truncate comes
    ledgers = [int(x["ledgerId"]) for x in (await svc.internal_stats(T))["ledgers"]]
    await svc.truncate(T)
    stats = await svc.stats(T)
    assert {s["msgBacklog"] for s in stats["subscriptions"].values()} == {0}
    assert stats["storageSize"] == 0 and (await svc.internal_stats(T))["ledgers"] == []
    meta = env.store.get_managed_ledger(T)
    assert meta is not None and meta.ledger_ids == ()
    for lid in ledgers:
        assert lid not in env.client.ledgers
    assert await read_all(svc) == []
    with pytest.raises(MessageNotFoundError):
        await svc.get_message(T, old[0])
    new = await produce(svc, [2])
    assert await receive_ids(svc, "a") == new and await receive_ids(svc, "b") == new
    svc = await env.restart()
    assert await read_all(svc) == new


async def test_truncate_before_moves_the_log_start_for_readers_and_subscriptions(env: Env) -> None:
    svc = env.service
    await svc.create_subscription(T, "behind", SubscriptionOptions("earliest", ack_timeout_ms=FOREVER))
    await svc.create_subscription(T, "ahead", SubscriptionOptions("earliest", ack_timeout_ms=FOREVER))
    ids = await produce(svc, [2, 1])
    await svc.unload(T)
    ids += await produce(svc, [3, 2])  # ids[3:6] one entry, ids[6:8] the next
    first_ledger = ids[0].ledger_id
    await svc.ack_cumulative(T, "ahead", ids[6])
    start = ids[4]  # inside a batch: ids[3] is gone, ids[4] and ids[5] stay
    await svc.truncate_before(T, start)
    assert await read_all(svc) == ids[4:]
    assert await read_all(svc, ids[1]) == ids[4:]  # a start before the log start begins there
    with pytest.raises(MessageNotFoundError):
        await svc.get_message(T, ids[3])
    assert (await svc.get_message(T, ids[4])).message_id == ids[4]
    assert first_ledger not in [int(x["ledgerId"]) for x in (await svc.internal_stats(T))["ledgers"]]
    assert first_ledger not in env.client.ledgers
    assert await receive_ids(svc, "behind") == ids[4:]
    assert await receive_ids(svc, "ahead") == ids[7:]
    await svc.truncate_before(T, ids[1])  # backwards: nothing moves
    assert await read_all(svc) == ids[4:]
    past_end = MessageId(ids[-1].ledger_id, ids[-1].entry_id + 1, 0)
    with pytest.raises(MessageIdBeyondEndError):
        await svc.truncate_before(T, past_end)
    # Stored: after a restart, readers, seeks and new subscriptions at earliest start there.
    svc = await env.restart()
    assert await read_all(svc) == ids[4:]
    await svc.create_subscription(T, "new", SubscriptionOptions("earliest", ack_timeout_ms=FOREVER))
    assert await receive_ids(svc, "new") == ids[4:]
    await svc.seek(T, "behind", "earliest")
    assert await receive_ids(svc, "behind") == ids[4:]
    assert (await svc.examine_message(T, "earliest", 1)).message_id == ids[3]  # its entry's first


async def test_the_compacted_view_serves_nothing_before_the_log_start(env: Env) -> None:
    svc = env.service
    old = await produce(svc, [1], key="gone")  # its key's only value, before the log start
    kept = await produce(svc, [1], key="kept")
    await compact(env, T, horizon=kept[0], keep=[old[0], kept[0]])
    assert [m.message_id for m in (await svc.read(T, "earliest", 10, True, 0)).messages] == old + kept
    await svc.truncate_before(T, kept[0])
    assert [m.message_id for m in (await svc.read(T, "earliest", 10, True, 0)).messages] == kept
    await svc.create_subscription(T, "c", SubscriptionOptions("earliest", read_compacted=True))
    assert await receive_ids(svc, "c") == kept
