"""The run lease with the reference engine on the in-memory store and client, on a manual clock:
a dead run's lapsed lease is ERROR and its ledger deleted, a run that lost its lease records
nothing and deletes its ledger, a renewed lease outlives many lease lengths, and requests wait
for a live compactor instead of expiring."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable
from dataclasses import replace

import pytest

from bookie.memory import InMemoryLedgerClient
from bookie.types import LedgerSpec
from compactor.config import CompactionRules, CompactorConfig
from compactor.errors import CompactionRunConflictError, LeaseLostError
from compactor.plan import CompactionPlan
from compactor.reference import EntrySink, ReferenceEngine
from compactor.runner import CompactionRunner
from compactor.service import CompactionService
from managed_ledger.clock import ManualClock
from managed_ledger.entry_format import Message
from managed_ledger.metadata.api import CompactionState, CompactionStatus, NotFoundError
from managed_ledger.metadata.memory import InMemoryMetadataStore
from tests.compactor.topic_writer import TopicWriter
from tests.support import wait_until
from topics import compaction_lease

ML = "public/default/leased"
LEASE_MS = 40  # short: the heartbeat beats every 10 ms of real time
WAIT_S = 10.0


class Env:
    def __init__(self) -> None:
        self.store, self.client, self.clock = InMemoryMetadataStore(), InMemoryLedgerClient(), ManualClock()
        self.config = CompactorConfig(bookies=("b:1",), lease_ms=LEASE_MS, instance_id="me")
        self.engine = ReferenceEngine(self.client)
        self.runner = CompactionRunner(self.store, self.client, self.config, self.engine, self.clock)

    def state(self, ml: str = ML) -> CompactionState:
        return self.store.get_compaction(ml)

    def ledger_exists(self, ledger_id: int) -> bool:
        try:
            self.store.get_ledger(ledger_id)
        except NotFoundError:
            return ledger_id in self.client.ledgers
        return True


class HookedEngine:
    """The reference engine, with a hook run after the entries are computed (before the close)."""

    name = "hooked"

    def __init__(self, inner: ReferenceEngine, hook: Callable[[], Awaitable[None]]) -> None:
        self.inner, self.hook = inner, hook

    async def compute(self, plan: CompactionPlan, rules: CompactionRules, sink: EntrySink) -> int:
        read = await self.inner.compute(plan, rules, sink)
        await self.hook()
        return read


async def lease_pushed_past(env: Env, ml: str, before: int) -> None:
    """Wait (bounded) until a heartbeat has pushed the lease of `ml` past `before`."""

    def pushed() -> bool:
        return (env.state(ml).lease_expires_ms or 0) > before

    await asyncio.to_thread(wait_until, pushed, WAIT_S, f"the lease of {ml} renewed")


async def topic_with(env: Env, ml: str, *values: bytes) -> None:
    await TopicWriter(env.store, env.client, ml).append([Message(v, key="k") for v in values])


async def test_a_dead_runs_lapsed_lease_is_error_and_its_ledger_deleted() -> None:
    env = Env()
    await topic_with(env, ML, b"1")
    good = await env.runner.run(ML)
    assert (good.lease_holder, good.lease_expires_ms) == ("", None)
    # another compactor took a run, created its ledger and was killed -9
    dead = compaction_lease.taken(env.state(), "dead", env.clock.now_ms(), LEASE_MS)
    meta = env.store.create_ledger(("b:1",), 1, 1, 0)
    await env.client.create_ledger(LedgerSpec(meta.ledger_id, ("b:1",)))
    env.store.put_compaction(replace(dead, run_ledger_id=meta.ledger_id))
    with pytest.raises(CompactionRunConflictError):
        await env.runner.run(ML)  # its lease still holds
    assert await env.runner.sweep() == []
    env.clock.advance(LEASE_MS)
    assert await env.runner.sweep() == [ML]
    state = env.state()
    assert state.status == CompactionStatus.ERROR and state.last_error.startswith(compaction_lease.LEASE_LOST)
    assert "dead" in state.last_error and state.run_ledger_id is None
    assert not env.ledger_exists(meta.ledger_id)
    assert state.compacted_ledger_id == good.compacted_ledger_id  # the view is untouched
    await topic_with(env, ML, b"2")
    assert (await env.runner.run(ML)).status == CompactionStatus.SUCCESS


async def test_a_run_that_lost_its_lease_records_nothing_and_deletes_its_ledger() -> None:
    env = Env()
    await topic_with(env, ML, b"1")
    good = await env.runner.run(ML)
    await topic_with(env, ML, b"2")
    ledgers_before = set(env.client.ledgers)

    async def cut_off() -> None:  # the store stops hearing from us; a broker GET looks
        env.clock.advance(LEASE_MS)
        observed = compaction_lease.observe(env.store, ML, env.clock.now_ms())
        assert observed.status == CompactionStatus.ERROR

    env.runner.engine = HookedEngine(env.engine, cut_off)
    with pytest.raises(LeaseLostError):
        await env.runner.run(ML)
    state = env.state()
    assert state.status == CompactionStatus.ERROR and state.last_error.startswith(compaction_lease.LEASE_LOST)
    assert (state.compacted_ledger_id, state.horizon) == (good.compacted_ledger_id, good.horizon)
    assert set(env.client.ledgers) == ledgers_before  # its half-written ledger is gone
    assert state.run_ledger_id is not None and not env.ledger_exists(state.run_ledger_id)
    assert await env.runner.sweep() == [] and env.state().run_ledger_id is None


async def test_a_new_request_takes_over_a_lapsed_run_and_the_old_run_cannot_record() -> None:
    env = Env()
    await topic_with(env, ML, b"1", b"2")

    async def taken_over() -> None:  # lease lapses, a PUT requests a new run before we close
        env.clock.advance(LEASE_MS)
        assert compaction_lease.request(env.store, ML, env.clock.now_ms(), LEASE_MS) is not None

    env.runner.engine = HookedEngine(env.engine, taken_over)
    with pytest.raises(LeaseLostError):
        await env.runner.run(ML)
    state = env.state()
    assert (state.status, state.requested, state.compacted_ledger_id) == (
        CompactionStatus.RUNNING,
        True,
        None,
    )
    env.runner.engine = env.engine
    done = await env.runner.run(ML)  # the new request is taken and run
    assert done.status == CompactionStatus.SUCCESS and done.messages_out == 1
    assert set(env.client.ledgers) - set(env.store.get_managed_ledger(ML).ledger_ids) == {  # type: ignore[union-attr]
        done.compacted_ledger_id
    }


async def test_the_heartbeat_keeps_a_long_run_alive() -> None:
    env = Env()
    await topic_with(env, ML, b"1")

    async def long_run() -> None:  # ten lease lengths, each waiting for a renewal
        for _ in range(10):
            before = env.state().lease_expires_ms or 0
            env.clock.advance(LEASE_MS // 2)
            await lease_pushed_past(env, ML, before)

    env.runner.engine = HookedEngine(env.engine, long_run)
    done = await env.runner.run(ML)
    assert done.status == CompactionStatus.SUCCESS and done.last_failed_ms is None


async def test_requests_queued_behind_a_long_run_wait_for_it() -> None:
    env = Env()
    other = "public/default/queued"
    await topic_with(env, ML, b"1")
    await topic_with(env, other, b"1")
    for ml in (ML, other):
        assert compaction_lease.request(env.store, ml, env.clock.now_ms(), LEASE_MS) is not None

    async def long_run() -> None:  # three lease lengths; the queued request must not expire
        for _ in range(6):
            before = env.state(other).lease_expires_ms or 0
            env.clock.advance(LEASE_MS // 2)
            await lease_pushed_past(env, other, before)

    engine = HookedEngine(env.engine, long_run)
    service = CompactionService(env.store, env.client, env.config, engine, env.clock)
    keeping = asyncio.create_task(service.keep_requests_alive())
    try:
        assert await service.poll_once() == [ML, other]  # sorted: ML runs first
    finally:
        keeping.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await keeping
    for ml in (ML, other):
        state = env.state(ml)
        assert state.status == CompactionStatus.SUCCESS and state.last_failed_ms is None, state


async def test_a_request_no_compactor_took_is_error_for_the_poll() -> None:
    env = Env()
    await topic_with(env, ML, b"1")
    compaction_lease.request(env.store, ML, env.clock.now_ms(), LEASE_MS)
    env.clock.advance(LEASE_MS)
    service = CompactionService(env.store, env.client, env.config, env.engine, env.clock)
    assert await service.poll_once() == []
    state = env.state()
    assert state.status == CompactionStatus.ERROR and state.last_error.startswith(compaction_lease.NO_TAKER)


async def test_a_renewal_after_the_run_recorded_its_end_writes_nothing() -> None:
    env = Env()
    await topic_with(env, ML, b"1")
    lease = await env.runner.start(ML)
    assert (await lease.renew()).version == lease.state.version == 2  # taken, then renewed
    ended = await lease.write(status=CompactionStatus.SUCCESS, lease_holder="", lease_expires_ms=None)
    assert await lease.renew() == ended == env.state()  # a late heartbeat leaves the end alone


async def test_a_store_down_when_the_service_starts_is_waited_out_not_fatal() -> None:
    env = Env()
    await topic_with(env, ML, b"1")
    compaction_lease.request(env.store, ML, env.clock.now_ms(), LEASE_MS)
    config = replace(env.config, poll_interval_ms=10)
    service = CompactionService(env.store, env.client, config, env.engine, env.clock)
    real_sweep, failures = service.runner.sweep, [3]

    async def sweep() -> list[str]:  # the store refuses the first three sweeps, as a stopped server
        if failures[0]:
            failures[0] -= 1
            raise ConnectionError("metadata store down")
        return await real_sweep()

    service.runner.sweep = sweep  # type: ignore[method-assign]
    stop = asyncio.Event()
    serving = asyncio.create_task(service.serve(stop))
    try:
        await asyncio.wait_for(_until_success(env), timeout=30)
        assert failures == [0] and not serving.done()
    finally:
        stop.set()
        await asyncio.wait_for(serving, timeout=30)


async def _until_success(env: Env) -> None:
    while env.state().status != CompactionStatus.SUCCESS:
        await asyncio.sleep(0.01)
