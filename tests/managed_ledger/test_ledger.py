"""Managed ledger unit tests on the in-memory seams: append, rollover, reads, restart recovery."""

from __future__ import annotations

import asyncio

import pytest

from bookie.errors import BookieError, ErrorCode
from bookie.memory import InMemoryLedgerClient
from managed_ledger.errors import (
    EntryNotFoundError,
    ManagedLedgerFencedError,
    ManagedLedgerWriteError,
)
from managed_ledger.metadata.api import LedgerState
from managed_ledger.position import Position
from tests.managed_ledger.ml_support import Env, batch, config, ledgers_of


async def test_five_appends_with_max_two_make_ledgers_of_two_two_one() -> None:
    env = Env()
    ml = await env.factory().open("t", config(max_entries=2))
    positions = [await ml.append(b"e%d" % i) for i in range(5)]
    stats = ml.internal_stats()
    ledgers = stats["ledgers"]
    assert isinstance(ledgers, list)
    assert [lg["entries"] for lg in ledgers] == [2, 2, 1]
    assert [lg["timestamp"] for lg in ledgers][-1] == 0  # the current ledger is still open
    assert all(lg["timestamp"] > 0 for lg in ledgers[:-1])
    ids = [lg["ledgerId"] for lg in ledgers]
    assert positions == [Position(ids[i // 2], i % 2) for i in range(5)]
    assert stats["numberOfEntries"] == 5 and stats["entriesAddedCounter"] == 5
    assert stats["lastConfirmedEntry"] == f"{ids[2]}:0"
    assert stats["currentLedgerEntries"] == 1
    for ledger_id in ids[:2]:
        meta = env.store.get_ledger(ledger_id)
        assert meta.state == LedgerState.CLOSED and meta.last_entry_id == 1 and meta.length_bytes == 4
    assert env.store.get_ledger(ids[2]).state == LedgerState.OPEN
    assert env.store.get_managed_ledger("t").ledger_ids == tuple(ids)  # type: ignore[union-attr]


async def test_many_appends_in_flight_keep_call_order_across_rollovers() -> None:
    env = Env()
    ml = await env.factory().open("t", config(max_entries=3))
    payloads = [b"p%03d" % i for i in range(40)]
    positions = await asyncio.gather(*(ml.append(p) for p in payloads))
    assert positions == sorted(positions) and len(set(positions)) == 40
    entries = await ml.read_entries(Position(0, 0), 100)
    assert [p for _, p in entries] == payloads
    assert [pos for pos, _ in entries] == positions
    assert [lg["entries"] for lg in ledgers_of(ml)] == [3] * 13 + [1]


async def test_size_limit_rolls_and_the_filling_add_is_the_last() -> None:
    env = Env()
    ml = await env.factory().open("t", config(max_size_bytes=10))
    for _ in range(5):
        await ml.append(b"abcd")  # 4, 8, 12 -> full at the third
    assert [lg["entries"] for lg in ledgers_of(ml)] == [3, 2]


async def test_min_rollover_time_holds_a_full_ledger_until_it_is_old_enough() -> None:
    env = Env()
    ml = await env.factory().open("t", config(max_entries=2, min_rollover_ms=1_000))
    for _ in range(4):
        await ml.append(b"x")
    assert [lg["entries"] for lg in ledgers_of(ml)] == [4]
    env.clock.advance(1_001)
    await ml.append(b"x")  # full and old enough: this add is the ledger's last
    await ml.append(b"y")
    assert [lg["entries"] for lg in ledgers_of(ml)] == [5, 1]


async def test_timer_rolls_a_non_empty_ledger_past_max_age_without_writes() -> None:
    env = Env()
    ml = await env.factory().open("t", config(max_rollover_ms=60_000))
    await ml.tick()
    assert ml.internal_stats()["ledgers"] == []
    await ml.append(b"x")
    env.clock.advance(30_000)
    await ml.tick()
    assert ml.internal_stats()["ledgers"][0]["timestamp"] == 0  # type: ignore[index]
    env.clock.advance(30_000)
    await ml.tick()
    await ml.rollover()  # waits for the switch the tick started
    ledgers: list[dict[str, int]] = ml.internal_stats()["ledgers"]  # type: ignore[assignment]
    assert [lg["entries"] for lg in ledgers] == [1] and ledgers[0]["timestamp"] == env.clock.now_ms()
    assert env.store.get_ledger(ledgers[0]["ledgerId"]).state == LedgerState.CLOSED
    pos = await ml.append(b"y")
    assert pos.ledger_id > ledgers[0]["ledgerId"]


async def test_reads_by_position_and_range_across_ledgers() -> None:
    env = Env()
    ml = await env.factory().open("t", config(max_entries=2))
    positions = [await ml.append(b"%d" % i) for i in range(5)]
    assert await ml.read_entry(positions[3]) == b"3"
    got = await ml.read_entries(positions[1], 3)
    assert got == [(positions[1], b"1"), (positions[2], b"2"), (positions[3], b"3")]
    assert await ml.read_entries(ml.next_position(positions[4]), 10) == []
    assert ml.next_position(positions[1]) == positions[2]
    assert ml.count_entries(positions[0], positions[4]) == 4
    assert ml.first_position == positions[0] and ml.last_confirmed_position == positions[4]
    with pytest.raises(EntryNotFoundError):
        await ml.read_entry(Position(positions[4].ledger_id, 1))
    with pytest.raises(EntryNotFoundError):
        await ml.read_entry(Position(9999, 0))


async def test_reads_past_the_last_entry_are_empty_until_an_append() -> None:
    """What a long poll in the topics layer relies on: the read position after the end stays
    valid, and the entry appended next is read from it."""
    env = Env()
    ml = await env.factory().open("t", config())
    assert ml.last_confirmed_position is None
    start = ml.next_position(Position(-1, -1))
    assert await ml.read_entries(start, 10) == []
    first = await ml.append(b"x")
    assert ml.last_confirmed_position == first
    assert await ml.read_entries(start, 10) == [(first, b"x")]
    after = ml.next_position(first)
    assert await ml.read_entries(after, 10) == []
    second = await ml.append(b"y")
    assert await ml.read_entries(after, 10) == [(second, b"y")]


async def test_find_position_by_publish_time() -> None:
    env = Env()
    ml = await env.factory().open("t", config(max_entries=3))
    positions = [await ml.append(batch(1000 + 10 * i)) for i in range(10)]
    assert await ml.find_position_by_publish_time(0) == positions[0]
    assert await ml.find_position_by_publish_time(1000) == positions[0]
    assert await ml.find_position_by_publish_time(1001) == positions[1]
    assert await ml.find_position_by_publish_time(1050) == positions[5]
    assert await ml.find_position_by_publish_time(1090) == positions[9]
    assert await ml.find_position_by_publish_time(1091) is None


async def test_restart_recovers_the_open_ledger_and_writes_to_a_new_one() -> None:
    env = Env()
    first = await env.factory().open("t", config())
    written = [await first.append(b"%d" % i) for i in range(7)]
    ledger_id = written[0].ledger_id
    # crash: the first factory is abandoned, never closed
    ml = await env.factory().open("t", config())
    meta = env.store.get_ledger(ledger_id)
    assert meta.state == LedgerState.CLOSED and meta.last_entry_id == 6 and meta.length_bytes == 7
    assert [p for _, p in await ml.read_entries(Position(0, 0), 100)] == [b"%d" % i for i in range(7)]
    pos = await ml.append(b"new")
    assert pos.ledger_id > ledger_id and pos.entry_id == 0
    # the old owner is fenced at the bookie: its append fails and it refuses writes from then on
    with pytest.raises(ManagedLedgerFencedError):
        await first.append(b"late")
    with pytest.raises(ManagedLedgerFencedError):
        await first.append(b"later")


async def test_restart_drops_empty_ledgers_and_deletes_them() -> None:
    env = Env()
    client = env.client
    assert isinstance(client, InMemoryLedgerClient)
    ml = await env.factory().open("t", config())
    await ml.append(b"a")
    await ml.rollover()
    client.fail_adds = BookieError(ErrorCode.UNAVAILABLE, "bookie gone")
    with pytest.raises(ManagedLedgerWriteError):
        await ml.append(b"b")  # a new, empty ledger joins the list, then fails
    client.fail_adds = None
    ids = env.store.get_managed_ledger("t").ledger_ids  # type: ignore[union-attr]
    assert len(ids) == 2
    ml2 = await env.factory().open("t", config())
    assert env.store.get_managed_ledger("t").ledger_ids == ids[:1]  # type: ignore[union-attr]
    async with asyncio.timeout(10):  # the open deletes it in the background
        while ids[1] in client.ledgers:
            await asyncio.sleep(0.01)
    assert ids[1] not in client.ledgers and ids[1] not in [m.ledger_id for m in env.store.list_ledgers()]
    assert [p for _, p in await ml2.read_entries(Position(0, 0), 10)] == [b"a"]


async def test_stale_owner_is_fenced_when_it_rolls_over() -> None:
    env = Env()
    old = await env.factory().open("t", config(max_entries=1))
    await env.factory().open("t", config())  # a new owner claims the list
    with pytest.raises(ManagedLedgerFencedError):
        await old.append(b"x")
    assert old.is_fenced


async def test_failed_add_fails_the_append_and_the_next_one_uses_a_new_ledger() -> None:
    env = Env()
    client = env.client
    assert isinstance(client, InMemoryLedgerClient)
    ml = await env.factory().open("t", config())
    first = await ml.append(b"ok")
    client.fail_adds = BookieError(ErrorCode.UNAVAILABLE, "bookie gone")
    with pytest.raises(ManagedLedgerWriteError) as info:
        await ml.append(b"lost")
    assert info.value.retriable
    client.fail_adds = None
    second = await ml.append(b"again")
    assert second.ledger_id > first.ledger_id
    assert env.store.get_ledger(first.ledger_id).state == LedgerState.CLOSED
    assert [p for _, p in await ml.read_entries(Position(0, 0), 10)] == [b"ok", b"again"]


async def test_close_closes_the_current_ledger_and_reopen_needs_no_recovery() -> None:
    env = Env()
    ml = await env.factory().open("t", config())
    pos = await ml.append(b"x")
    await ml.close()
    meta = env.store.get_ledger(pos.ledger_id)
    assert meta.state == LedgerState.CLOSED and meta.last_entry_id == 0
    ml2 = await env.factory().open("t", config())
    assert await ml2.read_entry(pos) == b"x"


async def test_factory_delete_removes_metadata_then_bookie_ledgers() -> None:
    env = Env()
    factory = env.factory()
    ml = await factory.open("t", config(max_entries=1))
    for i in range(3):
        await ml.append(b"%d" % i)
    await ml.open_cursor("sub")
    client = env.client
    assert isinstance(client, InMemoryLedgerClient)
    assert len(client.ledgers) == 3
    await factory.delete("t")
    assert env.store.get_managed_ledger("t") is None
    assert client.ledgers == {} and env.store.list_ledgers() == []
    assert env.store.list_cursors("t") == []
