"""Partitioned topics: stable key routing, round robin, merged reads and subscriptions."""

from __future__ import annotations

import zlib

import pytest

from managed_ledger.entry_format import Message
from tests.topics.conftest import Env
from topics.api import SubscriptionOptions
from topics.errors import InvalidNameError, PartitionCountError, TopicExistsError
from topics.names import parse_start
from topics.partitions import Router, partition_for_key
from topics.service import TopicService

P = "public/default/parted"


def test_key_routing_is_crc32_and_stable() -> None:
    assert partition_for_key("AAPL", 4) == zlib.crc32(b"AAPL") % 4 == 0
    router = Router(3)
    keyed = router.route([Message(b"", "k")] * 5)
    assert list(keyed) == [partition_for_key("k", 3)]
    keyless = router.route([Message(b"")] * 6)
    assert keyless == {0: [0, 3], 1: [1, 4], 2: [2, 5]}


async def test_produce_spreads_over_partitions_one_entry_each(svc: TopicService, env: Env) -> None:
    await svc.create_topic(P, 3)
    assert await svc.get_partitions(P) == 3
    batch = [Message(f"v{i}".encode(), f"key-{i % 5}") for i in range(30)]
    results = await svc.produce(P, None, batch)
    ids = [r.message_id for r in results]
    assert all(i is not None for i in ids)
    entries = {(i.ledger_id, i.entry_id) for i in ids if i is not None}
    ledgers = {lid for lid, _ in entries}
    assert len(entries) == len(ledgers) <= 3  # one entry per partition touched
    # The same key lands in the same partition's ledger, and each id reads back its message.
    by_key: dict[str, set[int]] = {}
    for m, i in zip(batch, ids, strict=True):
        assert i is not None
        by_key.setdefault(m.key or "", set()).add(i.ledger_id)
        assert (await svc.get_message(P, i)).value == m.value
    assert all(len(s) == 1 for s in by_key.values())
    internal = await svc.internal_stats(P)
    assert internal["metadata"] == {"partitions": 3}
    assert sorted(internal["partitions"]) == [f"{P}-partition-{i}" for i in range(3)]


async def test_partition_names_are_reserved(svc: TopicService) -> None:
    with pytest.raises(InvalidNameError):
        await svc.create_topic(f"{P}-partition-1", 2)
    await svc.create_topic(P, 2)
    with pytest.raises(TopicExistsError):
        await svc.create_topic(P, 2)
    with pytest.raises(InvalidNameError):
        await svc.produce(f"{P}-partition-0", None, [Message(b"x")])


async def test_reader_merges_partitions_and_pages_by_token(svc: TopicService) -> None:
    await svc.create_topic(P, 3)
    produced = []
    for round_ in range(4):
        batch = [Message(f"r{round_}-{i}".encode()) for i in range(5)]
        await svc.produce(P, None, batch)
        produced += [m.value for m in batch]
    got: list[bytes] = []
    start = parse_start("earliest")
    while True:
        page = await svc.read(P, start, 3, False, 0)
        if page.next is None:
            break
        got += [m.value for m in page.messages]
        start = parse_start(page.next)
    assert sorted(got) == sorted(produced) and len(got) == len(produced)
    # latest, then new messages in any partition
    page = await svc.read(P, "latest", 10, False, 0)
    assert page.messages == [] and page.next is None


async def test_reader_token_from_latest_keeps_every_partition(svc: TopicService) -> None:
    await svc.create_topic(P, 2)
    await svc.produce(P, None, [Message(b"old0"), Message(b"old1")])
    await svc.produce(P, None, [Message(b"new0")])
    first = await svc.read(P, "earliest", 3, False, 0)
    assert first.next is not None
    await svc.produce(P, None, [Message(b"new1"), Message(b"new2")])
    rest = await svc.read(P, parse_start(first.next), 10, False, 0)
    assert sorted(m.value for m in rest.messages) == [b"new1", b"new2"]


async def test_subscription_over_partitions(svc: TopicService) -> None:
    await svc.create_topic(P, 3)
    await svc.create_subscription(P, "s", SubscriptionOptions(initial_position="earliest"))
    await svc.produce(P, None, [Message(f"{i}".encode(), f"k{i}") for i in range(12)])
    got = []
    for _ in range(10):
        page = await svc.receive(P, "s", 5, 0, None)
        got += page
    assert sorted(int(d.message.value) for d in got) == list(range(12))
    await svc.ack(P, "s", [d.message.message_id for d in got])
    stats = await svc.stats(P)
    sub = stats["subscriptions"]["s"]
    assert (sub["type"], sub["msgBacklog"], sub["unackedMessages"]) == ("shared", 0, 0)
    assert stats["msgInCounter"] == 12
    await svc.seek(P, "s", "earliest")
    assert len(await svc.receive(P, "s", 100, 0, None)) == 12
    await svc.seek(P, "s", got[0].message.message_id)
    assert len(await svc.receive(P, "s", 100, 0, None)) >= 1


async def test_acks_after_restart_find_their_partition(env: Env) -> None:
    svc = env.service
    await svc.create_topic(P, 3)
    await svc.create_subscription(P, "s", SubscriptionOptions(initial_position="earliest"))
    results = await svc.produce(P, None, [Message(f"{i}".encode(), f"k{i}") for i in range(9)])
    ids = [r.message_id for r in results if r.message_id is not None]
    svc = await env.restart()
    await svc.ack(P, "s", ids)
    assert await svc.receive(P, "s", 100, 0, None) == []
    assert (await svc.stats(P))["subscriptions"]["s"]["msgBacklog"] == 0


async def test_partitions_grow_and_every_subscription_gets_every_message(svc: TopicService, env: Env) -> None:
    await svc.create_topic(P, 2)
    await svc.create_subscription(P, "s", SubscriptionOptions(initial_position="earliest"))
    await svc.create_subscription(P, "t", SubscriptionOptions(initial_position="latest", type="exclusive"))
    # (created before any message: "latest" still sees them all)
    await svc.produce(P, None, [Message(f"a{i}".encode(), f"k{i}") for i in range(20)])
    first = await svc.receive(P, "s", 5, 0, None)
    await svc.ack(P, "s", [d.message.message_id for d in first])
    await svc.update_partitions(P, 5)
    assert await svc.get_partitions(P) == 5
    await svc.produce(P, None, [Message(f"b{i}".encode(), f"k{i}") for i in range(40)])
    stats = await svc.internal_stats(P)
    assert sorted(stats["partitions"]) == [f"{P}-partition-{i}" for i in range(5)]
    landed = [stats["partitions"][f"{P}-partition-{i}"]["numberOfEntries"] for i in range(5)]
    assert all(n > 0 for n in landed[2:]), landed  # keys now spread over the new partitions too
    got = []
    for _ in range(20):
        got += [d.message.value.decode() for d in await svc.receive(P, "s", 100, 0, None)]
    acked = {d.message.value.decode() for d in first}
    expected = [f"a{i}" for i in range(20) if f"a{i}" not in acked] + [f"b{i}" for i in range(40)]
    assert len(acked) == 5 and sorted(got) == sorted(expected)  # acked before the growth: not again
    exclusive = await svc.receive(P, "t", 100, 0, "c1")
    everything = [f"a{i}" for i in range(20)] + [f"b{i}" for i in range(40)]
    assert sorted(d.message.value.decode() for d in exclusive) == sorted(everything)
    assert (await svc.get_policies(P)) is not None
    options = (await svc.stats(P))["subscriptions"]["t"]["type"]
    assert options == "exclusive"  # the new partitions' cursors carry the subscription's options
    for bad in (5, 3):
        with pytest.raises(PartitionCountError):
            await svc.update_partitions(P, bad)
    await svc.produce("public/default/plain", None, [Message(b"x")])
    with pytest.raises(PartitionCountError):
        await svc.update_partitions("public/default/plain", 4)
