"""The entry cache (managed_ledger.entry_cache): newest durable entries served without a bookie
read, within a byte budget shared by every managed ledger, never an entry of a deleted ledger."""

from __future__ import annotations

from typing import Any

import pytest

from managed_ledger.entry_cache import EntryCache
from managed_ledger.entry_format import decode_batch, entry_offsets
from managed_ledger.factory import ManagedLedgerFactory
from managed_ledger.position import Position
from tests.managed_ledger.ml_support import Env, batch, config


def test_runs_stop_at_the_first_entry_not_cached() -> None:
    cache = EntryCache(1_000)
    for entry_id in (0, 1, 3):
        cache.put(7, entry_id, b"e%d" % entry_id)
    assert cache.run(7, 0, 5) == [(Position(7, 0), b"e0"), (Position(7, 1), b"e1")]
    assert cache.run(7, 1, 1) == [(Position(7, 1), b"e1")]
    assert cache.run(7, 2, 5) == []
    assert cache.run(8, 0, 5) == []
    assert cache.hits == 3


def test_the_oldest_entries_go_first_past_the_budget() -> None:
    cache = EntryCache(10)
    for entry_id in range(4):
        cache.put(1, entry_id, b"xxxx")
    assert cache.size == 8 and len(cache) == 2
    assert cache.run(1, 0, 3) == []
    assert [p for p, _ in cache.run(1, 2, 3)] == [Position(1, 2), Position(1, 3)]
    cache.put(1, 9, b"y" * 11)  # larger than the whole budget: not kept, nothing pushed out
    assert cache.size == 8 and cache.run(1, 9, 9) == []
    cache.put(1, 3, b"zz")  # the same entry again replaces it
    assert cache.size == 6 and cache.run(1, 3, 3) == [(Position(1, 3), b"zz")]


class _CountingReads:
    """The environment's client with its read_entries calls counted."""

    def __init__(self, env: Env, monkeypatch: pytest.MonkeyPatch) -> None:
        self.calls: list[tuple[int, int, int]] = []
        inner = env.client.read_entries

        async def read_entries(spec: Any, first: int, last: int) -> list[bytes]:
            self.calls.append((spec.ledger_id, first, last))
            return await inner(spec, first, last)

        monkeypatch.setattr(env.client, "read_entries", read_entries)


def cached_factory(env: Env, budget: int) -> ManagedLedgerFactory:
    return ManagedLedgerFactory(
        env.client, env.store, env.bookies, clock=env.clock, timers=False, entry_cache_bytes=budget
    )


async def test_reads_at_the_tail_need_no_bookie(monkeypatch: pytest.MonkeyPatch) -> None:
    env = Env()
    ml = await cached_factory(env, 1 << 20).open("t", config())
    positions = [await ml.append(batch(1_000 + i)) for i in range(5)]
    reads = _CountingReads(env, monkeypatch)
    got = await ml.read_entries(positions[0], 10)
    assert reads.calls == []
    assert [p for p, _ in got] == positions
    # the entries as stored: stamped with their offsets, their messages intact
    assert [entry_offsets(payload) for _, payload in got] == [(i, 1) for i in range(5)]
    assert [decode_batch(p.ledger_id, p.entry_id, payload)[0].publish_time for p, payload in got] == [
        1_000 + i for i in range(5)
    ]
    await ml.close()


async def test_entries_pushed_out_are_read_from_the_bookie(monkeypatch: pytest.MonkeyPatch) -> None:
    env = Env()
    size = len(batch(1_000)) + 8  # stamped entries are a little longer than the batch
    ml = await cached_factory(env, 2 * size).open("t", config())
    positions = [await ml.append(batch(1_000 + i)) for i in range(5)]
    reads = _CountingReads(env, monkeypatch)
    got = await ml.read_entries(positions[0], 10)  # the first three are gone from the cache
    assert [p for p, _ in got] == positions
    assert reads.calls == [(positions[0].ledger_id, 0, 4)]
    reads.calls.clear()
    assert [p for p, _ in await ml.read_entries(positions[3], 10)] == positions[3:]
    assert reads.calls == []
    await ml.close()


async def test_a_trimmed_ledger_is_not_served_from_the_cache() -> None:
    env = Env()
    cfg = config(max_entries=2, retention_minutes=0, retention_mb=0)
    ml = await cached_factory(env, 1 << 20).open("t", cfg)
    positions = [await ml.append(batch(1_000 + i)) for i in range(5)]
    await ml.trim()  # no cursor: every closed ledger goes, the current one stays
    got = await ml.read_entries(positions[0], 10)
    assert [p for p, _ in got] == [positions[4]]
    await ml.close()
