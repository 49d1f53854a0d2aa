"""A run's clean-up never deletes the view it committed, and a ledger that cannot be deleted now
does not stop the next run: a run cancelled after its fold's compare-and-set (the service
stopping), a commit whose write landed but whose answer was lost, a run cancelled while its
commit's write is in flight, a leftover whose bookie is down, a topic deleted after a run
died; and a reader or a read_compacted subscription during which a run commits serves nothing
twice. Over the topics service and the reference engine, as tests/compactor/test_layers.py."""

from __future__ import annotations

import asyncio
import threading
import time
from typing import Any

import pytest

import compactor.runner
from bookie.errors import BookieError, ErrorCode
from compactor.config import CompactionRules
from compactor.errors import CompactionError
from compactor.reference import ReferenceEngine
from compactor.runner import CompactionRunner
from managed_ledger.metadata.api import CompactionState, CompactionStatus
from tests.compactor.test_layers import (
    LEASE_MS,
    DiesAfterDelta,
    Killed,
    T,
    assert_served,
    create,
    env,
    full_run_view,
    ledger_gone,
    produce,
    runner_of,
)
from tests.topics.conftest import Env
from topics.api import SubscriptionOptions

__all__ = ["env"]  # the fixture


async def layered(env: Env, runner: CompactionRunner) -> CompactionState:
    """A base and one delta on T."""
    await create(env)
    await produce(env, [(f"k{i}", b"v") for i in range(40)])
    await runner.run(T)
    await produce(env, [("k1", b"x")])
    state = await runner.run(T)
    assert len(state.delta_ledger_ids) == 1
    return state


async def assert_view_intact(env: Env) -> CompactionState:
    stored = env.store.get_compaction(T)
    assert stored.status == CompactionStatus.SUCCESS
    assert not any(ledger_gone(env, i) for i in stored.layer_ledger_ids)
    await assert_served(env, await full_run_view(env, stored.horizon, CompactionRules()))
    return stored


async def test_a_run_cancelled_after_its_fold_switched_the_view_keeps_it(env: Env) -> None:
    runner = runner_of(env)
    before = await layered(env, runner)
    delete_leftovers = CompactionRunner._delete_leftovers

    async def cancelled(self: CompactionRunner, state: CompactionState) -> CompactionState:
        raise asyncio.CancelledError()  # the service stops while the fold deletes what it replaced

    CompactionRunner._delete_leftovers = cancelled  # type: ignore[method-assign]
    try:
        await produce(env, [(f"k{i}", b"y") for i in range(40)])
        with pytest.raises(asyncio.CancelledError):
            await runner.run(T)
    finally:
        CompactionRunner._delete_leftovers = delete_leftovers  # type: ignore[method-assign]
    folded = await assert_view_intact(env)
    assert folded.delta_ledger_ids == () and folded.retired_ledger_ids == before.layer_ledger_ids
    await runner.sweep()
    assert all(ledger_gone(env, i) for i in before.layer_ledger_ids)


async def test_a_commit_that_landed_but_whose_answer_was_lost_keeps_its_layer(env: Env) -> None:
    runner = runner_of(env)
    before = await layered(env, runner)
    put = env.store.put_compaction

    def lost_answer(state: CompactionState) -> CompactionState:
        stored = put(state)
        if state.status == CompactionStatus.SUCCESS:
            raise ConnectionError("the connection dropped before the commit's answer")
        return stored

    env.store.put_compaction = lost_answer  # type: ignore[method-assign]
    try:
        await produce(env, [("k2", b"z")])
        with pytest.raises(CompactionError):
            await runner.run(T)
    finally:
        env.store.put_compaction = put  # type: ignore[method-assign]
    stored = await assert_view_intact(env)
    assert len(stored.delta_ledger_ids) == 2 and stored.layer_ledger_ids[:2] == before.layer_ledger_ids


async def test_a_run_cancelled_while_its_commit_is_in_flight_keeps_its_layer(env: Env) -> None:
    runner = runner_of(env)
    await layered(env, runner)
    put, entered = env.store.put_compaction, threading.Event()

    def slow_commit(state: CompactionState) -> CompactionState:
        if state.status == CompactionStatus.SUCCESS:
            entered.set()
            time.sleep(0.3)  # the service is cancelled meanwhile; the write still lands
        return put(state)

    env.store.put_compaction = slow_commit  # type: ignore[method-assign]
    try:
        await produce(env, [("k3", b"w")])
        run = asyncio.create_task(runner.run(T))
        assert await asyncio.to_thread(entered.wait, 10)
        run.cancel()
        with pytest.raises(asyncio.CancelledError):
            await run
    finally:
        env.store.put_compaction = put  # type: ignore[method-assign]
    stored = await assert_view_intact(env)
    assert len(stored.delta_ledger_ids) == 2


async def test_a_leftover_that_cannot_be_deleted_now_does_not_stop_the_next_run(
    env: Env, monkeypatch: pytest.MonkeyPatch
) -> None:
    await create(env)
    await produce(env, [(f"k{i}", b"v") for i in range(40)])
    await runner_of(env).run(T)
    await produce(env, [("k1", b"x")])
    with pytest.raises(Killed):
        await runner_of(env, DiesAfterDelta(ReferenceEngine(env.client))).run(T)
    orphan = env.store.get_compaction(T).run_ledger_id
    assert orphan is not None
    env.clock.advance(LEASE_MS + 1)
    delete = compactor.runner.delete_ledger

    async def bookie_down(store: Any, client: Any, ledger_id: int) -> None:
        if ledger_id == orphan:
            raise BookieError(ErrorCode.UNAVAILABLE, "the bookie holding it is down")
        await delete(store, client, ledger_id)

    monkeypatch.setattr(compactor.runner, "delete_ledger", bookie_down)
    done = await runner_of(env).run(T)  # runs, and keeps the orphan named for later
    assert done.status == CompactionStatus.SUCCESS and orphan in done.leftover_ledger_ids
    assert not ledger_gone(env, orphan)
    await assert_view_intact(env)
    monkeypatch.setattr(compactor.runner, "delete_ledger", delete)
    await runner_of(env).sweep()
    assert ledger_gone(env, orphan) and env.store.get_compaction(T).leftover_ledger_ids == ()


async def test_deleting_a_topic_deletes_the_ledger_of_a_run_that_died(env: Env) -> None:
    await create(env)
    await produce(env, [(f"k{i}", b"v") for i in range(40)])
    base = await runner_of(env).run(T)
    await produce(env, [("k1", b"x")])
    with pytest.raises(Killed):
        await runner_of(env, DiesAfterDelta(ReferenceEngine(env.client))).run(T)
    orphan = env.store.get_compaction(T).run_ledger_id
    assert orphan is not None and not ledger_gone(env, orphan)
    await env.service.delete_topic(T, force=True)
    assert ledger_gone(env, orphan)
    assert all(ledger_gone(env, i) for i in base.layer_ledger_ids)


@pytest.mark.parametrize("how", ["reader", "subscription"])
async def test_a_run_committed_between_reading_the_horizon_and_the_view_serves_nothing_twice(
    env: Env, how: str
) -> None:
    runner = runner_of(env)
    await layered(env, runner)
    await produce(env, [("k5", b"late"), ("k6", b"late")])  # after the horizon: a run takes them
    view = env.service._compacted
    horizon = view.horizon

    async def then_a_run(ml_name: str) -> Any:
        seen = await horizon(ml_name)
        view.horizon = horizon  # type: ignore[method-assign]  # once
        await runner.run(T)  # commits a delta past the horizon just read
        return seen

    view.horizon = then_a_run  # type: ignore[method-assign]
    try:
        if how == "reader":
            ids = [m.message_id for m in (await env.service.read(T, "earliest", 1_000, True, 0)).messages]
        else:
            options = SubscriptionOptions("earliest", read_compacted=True)
            await env.service.create_subscription(T, "s", options)
            ids = [d.message.message_id for d in await env.service.receive(T, "s", 1_000, 0, None)]
    finally:
        view.horizon = horizon  # type: ignore[method-assign]
    assert len(ids) == len(set(ids)) and ids == sorted(ids)
    assert len(env.store.get_compaction(T).delta_ledger_ids) == 2  # the run did commit meanwhile
