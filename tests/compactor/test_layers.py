"""Incremental compaction (a base ledger plus delta ledgers) through the topics service: what
readers, read_compacted subscriptions, last-message-id and Kafka fetches see of a layered view
equals what one full run over everything would write; a delta leaves the base alone; a fold
clears the deltas and deletes the ledgers it replaced; a run killed after writing its delta, and a
fold that died before deleting what it replaced, lose nothing and leak nothing.

The topics service runs over the real managed ledger with the in-memory store and ledger client
(tests/topics/conftest.py), the compactor's runner with the reference engine over the same."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import replace
from typing import Any

import pytest

from compactor.config import CompactionRules, CompactorConfig
from compactor.plan import CompactionPlan, build_plan
from compactor.reference import EntrySink, ReferenceEngine, read_messages, survivors
from compactor.runner import CompactionRunner
from managed_ledger.entry_format import Message, StoredMessage
from managed_ledger.metadata.api import CompactionState, CompactionStatus, NotFoundError
from managed_ledger.metadata.memory import InMemoryMetadataStore
from managed_ledger.position import MessageId
from tests.topics.conftest import Env, make_env
from topics.api import SubscriptionOptions
from topics.readers import after

T = "public/default/layered"
LEASE_MS = 1_000


@pytest.fixture
async def env() -> AsyncIterator[Env]:
    e = await make_env(InMemoryMetadataStore())
    yield e
    await e.service.close()
    await e.factory.close()


def runner_of(env: Env, engine: object | None = None, **config: Any) -> CompactionRunner:
    cfg = replace(CompactorConfig(bookies=("b1:3181",), lease_ms=LEASE_MS, instance_id="c"), **config)
    return CompactionRunner(env.store, env.client, cfg, engine or ReferenceEngine(env.client), env.clock)  # type: ignore[arg-type]


async def create(env: Env) -> None:
    await env.service.create_topic(T)
    await env.service.set_policy(T, "compactionThreshold", 1 << 30)  # on: Kafka fetches read the view


async def produce(env: Env, pairs: list[tuple[str, bytes]]) -> None:
    for i in range(0, len(pairs), 10):
        await env.service.produce(T, "p", [Message(v, key=k) for k, v in pairs[i : i + 10]])


async def full_run_view(
    env: Env, horizon: tuple[int, int, int] | None, rules: CompactionRules
) -> list[StoredMessage]:
    """What ONE full run from scratch up to `horizon` would write (nothing is trimmed here)."""
    plan = await build_plan(env.store, env.client, T, CompactionState(topic=T))
    plan = replace(plan, new_horizon=MessageId(*horizon) if horizon else None)
    return survivors(await read_messages(env.client, plan), replace(rules, now_ms=env.clock.now_ms()))


def ledger_gone(env: Env, ledger_id: int) -> bool:
    try:
        env.store.get_ledger(ledger_id)
    except NotFoundError:
        return ledger_id not in env.client.ledgers
    return False


async def assert_served(env: Env, expected: list[StoredMessage]) -> None:
    """Every way of reading the compacted view serves `expected` (nothing lies after the horizon)."""
    svc, ids = env.service, [m.message_id for m in expected]
    page = await svc.read(T, "earliest", 1_000, True, 0)
    assert [m.message_id for m in page.messages] == ids
    assert [(m.key, m.value) for m in page.messages] == [(m.key, m.value) for m in expected]
    paged: list[MessageId] = []  # pages of 7 from every position
    start: MessageId | str = "earliest"
    while True:
        got = (await svc.read(T, start, 7, True, 0)).messages  # type: ignore[arg-type]
        paged += [m.message_id for m in got]
        if len(got) < 7:
            break
        start = after(got[-1].message_id)
    assert paged == ids
    for i in range(0, len(ids), 13):  # by id: from a row, and from right after it
        assert [m.message_id for m in (await svc.read(T, ids[i], 1_000, True, 0)).messages] == ids[i:]
        assert [m.message_id for m in (await svc.read(T, after(ids[i]), 1_000, True, 0)).messages] == ids[
            i + 1 :
        ]
    assert await svc.last_message_id(T, True) == (ids[-1] if ids else None)
    sub = f"s{len(ids)}-{ids[-1] if ids else 0}".replace(":", "-")
    await svc.create_subscription(T, sub, SubscriptionOptions("earliest", read_compacted=True))
    received = await svc.receive(T, sub, 1_000, 0, None)
    assert [d.message.message_id for d in received] == ids
    fetched = await svc.kafka_fetch(T, 0, 0, 1 << 20)
    assert [(m.offset, m.value) for m in fetched.compacted] == [(m.offset, m.value) for m in expected]
    assert fetched.entries == []


async def test_a_small_tail_is_a_delta_and_enough_writes_fold(env: Env) -> None:
    rules = CompactionRules()
    await create(env)
    runner = runner_of(env)
    await produce(env, [(f"k{i % 100}", b"v%d" % i) for i in range(200)])
    base = await runner.run(T)
    assert base.compacted_ledger_id is not None and base.delta_ledger_ids == ()
    assert base.view_rules == rules.tag and base.messages_out == 100
    await assert_served(env, await full_run_view(env, base.horizon, rules))

    # a small tail: a delta of its newest row per key (a tombstone too); the base is untouched
    await produce(env, [("k1", b"new"), ("k2", b""), ("k1", b"newer"), ("fresh", b"f"), ("k3", b"")])
    delta = await runner.run(T)
    assert delta.status == CompactionStatus.SUCCESS and len(delta.delta_ledger_ids) == 1
    assert delta.compacted_ledger_id == base.compacted_ledger_id
    assert (delta.messages_in, delta.messages_out) == (5, 4)  # k1, k2 (tombstone), fresh, k3 (tombstone)
    assert base.compacted_ledger_id in env.client.ledgers
    base_meta = env.store.get_ledger(base.compacted_ledger_id)
    assert base_meta.last_entry_id == env.store.get_ledger(delta.compacted_ledger_id or -1).last_entry_id
    assert 0 < delta.delta_size_bytes < 0.25 * delta.compacted_size_bytes
    expected = await full_run_view(env, delta.horizon, rules)
    assert "k2" not in {m.key for m in expected} and len(expected) == 99
    await assert_served(env, expected)

    # a second delta hides a key of the first one
    await produce(env, [("fresh", b"f2"), ("k2", b"back")])
    second = await runner.run(T)
    assert second.delta_ledger_ids[:1] == delta.delta_ledger_ids and len(second.delta_ledger_ids) == 2
    await assert_served(env, await full_run_view(env, second.horizon, rules))

    # enough writes that the deltas would pass a quarter of the base: a fold
    await produce(env, [(f"k{i}", b"w%d" % i) for i in range(4, 60)])
    fold = await runner.run(T)
    assert fold.delta_ledger_ids == () and fold.delta_size_bytes == 0 and fold.retired_ledger_ids == ()
    assert fold.compacted_ledger_id not in second.layer_ledger_ids
    assert all(ledger_gone(env, i) for i in second.layer_ledger_ids)
    await assert_served(env, await full_run_view(env, fold.horizon, rules))


async def test_at_most_eight_deltas_then_a_fold(env: Env) -> None:
    await create(env)
    runner = runner_of(env, delta_max_ratio=100.0)
    await produce(env, [(f"k{i}", b"v") for i in range(30)])
    state = await runner.run(T)
    for n in range(1, 10):
        await produce(env, [(f"k{n}", b"n%d" % n)])
        before, state = state, await runner.run(T)
        if n <= 8:
            assert (
                len(state.delta_ledger_ids) == n and state.compacted_ledger_id == before.compacted_ledger_id
            )
        else:
            assert state.delta_ledger_ids == () and all(ledger_gone(env, i) for i in before.layer_ledger_ids)
        await assert_served(env, await full_run_view(env, state.horizon, CompactionRules()))


async def run_as_a_chain(env: Env, runner: CompactionRunner, rules: CompactionRules) -> CompactionState:
    """A run, checked against what a full run would write from the view as served before it plus
    the new messages, under `rules` (today's fold: what earlier runs dropped stays dropped)."""
    served = (await env.service.read(T, "earliest", 1_000, True, 0)).messages
    before = env.store.get_compaction(T)
    tail = await read_messages(env.client, await build_plan(env.store, env.client, T, before, delta=True))
    served = [
        await env.service.get_message(T, m.message_id) for m in served if m.message_id <= tail[0].message_id
    ]
    state = await runner.run(T, rules)
    await assert_served(env, survivors(served + tail, replace(rules, now_ms=env.clock.now_ms())))
    return state


async def test_rules_that_keep_tombstones_or_changed_rules_fold(env: Env) -> None:
    await create(env)
    runner = runner_of(env, delta_max_ratio=100.0)
    await produce(env, [(f"k{i}", b"v") for i in range(30)])
    first = await runner.run(T)
    await produce(env, [("k1", b"")])
    keep = CompactionRules("keep")  # the key-less policy changed: the layers were written under "drop"
    folded = await run_as_a_chain(env, runner, keep)
    assert folded.delta_ledger_ids == () and folded.compacted_ledger_id != first.compacted_ledger_id
    assert folded.view_rules == keep.tag
    await produce(env, [("k2", b""), ("k4", b"x")])
    assert len((await run_as_a_chain(env, runner, keep)).delta_ledger_ids) == 1  # same rules: a delta
    await produce(env, [("k3", b"")])
    kept = CompactionRules("keep", delete_retention_ms=60_000)  # tombstones stay a while: a fold,
    state = await run_as_a_chain(env, runner, kept)  # where k2's tombstone (never served) goes
    assert state.delta_ledger_ids == () and state.view_rules == kept.tag
    assert [m.key for m in (await env.service.read(T, "earliest", 1_000, True, 0)).messages][-2:] == [
        "k4",
        "k3",
    ]
    env.clock.advance(10)
    await produce(env, [("k5", b"")])
    assert (await run_as_a_chain(env, runner, kept)).delta_ledger_ids == ()  # still folds


class Killed(BaseException):
    """A kill -9 as the run sees it: no cleanup of any kind runs."""


class DiesAfterDelta:
    """The reference engine; a delta run dies once its entries are written (before its CAS)."""

    name = "dies"

    def __init__(self, inner: ReferenceEngine) -> None:
        self.inner = inner

    async def compute(self, plan: CompactionPlan, rules: CompactionRules, sink: EntrySink) -> int:
        read = await self.inner.compute(plan, rules, sink)
        if plan.delta:
            raise Killed()
        return read


async def test_a_run_killed_after_writing_its_delta_loses_nothing_and_leaks_nothing(env: Env) -> None:
    await create(env)
    await produce(env, [(f"k{i}", b"v") for i in range(40)])
    base = await runner_of(env).run(T)
    await produce(env, [("k1", b"x"), ("k2", b"")])
    with pytest.raises(Killed):
        await runner_of(env, DiesAfterDelta(ReferenceEngine(env.client))).run(T)
    dead = env.store.get_compaction(T)
    assert dead.status == CompactionStatus.RUNNING and dead.run_ledger_id is not None
    orphan = dead.run_ledger_id
    assert orphan in env.client.ledgers  # written, never named as a layer
    assert (dead.layer_ledger_ids, dead.horizon) == (base.layer_ledger_ids, base.horizon)
    view = [m.message_id for m in await full_run_view(env, base.horizon, CompactionRules())]
    tail = [m.message_id for m in (await env.service.read(T, "earliest", 1_000, False, 0)).messages[40:]]
    served = (await env.service.read(T, "earliest", 1_000, True, 0)).messages
    assert [m.message_id for m in served] == view + tail  # the old view, then the topic after it
    env.clock.advance(LEASE_MS + 1)  # its lease lapses; the next run deletes its ledger, then runs
    done = await runner_of(env).run(T)
    assert done.status == CompactionStatus.SUCCESS and ledger_gone(env, orphan)
    assert len(done.delta_ledger_ids) == 1 and done.compacted_ledger_id == base.compacted_ledger_id
    await assert_served(env, await full_run_view(env, done.horizon, CompactionRules()))


async def test_a_fold_that_died_before_deleting_what_it_replaced_leaks_nothing(env: Env) -> None:
    await create(env)
    runner = runner_of(env)
    await produce(env, [(f"k{i}", b"v") for i in range(40)])
    await runner.run(T)
    await produce(env, [("k1", b"x")])
    layered = await runner.run(T)
    assert len(layered.delta_ledger_ids) == 1
    # the fold's CAS is in, then the process dies before deleting what it replaced
    delete_leftovers = CompactionRunner._delete_leftovers

    async def dies(self: CompactionRunner, state: CompactionState) -> CompactionState:
        raise Killed()

    CompactionRunner._delete_leftovers = dies  # type: ignore[method-assign]
    try:
        await produce(env, [(f"k{i}", b"y") for i in range(40)])
        with pytest.raises(Killed):
            await runner.run(T)
    finally:
        CompactionRunner._delete_leftovers = delete_leftovers  # type: ignore[method-assign]
    folded = env.store.get_compaction(T)
    assert folded.status == CompactionStatus.SUCCESS and folded.delta_ledger_ids == ()
    assert folded.retired_ledger_ids == layered.layer_ledger_ids
    assert not any(ledger_gone(env, i) for i in layered.layer_ledger_ids)
    await assert_served(env, await full_run_view(env, folded.horizon, CompactionRules()))
    assert await runner.sweep() == []  # a compactor's poll deletes them
    assert all(ledger_gone(env, i) for i in layered.layer_ledger_ids)
    assert env.store.get_compaction(T).retired_ledger_ids == ()
