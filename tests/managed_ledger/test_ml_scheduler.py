"""The managed ledgers' periodic work through the factory's one scheduler: a managed ledger is
ticked while it has work (a dirty cursor, a dedup snapshot, a deletion) or at its rollover and
retention deadlines, and never when idle; the visit count shows it."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from managed_ledger.factory import ManagedLedgerFactory
from managed_ledger.ledger import ManagedLedger
from managed_ledger.position import Position
from tests.managed_ledger.ml_support import Env, batch, config

INTERVAL = 1_000  # min(cursor flush interval, 1 s)


@pytest.fixture
def env() -> Env:
    return Env()


@pytest.fixture
async def factory(env: Env) -> AsyncIterator[ManagedLedgerFactory]:
    f = ManagedLedgerFactory(env.client, env.store, env.bookies, clock=env.clock, timers=True)
    yield f
    await f.close()


async def run(factory: ManagedLedgerFactory) -> int:
    """Run what is due; wait for the ticks it started. Returns how many managed ledgers ran."""
    ran = factory.scheduler.run_due()
    for ml in list(factory._ledgers.values()):
        if ml._timer.task is not None:
            await ml._timer.task
    return ran


async def settle(env: Env, factory: ManagedLedgerFactory) -> None:
    for _ in range(3):
        env.clock.advance(INTERVAL)
        await run(factory)


async def test_an_idle_managed_ledger_has_no_timer_entry(env: Env, factory: ManagedLedgerFactory) -> None:
    ml = await factory.open("t", config(max_rollover_ms=60_000))
    assert factory.scheduler.deadline(ml) == env.clock.now_ms() + INTERVAL  # the first pass
    await settle(env, factory)
    assert factory.scheduler.deadline(ml) is None  # nothing to do: no entry at all
    await ml.append(batch(env.clock.now_ms()))
    appended_at = env.clock.now_ms()
    assert factory.scheduler.deadline(ml) == appended_at + INTERVAL
    await settle(env, factory)
    # Only the rollover by age is left: the entry waits for it, not for the next interval.
    assert factory.scheduler.deadline(ml) == appended_at + 60_000


async def test_an_ack_is_flushed_within_an_interval_then_the_entry_goes(
    env: Env, factory: ManagedLedgerFactory
) -> None:
    ml = await factory.open("t", config())
    cursor = await ml.open_cursor("c", "earliest")
    pos = await ml.append(batch(1))
    await settle(env, factory)
    cursor.ack([pos])
    assert cursor.dirty and factory.scheduler.deadline(ml) is not None
    env.clock.advance(INTERVAL)
    assert await run(factory) == 1
    assert not cursor.dirty
    stored = next(c for c in env.store.list_cursors("t") if c.name == "c")
    assert Position(*stored.mark_delete) == pos


async def test_only_the_touched_managed_ledger_is_visited(env: Env, factory: ManagedLedgerFactory) -> None:
    mls: list[ManagedLedger] = [await factory.open(f"t{i}", config()) for i in range(50)]
    cursors = [await ml.open_cursor("c", "earliest") for ml in mls]
    positions = [await ml.append(batch(1)) for ml in mls]
    await settle(env, factory)
    far = env.clock.now_ms() + 60 * 60_000
    assert all((factory.scheduler.deadline(ml) or 0) > far for ml in mls)  # only the rollover's, hours away
    before = factory.scheduler.runs
    cursors[7].ack([positions[7]])
    for _ in range(5):
        env.clock.advance(INTERVAL)
        await run(factory)
    assert factory.scheduler.runs - before == 1  # one visit, for the one that changed


async def test_retention_by_time_has_its_own_deadline(env: Env, factory: ManagedLedgerFactory) -> None:
    ml = await factory.open("t", config(max_entries=1, retention_minutes=1, retention_mb=-1))
    await ml.append(batch(1))  # fills ledger 1: rolled over
    await ml.append(batch(2))
    await settle(env, factory)
    first = next(iter(ml.ledger_list))
    assert first is not None and first.timestamp_ms > 0
    assert factory.scheduler.deadline(ml) == first.timestamp_ms + 60_000
    env.clock.advance(first.timestamp_ms + 60_000 - env.clock.now_ms())
    await run(factory)
    assert first.ledger_id not in ml.ledger_list.ids  # trimmed at its deadline
