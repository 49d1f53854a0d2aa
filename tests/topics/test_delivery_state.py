"""A subscription's delivery state (acks inside batches, redelivery counts) carried to a new owner.

A new owner is a new `TopicService` over the same metadata store and bookies: either after the
old one closed (an unload, a SIGTERM) or without it closing at all (a crash, `crash` below: the
old service is dropped as it stands, nothing of it flushed or fenced by hand).
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field

import pytest

from managed_ledger.entry_format import Message
from managed_ledger.factory import ManagedLedgerFactory
from managed_ledger.position import MessageId, Position
from tests.topics.conftest import Env
from tests.topics.test_read_compacted import compact
from topics import delivery_state
from topics.api import Delivery, SubscriptionOptions
from topics.delivery_state import EntryAcks
from topics.service import TopicService

T = "public/default/moved"
SUB = SubscriptionOptions(initial_position="earliest", ack_timeout_ms=1_000)


async def crash(env: Env) -> TopicService:
    """A new owner while the old one is left as it stands: nothing more of it is flushed."""
    env.factory = ManagedLedgerFactory(env.client, env.store, ["b1:3181"], clock=env.clock, timers=False)
    env.service = TopicService(env.store, env.factory, env.client, env.service._config, clock=env.clock)
    return env.service


async def new_owner(env: Env, how: str) -> TopicService:
    return await (env.restart() if how == "close" else crash(env))


async def flush(svc: TopicService, topic: str = T) -> None:
    for ml in (await svc._topic(topic)).mls:
        await ml.flush_cursors()


async def produce(svc: TopicService, n: int, topic: str = T) -> list[MessageId]:
    results = await svc.produce(topic, None, [Message(f"m{i}".encode()) for i in range(n)])
    return [r.message_id for r in results if r.message_id is not None]


def counts(deliveries: list[Delivery]) -> dict[MessageId, int]:
    return {d.message.message_id: d.redelivery_count for d in deliveries}


@pytest.mark.parametrize("how", ["close", "crash"])
async def test_acks_inside_a_batch_and_counts_go_to_the_new_owner(sql_env: Env, how: str) -> None:
    svc = sql_env.service
    await svc.create_subscription(T, "s", SUB)
    ids = await produce(svc, 10)  # one entry, a batch of 10
    assert len({i.position for i in ids}) == 1
    first = await svc.receive(T, "s", 10, 0, None)
    assert counts(first) == dict.fromkeys(ids, 0)
    acked = [ids[1], ids[4], ids[8]]
    await svc.ack(T, "s", acked)
    await flush(svc)
    # The stored form (docs/storage-format.md): the entry, its size, the acked indexes, and one
    # redelivery count shared by every other message of it.
    (stored,) = sql_env.store.list_cursors(T)
    pos = ids[0].position
    assert stored.delivery_state == {"v": 1, "entries": ((pos.ledger_id, pos.entry_id, 10, (1, 4, 8), 0),)}

    svc = await new_owner(sql_env, how)
    again = await svc.receive(T, "s", 100, 0, None)
    rest = [i for i in ids if i not in acked]
    assert counts(again) == dict.fromkeys(rest, 1)  # the 7 come again as redeliveries
    assert await svc.receive(T, "s", 100, 0, None) == []  # pending now, the 3 never
    await svc.ack(T, "s", rest[:5])
    if how == "crash":
        await flush(svc)
    svc = await new_owner(sql_env, how)  # and once more: the last 2 a third time
    assert counts(await svc.receive(T, "s", 100, 0, None)) == dict.fromkeys(rest[5:], 2)
    await svc.ack(T, "s", rest[5:])
    assert (await svc.stats(T))["subscriptions"]["s"]["msgBacklog"] == 0
    await flush(svc)
    assert sql_env.store.list_cursors(T)[0].delivery_state is None  # nothing left to carry


@pytest.mark.parametrize("how", ["close", "crash"])
async def test_redelivery_counts_after_nack_and_ack_timeout_survive(sql_env: Env, how: str) -> None:
    svc = sql_env.service
    await svc.create_subscription(T, "s", SUB)
    a, b = await produce(svc, 2)
    (c,) = await produce(svc, 1)  # an entry of its own, never delivered before the move
    assert counts(await svc.receive(T, "s", 2, 0, None)) == {a: 0, b: 0}
    await svc.nack(T, "s", [a])
    assert counts(await svc.receive(T, "s", 1, 0, None)) == {a: 1}
    sql_env.clock.advance(1_001)  # both time out: b is redelivered, a a third time
    assert counts(await svc.receive(T, "s", 2, 0, None)) == {a: 2, b: 1}
    await flush(svc)

    svc = await new_owner(sql_env, how)
    assert counts(await svc.receive(T, "s", 10, 0, None)) == {a: 3, b: 2, c: 0}


async def test_a_seek_clears_the_stored_state(sql_env: Env) -> None:
    svc = sql_env.service
    await svc.create_subscription(T, "s", SUB)
    ids = await produce(svc, 10)
    await svc.receive(T, "s", 10, 0, None)
    await svc.ack(T, "s", ids[:3])
    await flush(svc)
    assert sql_env.store.list_cursors(T)[0].delivery_state is not None
    await svc.seek(T, "s", "earliest")  # written at once, with the state it cleared
    assert sql_env.store.list_cursors(T)[0].delivery_state is None
    svc = await crash(sql_env)
    assert counts(await svc.receive(T, "s", 100, 0, None)) == dict.fromkeys(ids, 0)


async def test_a_seek_into_a_batch_stores_the_skipped_indexes_as_acked(env: Env) -> None:
    svc = env.service
    await svc.create_subscription(T, "s", SUB)
    ids = await produce(svc, 5)
    await svc.seek(T, "s", ids[2])
    await flush(svc)
    svc = await crash(env)
    assert counts(await svc.receive(T, "s", 100, 0, None)) == dict.fromkeys(ids[2:], 0)


async def test_a_partitioned_topic_keeps_each_partitions_state_in_its_own_cursor(env: Env) -> None:
    svc = env.service
    p = "public/default/parts"
    await svc.create_topic(p, 2)
    await svc.create_subscription(p, "s", SUB)
    ids = await produce(svc, 8, topic=p)  # round robin: one entry of 4 in each partition
    assert len({i.position for i in ids}) == 2
    await svc.receive(p, "s", 8, 0, None)
    await svc.ack(p, "s", ids[:2])
    await flush(svc, p)
    states = {
        c.managed_ledger: c.delivery_state
        for n in (0, 1)
        for c in env.store.list_cursors(f"{p}-partition-{n}")
    }
    assert all(s is not None and len(s["entries"]) == 1 for s in states.values())
    svc = await crash(env)
    assert counts(await svc.receive(p, "s", 100, 0, None)) == dict.fromkeys(ids[2:], 1)


async def test_a_read_compacted_subscription_skips_restored_acks_and_still_passes_the_horizon(
    env: Env,
) -> None:
    svc = env.service
    await svc.create_subscription(T, "c", SubscriptionOptions("earliest", read_compacted=True))
    results = await svc.produce(T, None, [Message(f"v{i}".encode(), f"k{i}") for i in range(4)])
    ids = [r.message_id for r in results if r.message_id is not None]
    await svc.receive(T, "c", 10, 0, None)  # no compaction yet: read from the topic
    await svc.ack(T, "c", [ids[2]])
    await flush(svc)
    await compact(env, T, horizon=ids[3], keep=ids[1:])  # k0's message compacted away, never acked
    svc = await crash(env)
    again = await svc.receive(T, "c", 10, 0, None)  # from the compacted view: 2 was acked
    assert counts(again) == {ids[1]: 1, ids[3]: 1}
    await svc.ack(T, "c", list(counts(again)))
    # An acked survivor not handed out must not be waited for: the cursor passes the horizon.
    assert (await svc.stats(T))["subscriptions"]["c"]["msgBacklog"] == 0


async def test_over_the_cap_the_oldest_entries_are_kept(env: Env, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(delivery_state, "MAX_MESSAGES", 6)
    svc = env.service
    await svc.create_subscription(T, "s", SUB)
    entries = [await produce(svc, 4) for _ in range(3)]
    await svc.receive(T, "s", 12, 0, None)
    await svc.ack(T, "s", [entries[0][0]])
    await flush(svc)
    (stored,) = env.store.list_cursors(T)
    assert stored.delivery_state is not None and stored.delivery_state["omitted"] == 8
    svc = await crash(env)
    again = counts(await svc.receive(T, "s", 100, 0, None))
    assert again == {**dict.fromkeys(entries[0][1:], 1), **dict.fromkeys(entries[1] + entries[2], 0)}


# --- the stored form ------------------------------------------------------------------------------
def _mid(entry: int, index: int) -> MessageId:
    return MessageId(7, entry, index)


def test_encode_is_compact_and_decode_reads_it_back() -> None:
    entries = {
        Position(7, 1): EntryAcks(0, 4, {0, 2}),  # the other two delivered, same count: one number
        Position(7, 2): EntryAcks(0, 3),  # two of three delivered: per index
        Position(7, 3): EntryAcks(0, 2, {1}),  # acked on the cursor meanwhile: left out
        Position(7, 4): EntryAcks(0, 2, {0}),  # an ack only
        Position(7, 5): EntryAcks(0, 1, compacted=True),  # read through the compacted view
    }
    counts = {_mid(1, 1): 2, _mid(1, 3): 2, _mid(2, 0): 0, _mid(2, 2): 1, _mid(3, 0): 0, _mid(5, 9): 3}
    stored = delivery_state.encode(entries, counts, lambda p: p == Position(7, 3))
    assert stored == {
        "v": 1,
        "entries": [
            [7, 1, 4, [0, 2], 2],
            [7, 2, 3, [], {"0": 0, "2": 1}],
            [7, 4, 2, [0], {}],
            [7, 5, 0, [], {"9": 3}],
        ],
    }
    decoded = {e.position: e for e in delivery_state.decode(stored)}
    assert decoded[Position(7, 1)].counts == {1: 2, 3: 2}
    assert decoded[Position(7, 1)].acked == {0, 2} and decoded[Position(7, 1)].size == 4
    assert decoded[Position(7, 2)].counts == {0: 0, 2: 1}
    assert decoded[Position(7, 4)].counts == {} and decoded[Position(7, 5)].counts == {9: 3}
    assert delivery_state.encode({}, {}, lambda p: False) is None


def test_the_cap_keeps_whole_entries_oldest_first() -> None:
    entries = {Position(7, e): EntryAcks(0, 3, {0}) for e in range(4)}
    counts = {_mid(e, i): 0 for e in range(4) for i in (1, 2)}
    stored = delivery_state.encode(entries, counts, lambda p: False, max_messages=7)
    assert stored is not None
    assert [e[1] for e in stored["entries"]] == [0, 1] and stored["omitted"] == 6


@pytest.mark.parametrize(
    "stored",
    [
        {"v": 2, "entries": []},
        {"entries": [[7, 1, 2, [], 0]]},
        {"v": 1, "entries": [[7, 1, 2, []]]},
        {"v": 1, "entries": [[7, 1, 0, [], 3]]},  # one count for an entry of unknown size
        {"v": 1, "entries": "x"},
        {"v": 1, "entries": [[7, 1, 2, ["a"], 0]]},
    ],
)
def test_a_state_this_code_cannot_read_restores_nothing(stored: dict[str, object]) -> None:
    assert list(delivery_state.decode(stored)) == []


# --- the claim of docs/semantics.md: what is not flushed is lost towards redelivery only ---------
@dataclass
class Model:
    """What the consumer did since the last seek, and what each partition's last flush saw."""

    acked: set[MessageId] = field(default_factory=set)
    delivered: dict[MessageId, int] = field(default_factory=dict)  # deliveries so far
    flushed_acks: set[MessageId] = field(default_factory=set)
    flushed_deliveries: dict[MessageId, int] = field(default_factory=dict)
    pending: set[MessageId] = field(default_factory=set)

    def flushed(self, partition: int, part: dict[MessageId, int]) -> None:
        mine = {m for m, p in part.items() if p == partition}
        self.flushed_acks = {m for m in self.flushed_acks if m not in mine} | (self.acked & mine)
        for m in mine:
            self.flushed_deliveries[m] = self.delivered.get(m, 0)


async def _random_steps(env: Env, topic: str, rng: random.Random, part: dict[MessageId, int]) -> Model:
    svc = env.service
    model = Model()
    partitions = sorted(set(part.values()))
    for _ in range(30):
        op = rng.choice(
            ["receive", "receive", "ack", "ack", "nack", "flush", "timeout", "seek", "cumulative"]
        )
        if op == "receive":
            for d in await svc.receive(topic, "s", rng.randint(1, 6), 0, None):
                mid = d.message.message_id
                assert d.redelivery_count == model.delivered.get(mid, 0)
                model.delivered[mid] = model.delivered.get(mid, 0) + 1
                model.pending.add(mid)
        elif op == "ack":  # mostly delivered ones, sometimes any id
            pool = sorted(model.pending) if model.pending and rng.random() < 0.8 else sorted(part)
            chosen = rng.sample(pool, rng.randint(1, min(3, len(pool))))
            await svc.ack(topic, "s", chosen)
            model.acked.update(chosen)
            model.pending.difference_update(chosen)
        elif op == "cumulative" and model.pending:
            mid = rng.choice(sorted(model.pending))
            await svc.ack_cumulative(topic, "s", mid)
            done = {m for m, p in part.items() if p == part[mid] and m <= mid}
            model.acked |= done
            model.pending -= done
        elif op == "nack" and model.pending:
            await svc.nack(topic, "s", rng.sample(sorted(model.pending), 1))
        elif op == "flush":
            partition = rng.choice(partitions)
            await (await svc._topic(topic)).mls[partition].flush_cursors()
            model.flushed(partition, part)
        elif op == "timeout":
            env.clock.advance(1_001)
        elif op == "seek" and rng.random() < 0.3:
            await svc.seek(topic, "s", "earliest")  # written at once, for every partition
            model = Model()
    return model


@pytest.mark.parametrize("partitions", [0, 2])
@pytest.mark.parametrize("seed", range(25))
async def test_unflushed_state_is_lost_towards_redelivery_never_towards_a_skip(
    env: Env, seed: int, partitions: int
) -> None:
    rng = random.Random(seed)
    svc = env.service
    topic = f"public/default/claim-{partitions}"
    await svc.create_topic(topic, partitions)
    await svc.create_subscription(topic, "s", SUB)
    ids = [m for _ in range(6) for m in await produce(svc, rng.randint(1, 5), topic=topic)]
    t = await svc._topic(topic)
    part = {m: await svc._partition_of(t, m) or 0 for m in ids}
    model = await _random_steps(env, topic, rng, part)

    svc = await crash(env)
    after: dict[MessageId, int] = {}
    for _ in range(100):  # drain: ack what comes, let the rest time out once more
        got = await svc.receive(topic, "s", 100, 0, None)
        if not got:
            env.clock.advance(1_001)
            if not (got := await svc.receive(topic, "s", 100, 0, None)):
                break
        for d in got:
            after.setdefault(d.message.message_id, d.redelivery_count)
        await svc.ack(topic, "s", [d.message.message_id for d in got])
    else:
        pytest.fail("the subscription never ran dry")
    skipped = set(ids) - model.acked - set(after)
    assert not skipped, f"never delivered again though never acked: {sorted(skipped)}"
    assert not set(after) & model.flushed_acks, "an ack that was flushed did not hold"
    for mid, count in after.items():  # a count restarts no lower than flushed, no higher than true
        assert model.flushed_deliveries.get(mid, 0) <= count <= model.delivered.get(mid, 0), mid
