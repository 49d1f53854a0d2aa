"""Durable cursors on the in-memory seams: acks, mark-delete, backlog, batching, recovery, seeks."""

from __future__ import annotations

import asyncio
import random
from dataclasses import replace

from managed_ledger.factory import ManagedLedgerFactory
from managed_ledger.ledger import ManagedLedger
from managed_ledger.metadata.memory import InMemoryMetadataStore
from managed_ledger.position import Position
from tests.managed_ledger.ml_support import CountingStore, Env, batch, config


async def _ml_with(env: Env, n: int, max_entries: int = 3) -> tuple[ManagedLedger, list[Position]]:
    ml = await env.factory().open("t", config(max_entries=max_entries))
    return ml, [await ml.append(b"%d" % i) for i in range(n)]


async def test_initial_positions_earliest_and_latest() -> None:
    env = Env()
    ml, positions = await _ml_with(env, 4)
    earliest = await ml.open_cursor("e", "earliest")
    latest = await ml.open_cursor("l", "latest")
    assert earliest.backlog == 4 and latest.backlog == 0
    assert earliest.mark_delete_position == Position(positions[0].ledger_id, -1)
    assert earliest.read_position == positions[0]
    new = await ml.append(b"new")
    assert latest.backlog == 1 and latest.read_position == new
    assert [p for p, _ in await latest.read_entries(10)] == [new]


async def test_cursor_on_an_empty_managed_ledger_sees_the_first_entry() -> None:
    env = Env()
    ml = await env.factory().open("t", config())
    for initial in ("earliest", "latest"):
        await ml.open_cursor(initial, initial)  # type: ignore[arg-type]
    pos = await ml.append(b"x")
    for cursor in ml.cursors.values():
        assert cursor.backlog == 1
        assert [p for p, _ in await cursor.read_entries(5)] == [pos]


async def test_individual_acks_move_mark_delete_over_contiguous_runs_across_ledgers() -> None:
    env = Env()
    ml, pos = await _ml_with(env, 8)  # ledgers of 3, 3, 2
    cursor = await ml.open_cursor("s", "earliest")
    cursor.ack([pos[1], pos[3], pos[4], pos[6]])
    assert cursor.mark_delete_position == Position(pos[0].ledger_id, -1)
    assert cursor.individually_deleted_ranges() == [(pos[1], pos[1]), (pos[3], pos[4]), (pos[6], pos[6])]
    assert cursor.backlog == 4
    cursor.ack([pos[2]])  # joins (1..1] and (3..4] across the ledger boundary
    assert cursor.individually_deleted_ranges() == [(pos[1], pos[4]), (pos[6], pos[6])]
    cursor.ack([pos[0]])
    assert cursor.mark_delete_position == pos[4]
    assert cursor.individually_deleted_ranges() == [(pos[6], pos[6])]
    assert cursor.backlog == 2 and cursor.is_acked(pos[3]) and not cursor.is_acked(pos[5])
    stats = ml.internal_stats()["cursors"]["s"]  # type: ignore[index]
    assert stats["markDeletePosition"] == str(pos[4])
    assert stats["individuallyDeletedMessages"] == f"[({pos[6].ledger_id}:-1..{pos[6]}]]"
    cursor.ack([pos[5], pos[7]])
    assert cursor.mark_delete_position == pos[7] and cursor.backlog == 0


async def test_backlog_is_exact_under_random_acks() -> None:
    env = Env()
    ml, pos = await _ml_with(env, 60, max_entries=7)
    cursor = await ml.open_cursor("s", "earliest")
    rng = random.Random(7)
    acked: set[Position] = set()
    for _ in range(40):
        chosen = rng.sample(pos, 3)
        cursor.ack(chosen)
        acked.update(chosen)
        assert cursor.backlog == 60 - len(acked)
        assert all(cursor.is_acked(p) == (p in acked) for p in pos)
        unacked = [p for p in pos if p not in acked]
        assert cursor.mark_delete_position < (unacked[0] if unacked else Position(10**9, 0))


async def test_cumulative_ack_and_reading_skips_acked_entries() -> None:
    env = Env()
    ml, pos = await _ml_with(env, 6)
    cursor = await ml.open_cursor("s", "earliest")
    cursor.ack([pos[3]])
    cursor.ack_cumulative(pos[1])
    assert cursor.mark_delete_position == pos[1] and cursor.backlog == 3
    assert [p for p, _ in await cursor.read_entries(10)] == [pos[2], pos[4], pos[5]]
    assert await cursor.read_entries(10) == []
    cursor.rewind()
    assert [p for p, _ in await cursor.read_entries(1)] == [pos[2]]
    cursor.ack_cumulative(pos[2])
    assert cursor.mark_delete_position == pos[3]  # the ack of 3 joins


async def test_acks_are_flushed_in_one_batch_not_one_write_each() -> None:
    store = CountingStore(InMemoryMetadataStore())
    env = Env(store=store)  # type: ignore[arg-type]
    ml, pos = await _ml_with(env, 300, max_entries=1000)
    a = await ml.open_cursor("a", "earliest")
    b = await ml.open_cursor("b", "earliest")
    before = store.total()
    for p in pos:
        a.ack([p])
        b.ack([p])
    assert store.total() == before
    assert env.store.list_cursors("t")[0].mark_delete[1] == -1
    before = store.total()
    env.clock.advance(1_000)
    await ml.tick()  # the flush interval passed: one update_cursors call for both cursors
    assert store.total() - before == 1 and store.calls["update_cursors"] == 1
    stored = {c.name: c.mark_delete for c in env.store.list_cursors("t")}
    assert stored == {"a": tuple(pos[-1]), "b": tuple(pos[-1])}


async def test_cursor_state_survives_a_crash_as_of_its_last_flush() -> None:
    env = Env()
    ml, pos = await _ml_with(env, 10)
    cursor = await ml.open_cursor("s", "earliest")
    cursor.ack([pos[0], pos[1], pos[5], pos[6]])
    await cursor.flush()
    cursor.ack([pos[2]])  # not flushed: may be lost, and nothing flushed may be
    ml2 = await env.factory().open("t", config(max_entries=3))
    recovered = ml2.cursors["s"]
    assert recovered.mark_delete_position == pos[1]
    assert recovered.individually_deleted_ranges() == [(pos[5], pos[6])]
    assert recovered.backlog == 6
    assert [p for p, _ in await recovered.read_entries(3)] == [pos[2], pos[3], pos[4]]


async def test_delivery_state_is_asked_for_once_per_flush_and_read_back_at_open() -> None:
    store = CountingStore(InMemoryMetadataStore())
    env = Env(store=store)  # type: ignore[arg-type]
    ml, pos = await _ml_with(env, 4)
    cursor = await ml.open_cursor("s", "earliest")
    assert cursor.delivery_state is None
    asked: list[int] = []

    def source() -> dict[str, object]:
        asked.append(1)
        return {"asked": len(asked)}

    cursor.track_delivery_state(source)
    await ml.flush_cursors()
    assert asked == [] and not cursor.dirty  # nothing reported: nothing asked, nothing written
    for _ in range(3):
        cursor.delivery_state_changed()
    cursor.ack([pos[0]])
    assert cursor.dirty and asked == []  # built at flush time only
    writes = store.calls.get("update_cursors", 0)
    await ml.flush_cursors()
    assert len(asked) == 1 and store.calls["update_cursors"] == writes + 1  # with the ack, one write
    assert cursor.delivery_state == {"asked": 1}
    cursor.ack([pos[1]])
    await ml.flush_cursors()  # an ack alone keeps the stored state without asking
    assert len(asked) == 1 and env.store.list_cursors("t")[0].delivery_state == {"asked": 1}

    reopened = (await env.factory().open("t", config(max_entries=3))).cursors["s"]
    assert reopened.delivery_state == {"asked": 1} and reopened.mark_delete_position == pos[1]

    def broken() -> dict[str, object]:
        raise RuntimeError("bug in the owner")

    reopened.track_delivery_state(broken)
    reopened.delivery_state_changed()
    await reopened.flush()  # the flush still stores the acks; the state becomes none
    assert not reopened.dirty and env.store.list_cursors("t")[0].delivery_state is None


async def test_close_flushes_cursors() -> None:
    env = Env()
    ml, pos = await _ml_with(env, 5)
    cursor = await ml.open_cursor("s", "earliest")
    cursor.ack(pos[:3])
    await ml.close()
    ml2 = await env.factory().open("t", config())
    assert ml2.cursors["s"].mark_delete_position == pos[2]


async def test_reset_by_position_and_by_time_is_durable() -> None:
    env = Env()
    ml = await env.factory().open("t", config(max_entries=3))
    pos = [await ml.append(batch(1_000 + i)) for i in range(8)]
    cursor = await ml.open_cursor("s", "earliest")
    cursor.ack(pos)
    await cursor.reset(pos[4])
    assert cursor.read_position == pos[4] and cursor.backlog == 4
    assert cursor.individually_deleted_ranges() == []
    await cursor.reset_to_time(1_002)
    assert cursor.read_position == pos[2] and cursor.backlog == 6
    ml2 = await env.factory().open("t", config(max_entries=3))  # a reset is flushed at once
    assert ml2.cursors["s"].read_position == pos[2]
    cursor2 = ml2.cursors["s"]
    await cursor2.reset_to_time(5_000)  # after every entry: the end
    assert cursor2.backlog == 0
    assert await cursor2.read_entries(5) == []


async def test_delete_cursor_and_properties() -> None:
    env = Env()
    ml, _ = await _ml_with(env, 2)
    cursor = await ml.open_cursor("s")
    await cursor.set_properties({"type": "shared", "ack_timeout_ms": 5})
    ml2 = await env.factory().open("t", config())
    assert ml2.cursors["s"].properties == {"type": "shared", "ack_timeout_ms": 5}
    await ml2.delete_cursor("s")
    assert ml2.cursors == {} and env.store.list_cursors("t") == []


async def test_background_timer_flushes_acks_and_close_stops_it() -> None:
    env = Env()
    factory = ManagedLedgerFactory(env.client, env.store, env.bookies, timers=True)  # system clock
    ml = await factory.open("t", replace(config(), cursor_flush_interval_ms=10))
    pos = await ml.append(b"x")
    cursor = await ml.open_cursor("s", "earliest")
    cursor.ack([pos])
    for _ in range(1_000):  # bounded wait for the timer's flush; no assertion on how long it took
        if env.store.list_cursors("t")[0].mark_delete == tuple(pos):
            break
        await asyncio.sleep(0.01)
    assert env.store.list_cursors("t")[0].mark_delete == tuple(pos)
    await factory.close()
    assert not ml.is_fenced
