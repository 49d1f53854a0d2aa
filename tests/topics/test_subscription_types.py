"""Failover and key_shared subscriptions (and the consumer id every type but shared needs), on
the topic service over the in-memory store with a manual clock. key_shared is checked against a
model over a seeded random schedule of three consumers coming and going."""

from __future__ import annotations

import asyncio
import random
from dataclasses import dataclass, field

import pytest

from managed_ledger.entry_format import Message
from managed_ledger.position import MessageId
from tests.topics.conftest import Env
from topics import key_shared
from topics.api import Delivery, SubscriptionOptions
from topics.errors import ConsumerIdRequiredError
from topics.key_shared import KeyRouter
from topics.service import TopicService

T = "public/default/orders"
IDLE_MS = 60_000  # the consumer idle time of the test service (TopicsConfig's default)


async def produce(svc: TopicService, *values: str, key: str | None = None) -> list[MessageId]:
    results = await svc.produce(T, None, [Message(v.encode(), key=key) for v in values])
    return [r.message_id for r in results if r.message_id is not None]


def values(deliveries: list[Delivery]) -> list[str]:
    return [d.message.value.decode() for d in deliveries]


@pytest.mark.parametrize("kind", ["exclusive", "failover", "key_shared"])
async def test_every_type_but_shared_needs_a_consumer_id(svc: TopicService, kind: str) -> None:
    await produce(svc, "a")
    await svc.create_subscription(T, "s", SubscriptionOptions("earliest", kind))  # type: ignore[arg-type]
    for missing in (None, ""):
        with pytest.raises(ConsumerIdRequiredError):
            await svc.receive(T, "s", 10, 0, missing)
    assert values(await svc.receive(T, "s", 10, 0, "c1")) == ["a"]


async def test_failover_one_active_consumer_the_next_takes_over_when_it_goes_silent(
    svc: TopicService, env: Env
) -> None:
    await produce(svc, "a", "b", "c")
    await svc.create_subscription(T, "f", SubscriptionOptions("earliest", "failover", ack_timeout_ms=600_000))
    assert values(await svc.receive(T, "f", 2, 0, "c2")) == ["a", "b"]  # alone: active
    # c1 joins and sorts first: it is active now, and gets c2's unacked messages, in order.
    taken = await svc.receive(T, "f", 10, 0, "c1")
    assert values(taken) == ["a", "b", "c"] and [d.redelivery_count for d in taken] == [1, 1, 0]
    assert await svc.receive(T, "f", 10, 0, "c2") == []  # a standby gets nothing
    await svc.ack(T, "f", [taken[0].message.message_id])
    await produce(svc, "d")
    assert await svc.receive(T, "f", 10, 0, "c2") == []
    env.clock.advance(IDLE_MS // 2)
    assert values(await svc.receive(T, "f", 10, 0, "c2")) == []  # c1 is still live
    env.clock.advance(IDLE_MS // 2 + 1)  # c1 silent for the idle time; c2 was heard since
    again = await svc.receive(T, "f", 10, 0, "c2")
    assert values(again) == ["b", "c", "d"] and [d.redelivery_count for d in again] == [2, 1, 0]
    # A restarted broker keeps the type.
    svc = await env.restart()
    await svc.receive(T, "f", 10, 0, "c5")
    assert await svc.receive(T, "f", 10, 0, "c9") == []


async def test_a_failover_standby_in_a_long_poll_takes_over_when_the_active_goes_silent(
    svc: TopicService, env: Env
) -> None:
    # The standby's long poll is woken by the active consumer's idle deadline, not a new message.
    await produce(svc, "a")
    await svc.create_subscription(T, "f", SubscriptionOptions("earliest", "failover"))
    assert values(await svc.receive(T, "f", 10, 0, "c1")) == ["a"]
    env.clock.advance(IDLE_MS + 1)
    assert values(await svc.receive(T, "f", 10, 0, "c2")) == ["a"]


async def test_key_shared_sends_each_key_to_one_consumer_and_spreads_keys(svc: TopicService) -> None:
    await svc.create_subscription(
        T, "k", SubscriptionOptions("earliest", "key_shared", ack_timeout_ms=600_000)
    )
    for c in ("c1", "c2", "c3"):
        assert await svc.receive(T, "k", 10, 0, c) == []  # all three join before any message
    for i in range(40):
        await produce(svc, f"{i}-0", f"{i}-1", key=f"key-{i}")
    await produce(svc, "none-0", "none-1")  # key-less messages count as one key
    got: dict[str, list[str]] = {}
    for c in ("c1", "c2", "c3"):
        got[c] = values(await svc.receive(T, "k", 1_000, 0, c))
    owners: dict[str, set[str]] = {}
    for c, vs in got.items():
        for v in vs:
            owners.setdefault(v.rsplit("-", 1)[0], set()).add(c)
    assert len(owners) == 41 and all(len(cs) == 1 for cs in owners.values())
    assert all(len(vs) > 10 for vs in got.values()), {c: len(vs) for c, vs in got.items()}
    for vs in got.values():  # per key, in order
        for k in owners:
            mine = [v for v in vs if v.rsplit("-", 1)[0] == k]
            assert mine == sorted(mine)


async def test_a_key_shared_long_poll_wakes_when_the_read_ahead_frees_up(
    svc: TopicService, monkeypatch: pytest.MonkeyPatch
) -> None:
    # c2 waits because the read-ahead is full of c1's keys; c1 taking them must wake c2 (no new
    # message arrives to do it), not leave it asleep until its wait runs out.
    monkeypatch.setattr(key_shared, "READ_AHEAD", 3)
    ring = KeyRouter()
    ring.set_consumers(["c1", "c2"])
    key1 = next(k for k in (f"k{i}" for i in range(100)) if ring.consumer_of(k) == "c1")
    key2 = next(k for k in (f"k{i}" for i in range(100)) if ring.consumer_of(k) == "c2")
    await svc.create_subscription(T, "k", SubscriptionOptions("earliest", "key_shared"))
    for c in ("c1", "c2"):
        assert await svc.receive(T, "k", 10, 0, c) == []
    await produce(svc, "a0", "a1", "a2", key=key1)
    await produce(svc, "b0", key=key2)
    waiting = asyncio.create_task(svc.receive(T, "k", 1, 30_000, "c2"))
    await asyncio.sleep(0.05)
    assert not waiting.done()  # it read c1's entry: the read-ahead is full, nothing for c2 yet
    assert values(await svc.receive(T, "k", 10, 0, "c1")) == ["a0", "a1", "a2"]
    assert values(await asyncio.wait_for(waiting, 5)) == ["b0"]


async def test_a_key_shared_consumer_back_from_leaving_does_not_take_a_key_another_holds(
    svc: TopicService, env: Env
) -> None:
    # c1 leaves holding a0 and a1; c3 takes a0 (a1 still waits for redelivery). When c1 comes
    # back, the ring gives it the key again, but a0 is out with c3: the key stays with c3 (a1
    # too, after a0) until both are acked, whoever had a1 before.
    ring = KeyRouter()
    ring.set_consumers(["c1", "c3"])
    key = next(k for k in (f"k{i}" for i in range(100)) if ring.consumer_of(k) == "c1")
    await svc.create_subscription(
        T, "k", SubscriptionOptions("earliest", "key_shared", ack_timeout_ms=600_000)
    )
    for c in ("c1", "c3"):
        assert await svc.receive(T, "k", 10, 0, c) == []
    await produce(svc, "a0", "a1", key=key)
    assert values(await svc.receive(T, "k", 10, 0, "c1")) == ["a0", "a1"]
    env.clock.advance(IDLE_MS // 2)
    assert await svc.receive(T, "k", 10, 0, "c3") == []
    env.clock.advance(IDLE_MS // 2 + 1)  # c1 silent for the idle time: it leaves
    a0 = await svc.receive(T, "k", 1, 0, "c3")
    assert values(a0) == ["a0"]
    assert await svc.receive(T, "k", 10, 0, "c1") == []  # back, but a0 is with c3
    a1 = await svc.receive(T, "k", 10, 0, "c3")
    assert values(a1) == ["a1"]
    await svc.ack(T, "k", [d.message.message_id for d in a0 + a1])
    await produce(svc, "a2", key=key)  # the key is free: the ring's choice again
    assert values(await svc.receive(T, "k", 10, 0, "c1")) == ["a2"]


@dataclass
class Model:
    """What each consumer holds, and the checks of key_shared's promises."""

    key_of: dict[MessageId, str] = field(default_factory=dict)
    held: dict[MessageId, str] = field(default_factory=dict)  # delivered, not acked: by whom
    acked: set[MessageId] = field(default_factory=set)
    last_consumer: dict[str, str] = field(default_factory=dict)  # key -> consumer of its last delivery
    changes: int = 0  # membership changes so far
    changes_at: dict[str, int] = field(default_factory=dict)  # key -> `changes` when it came to its consumer
    moves: int = 0

    def delivered(self, consumer: str, delivery: Delivery) -> None:
        mid = delivery.message.message_id
        key = self.key_of[mid]
        assert mid not in self.acked, f"{mid} delivered after it was acked"
        for other, k in self.key_of.items():
            if k == key and other < mid and other not in self.acked:
                # An earlier message of the key is out with this consumer, or it would be out of order.
                assert self.held.get(other) == consumer, (
                    f"{mid} of {key} to {consumer} while {other} is with {self.held.get(other)}"
                )
        previous = self.last_consumer.get(key)
        if previous is not None and previous != consumer:
            assert self.changes > self.changes_at[key], f"{key} moved {previous}->{consumer} with no change"
            self.moves += 1
        if previous != consumer:  # the key arrives here: it may move on only after a change
            self.changes_at[key] = self.changes
        self.last_consumer[key] = consumer
        self.held[mid] = consumer


@pytest.mark.parametrize("seed", [20261125, 7, 1234])
async def test_key_shared_order_and_stickiness_against_a_model_with_consumers_coming_and_going(
    svc: TopicService, env: Env, seed: int
) -> None:
    rng = random.Random(seed)
    await svc.create_subscription(
        T, "k", SubscriptionOptions("earliest", "key_shared", ack_timeout_ms=600_000)
    )
    model = Model()
    consumers = ["c1", "c2", "c3"]
    live: set[str] = set()
    delivered_total = 0
    for step in range(1_000):
        roll = rng.random()
        if roll < 0.3:
            key = f"k{rng.randrange(6)}"
            for mid in await produce(svc, *(f"{key}/{step}/{j}" for j in range(rng.randint(1, 3))), key=key):
                model.key_of[mid] = key
        elif roll < 0.93:
            joining = not live or rng.random() < 0.25
            consumer = rng.choice(consumers if joining else sorted(live))
            if consumer not in live:
                live.add(consumer)
                model.changes += 1
            for d in await svc.receive(T, "k", rng.randint(1, 8), 0, consumer):
                model.delivered(consumer, d)
                delivered_total += 1
            mine = [m for m, c in model.held.items() if c == consumer]
            done = [m for m in mine if rng.random() < 0.3]
            if done:
                await svc.ack(T, "k", done)
                for m in done:
                    model.acked.add(m)
                    del model.held[m]
        elif len(live) > 1:
            # One consumer goes silent: the others keep asking while the idle time passes.
            leaving = rng.choice(sorted(live))
            live.discard(leaving)
            for _ in range(3):
                env.clock.advance(IDLE_MS // 2)
                model.changes += 1  # the service notices the leave at one of these
                for c in sorted(live):
                    for d in await svc.receive(T, "k", 1, 0, c):
                        model.delivered(c, d)
                        delivered_total += 1
            for m in [m for m, c in model.held.items() if c == leaving]:
                del model.held[m]  # what it held comes back to the others
    # Drain: every message is delivered and acked in the end.
    if model.held:
        await svc.ack(T, "k", list(model.held))
        model.acked |= set(model.held)
        model.held.clear()
    for _ in range(200):
        progressed = False
        for c in sorted(live):
            deliveries = await svc.receive(T, "k", 50, 0, c)
            for d in deliveries:
                model.delivered(c, d)
            if deliveries:
                progressed = True
                await svc.ack(T, "k", [d.message.message_id for d in deliveries])
                for d in deliveries:
                    model.acked.add(d.message.message_id)
                    model.held.pop(d.message.message_id, None)
        if not progressed and not model.held:
            break
    assert set(model.key_of) == model.acked
    assert delivered_total > 100 and model.moves > 0, (delivered_total, model.moves)


# --- delayed delivery ------------------------------------------------------------------------------
@pytest.mark.parametrize("kind", ["shared", "key_shared", "exclusive", "failover"])
async def test_a_delayed_message_waits_for_its_time_on_shared_and_key_shared_only(
    env: Env, kind: str
) -> None:
    svc = env.service
    at = env.clock.now_ms() + 5_000
    await svc.produce(T, None, [Message(b"late", key="k", deliver_at=at)])
    await produce(svc, "on time", key="k")
    options = SubscriptionOptions("earliest", kind, ack_timeout_ms=600_000)  # type: ignore[arg-type]
    await svc.create_subscription(T, "d", options)
    taken = await svc.receive(T, "d", 10, 0, "c1")
    await svc.ack(T, "d", [d.message.message_id for d in taken])
    got = values(taken)
    page = await svc.read(T, "earliest", 10, False, 0)
    assert [m.value for m in page.messages] == [b"late", b"on time"]  # readers see it as any other
    assert page.messages[0].deliver_at == at
    if kind in ("exclusive", "failover"):
        assert got == ["late", "on time"]  # Pulsar ignores the time on these types
        return
    assert got == ["on time"]
    assert await svc.receive(T, "d", 10, 0, "c1") == []
    env.clock.advance(4_999)
    assert await svc.receive(T, "d", 10, 0, "c1") == []
    svc = await env.restart()  # set aside in memory only: read again, set aside again
    assert await svc.receive(T, "d", 10, 0, "c1") == []
    env.clock.advance(1)
    assert values(await svc.receive(T, "d", 10, 0, "c1")) == ["late"]


# --- whole entries (a push consumer's permits) -------------------------------------------------------
@pytest.mark.parametrize("kind", ["shared", "key_shared"])
async def test_whole_entries_redeliver_an_entry_whole_past_the_permits(svc: TopicService, kind: str) -> None:
    """A Pulsar client acks a batch as its entry: an entry redelivered in two pieces to one
    consumer would have the first piece's ack cover the second's."""
    await svc.produce(T, None, [Message(v.encode(), key=k) for v, k in (("a", "x"), ("b", "y"), ("c", "z"))])
    options = SubscriptionOptions("earliest", kind, ack_timeout_ms=600_000)  # type: ignore[arg-type]
    await svc.create_subscription(T, "w", options)
    first = await svc.receive(T, "w", 1, 0, "c1", whole_entries=True)
    assert values(first) == ["a", "b", "c"]
    await svc.nack(T, "w", [d.message.message_id for d in first])
    again = await svc.receive(T, "w", 1, 0, "c1", whole_entries=True)
    assert values(again) == ["a", "b", "c"] and {d.redelivery_count for d in again} == {1}
