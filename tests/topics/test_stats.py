"""Topic stats against a model: counters and rates per interval, publishers and consumers,
msgBacklog in messages (batches of different sizes, acks inside batches, a restart), expiry and
redelivery counts, and partitioned-stats (the sum equals the partitions', each partition's
counters are its own)."""

from __future__ import annotations

import random

import pytest

from managed_ledger.entry_format import Message
from managed_ledger.position import MessageId
from tests.topics.conftest import Env
from topics import meters
from topics.api import SubscriptionOptions
from topics.errors import TopicNotFoundError
from topics.service import TopicService

T = "public/default/stats"
P = "public/default/stats-p"
EARLIEST = SubscriptionOptions(initial_position="earliest", ack_timeout_ms=1_000)


async def produce(
    svc: TopicService, sizes: list[int], producer: str | None = None, topic: str = T
) -> list[MessageId]:
    """One batch per size, values of 10 bytes; the ids in order."""
    ids: list[MessageId] = []
    for n in sizes:
        results = await svc.produce(topic, producer, [Message(b"0123456789", f"k{i}") for i in range(n)])
        ids += [r.message_id for r in results if r.message_id is not None]
    return ids


async def test_counters_rates_publishers_and_consumers(svc: TopicService, env: Env) -> None:
    await svc.create_subscription(T, "s", EARLIEST)
    await produce(svc, [3, 2], producer="p1")
    await produce(svc, [5], producer="p2")
    await produce(svc, [1])  # anonymous: counted on the topic, not a publisher
    got = await svc.receive(T, "s", 4, 0, "c1")
    await svc.tick_stats(2.0)
    stats = await svc.stats(T)
    # value 10 bytes + key "kN" 2 bytes = 12 bytes a message
    assert (stats["msgInCounter"], stats["bytesInCounter"]) == (11, 132)
    assert (stats["msgRateIn"], stats["msgThroughputIn"]) == (5.5, 66.0)
    assert stats["averageMsgSize"] == 12.0
    assert (stats["msgOutCounter"], stats["bytesOutCounter"], stats["msgRateOut"]) == (4, 40, 2.0)
    publishers = {p["producerName"]: p for p in stats["publishers"]}
    assert sorted(publishers) == ["p1", "p2"]
    assert (publishers["p1"]["msgCounter"], publishers["p1"]["msgRateIn"]) == (5, 2.5)
    sub = stats["subscriptions"]["s"]
    assert (sub["msgOutCounter"], sub["msgRateOut"], sub["msgThroughputOut"]) == (4, 2.0, 20.0)
    assert [(c["consumerName"], c["msgCounter"]) for c in sub["consumers"]] == [("c1", 4)]

    # Nothing happens in the next interval: rates fall to 0, counters stay.
    await svc.nack(T, "s", [got[0].message.message_id])
    again = await svc.receive(T, "s", 1, 0, "c1")
    assert again[0].redelivery_count == 1
    await svc.tick_stats(1.0)
    stats = await svc.stats(T)
    assert (stats["msgRateIn"], stats["msgInCounter"]) == (0.0, 11)
    sub = stats["subscriptions"]["s"]
    assert (sub["msgRedeliverCounter"], sub["msgRateRedeliver"], sub["msgOutCounter"]) == (1, 1.0, 5)

    # Clients not heard within the idle time leave the lists.
    env.clock.advance(svc._config.exclusive_consumer_idle_ms + 1)
    await svc.tick_stats(1.0)
    stats = await svc.stats(T)
    assert stats["publishers"] == [] and stats["subscriptions"]["s"]["consumers"] == []


@pytest.mark.parametrize("seed", [1, 2, 3])
async def test_msg_backlog_counts_messages_against_a_model(svc: TopicService, env: Env, seed: int) -> None:
    rng = random.Random(seed)
    await svc.create_subscription(T, "s", EARLIEST)
    uniform = rng.randint(1, 5)
    ids = await produce(svc, [uniform] * rng.randint(3, 10))
    model = set(ids)
    # Nothing read yet: entries x messages per entry, exact for batches of one size.
    assert (await svc.stats(T))["subscriptions"]["s"]["msgBacklog"] == len(model)
    ids += await produce(svc, [rng.randint(1, 7) for _ in range(rng.randint(3, 10))])
    model = set(ids)
    got = []
    while page := await svc.receive(T, "s", 1000, 0, None):
        got += page
    assert len(got) == len(model)
    # Everything read: exact whatever the batch sizes, acks inside batches included.
    acked = rng.sample(ids, len(ids) // 2)
    await svc.ack(T, "s", acked)
    model -= set(acked)
    stats = (await svc.stats(T))["subscriptions"]["s"]
    assert (stats["msgBacklog"], stats["unackedMessages"]) == (len(model), len(model))

    # A new broker that has appended nothing measures the last entry's batch.
    svc = await env.restart()
    ids = await produce(svc, [4, 4, 4], topic="public/default/other")
    await svc.create_subscription("public/default/other", "s", EARLIEST)
    svc = await env.restart()
    await svc.tick_stats(1.0)
    assert (await svc.stats("public/default/other"))["subscriptions"]["s"]["msgBacklog"] == 12


async def test_expired_and_dead_lettered_are_counted(svc: TopicService, env: Env) -> None:
    await svc.create_subscription(T, "s", EARLIEST)
    await produce(svc, [3, 3])
    env.clock.advance(10_000)
    await produce(svc, [3])
    await svc.expire_messages(T, "s", 5)
    sub = (await svc.stats(T))["subscriptions"]["s"]
    assert (sub["totalMsgExpired"], sub["msgBacklog"]) == (6, 3)


async def test_partitioned_stats_sum_their_partitions(svc: TopicService) -> None:
    await svc.create_topic(P, 3)
    await svc.create_subscription(P, "s", EARLIEST)
    results = await svc.produce(P, "p", [Message(f"v{i}".encode(), f"key-{i}") for i in range(60)])
    ids = [r.message_id for r in results if r.message_id is not None]
    got = await svc.receive(P, "s", 25, 0, "c")
    await svc.ack(P, "s", [d.message.message_id for d in got[:10]])
    await svc.tick_stats(1.0)
    internal = await svc.internal_stats(P)
    ledger_of = {
        lg["ledgerId"]: name for name, one in internal["partitions"].items() for lg in one["ledgers"]
    }
    stats = await svc.partitioned_stats(P)
    parts = stats["partitions"]
    assert sorted(parts) == [f"{P}-partition-{i}" for i in range(3)]
    for name, one in parts.items():
        mine = [m for m in ids if ledger_of[m.ledger_id] == name]
        assert one["msgInCounter"] == len(mine)
        out = [d for d in got if ledger_of[d.message.message_id.ledger_id] == name]
        assert one["msgOutCounter"] == len(out)
        pending = [d for d in got[10:] if ledger_of[d.message.message_id.ledger_id] == name]
        assert one["subscriptions"]["s"]["unackedMessages"] == len(pending)
    for key in ("msgInCounter", "bytesInCounter", "msgOutCounter", "storageSize", "msgRateIn"):
        assert stats[key] == sum(one[key] for one in parts.values()), key
    assert (
        stats["subscriptions"]["s"]["msgBacklog"]
        == 50
        == sum(one["subscriptions"]["s"]["msgBacklog"] for one in parts.values())
    )
    assert stats["metadata"] == {"partitions": 3}
    with pytest.raises(TopicNotFoundError):
        await svc.partitioned_stats(T)


def test_a_client_that_makes_up_names_cannot_grow_the_lists() -> None:
    clients = meters.Clients()
    for i in range(meters.MAX_CLIENTS + 50):
        clients.heard(f"c{i}", i)
    names = [n for n, _ in clients.items()]
    assert (
        len(names) == meters.MAX_CLIENTS and names[0] == "c50" and names[-1] == f"c{meters.MAX_CLIENTS + 49}"
    )
