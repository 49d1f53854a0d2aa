"""Dedup and retention on the in-memory seams."""

from __future__ import annotations

import asyncio

import pytest

from bookie.errors import BookieError, ErrorCode
from bookie.memory import InMemoryLedgerClient
from bookie.types import LedgerSpec
from managed_ledger import retention
from managed_ledger.dedup import Deduplication
from managed_ledger.errors import ManagedLedgerWriteError, SequenceInFlightError
from managed_ledger.ledger import ManagedLedger
from managed_ledger.position import Position
from managed_ledger.ranges import LedgerInfo
from tests.managed_ledger.ml_support import Env, batch, config

MB = 1024 * 1024


def test_dedup_rule_counts_earlier_ids_of_the_same_batch() -> None:
    d = Deduplication()
    assert d.check("p", [1, 2, 2, None, 1, 3]) == [False, False, True, False, True, False]
    d.record_persisted("p", 3)
    assert d.check("p", [3, 4, 4]) == [True, False, True]
    assert d.check("q", [0]) == [False]
    d.write_failed()  # 4 was pushed, never persisted: a retry of it is accepted
    assert d.check("p", [2, 3, 4]) == [True, True, False]


async def _produce(ml: ManagedLedger, producer: str, seqs: list[int], publish_time: int = 1) -> bool:
    """Topic-layer style produce of one batch: False when every message was a duplicate."""
    dup = ml.dedup_check(producer, seqs)
    fresh = [s for s, d in zip(seqs, dup, strict=True) if not d]
    if not fresh:
        return False
    await ml.append(
        batch(publish_time, producer, *fresh), producer_name=producer, highest_sequence_id=max(fresh)
    )
    return True


async def test_dedup_off_accepts_everything() -> None:
    env = Env()
    ml = await env.factory().open("t", config())
    assert ml.dedup_check("p", [1, 1, 1]) == [False, False, False]


async def test_failed_append_lets_the_retry_through() -> None:
    env = Env()
    client = env.client
    assert isinstance(client, InMemoryLedgerClient)
    ml = await env.factory().open("t", config(dedup=True))
    assert await _produce(ml, "p", [1, 2])
    client.fail_adds = BookieError(ErrorCode.UNAVAILABLE, "gone")
    with pytest.raises(ManagedLedgerWriteError):
        await _produce(ml, "p", [3])
    client.fail_adds = None
    with pytest.raises(SequenceInFlightError):  # until the failed ledger is recovered
        await _produce(ml, "p", [3])
    await ml.rollover()  # waits for the recovery the failure started
    assert await _produce(ml, "p", [3])
    assert not await _produce(ml, "p", [3])


@pytest.mark.parametrize("snapshot_every", [1, 3, 1000])
async def test_dedup_state_is_rebuilt_after_a_crash(snapshot_every: int) -> None:
    env = Env()
    ml = await env.factory().open("t", config(dedup=True, dedup_entries=snapshot_every, max_entries=2))
    for s in range(1, 8):
        assert await _produce(ml, "p", [s * 10, s * 10 + 1])
    assert await _produce(ml, "q", [5])
    ml2 = await env.factory().open("t", config(dedup=True, max_entries=2))  # crash, reopen
    assert not await _produce(ml2, "p", [70, 71])
    assert not await _produce(ml2, "q", [5])
    assert await _produce(ml2, "p", [72])
    await ml2.close()
    snap = env.store.get_dedup_snapshot("t")
    assert snap is not None and snap.sequences == {"p": 72, "q": 5}
    ml3 = await env.factory().open("t", config(dedup=True))
    assert not await _produce(ml3, "p", [72])
    assert await _produce(ml3, "p", [73])


async def test_turning_dedup_on_later_rebuilds_from_the_stored_entries() -> None:
    env = Env()
    ml = await env.factory().open("t", config(dedup=True))
    assert await _produce(ml, "p", [1, 2, 3])
    await ml.close()  # snapshot stored
    ml2 = await env.factory().open("t", config())  # dedup off: the producer's state is not loaded
    await ml2.append(batch(1, "p", 4))  # written while dedup was off
    ml2.update_config(config(dedup=True))
    await ml2.rollover()
    for _ in range(10):  # let the rebuild task run (no timing: it needs a few loop passes)
        await asyncio.sleep(0)
    assert ml2.dedup_check("p", [3, 4, 5]) == [True, True, False]
    await ml2.close()  # the snapshot CAS uses the stored version: no fencing
    assert not ml2.is_fenced
    assert env.store.get_dedup_snapshot("t").sequences == {"p": 4}  # type: ignore[union-attr]


def _infos(*spec: tuple[int, int, int, int]) -> list[LedgerInfo]:
    return [LedgerInfo(i, n, size, ts, LedgerSpec(i, ("b:1",))) for i, n, size, ts in spec]


@pytest.mark.parametrize(
    ("time_minutes", "size_mb", "slowest", "expected"),
    [
        (0, 0, None, [1, 2, 3]),  # no cursor: everything closed is consumed
        (0, 0, Position(2, 4), [1, 2]),  # ledger 3 not wholly consumed
        (0, 0, Position(2, 3), [1]),
        (-1, -1, None, []),  # unlimited
        (-1, 2, None, [1, 2]),  # keep at least 2 MB: 4 MB total, each ledger 1 MB
        (10, -1, None, [1]),  # only ledger 1 closed more than 10 minutes ago
        (10, 3, None, [1]),
        (60, 3, None, [1]),  # over size by one ledger
    ],
)
def test_retention_rule(
    time_minutes: int, size_mb: int, slowest: Position | None, expected: list[int]
) -> None:
    from managed_ledger.api import RetentionPolicy

    now = 100 * 60_000
    ledgers = _infos(
        (1, 5, MB, now - 20 * 60_000), (2, 5, MB, now - 5 * 60_000), (3, 5, MB, now - 60_000), (4, 5, MB, 0)
    )
    got = retention.ledgers_to_delete(ledgers, slowest, RetentionPolicy(time_minutes, size_mb), now)
    assert got == expected


async def test_trim_deletes_consumed_ledgers_metadata_first_and_never_the_current_one() -> None:
    env = Env()
    client = env.client
    assert isinstance(client, InMemoryLedgerClient)
    ml = await env.factory().open("t", config(max_entries=2, retention_minutes=0, retention_mb=0))
    cursor = await ml.open_cursor("s", "earliest")
    pos = [await ml.append(b"%d" % i) for i in range(7)]  # ledgers 2, 2, 2, 1
    cursor.ack(pos[:3])  # ledger 1 consumed, ledger 2 half
    await ml.trim()
    ids = [p.ledger_id for p in pos]
    assert env.store.get_managed_ledger("t").ledger_ids == tuple(dict.fromkeys(ids[2:]))  # type: ignore[union-attr]
    assert ids[0] not in client.ledgers
    assert ml.first_position == pos[2]
    cursor.ack(pos)  # everything consumed: the current ledger stays
    await ml.trim()
    assert env.store.get_managed_ledger("t").ledger_ids == (ids[6],)  # type: ignore[union-attr]
    assert [p for _, p in await ml.read_entries(Position(0, 0), 10)] == [b"6"]
    assert cursor.backlog == 0


async def test_readers_do_not_hold_data_and_unlimited_retention_keeps_it() -> None:
    env = Env()
    ml = await env.factory().open("keep", config(max_entries=1, retention_minutes=-1, retention_mb=-1))
    for i in range(3):
        await ml.append(b"%d" % i)
    await ml.trim()
    assert len(ml.ledger_list) == 3
    gone = await env.factory().open("gone", config(max_entries=1, retention_minutes=0, retention_mb=0))
    for i in range(3):
        await gone.append(b"%d" % i)
    await gone.tick()  # the timer trims too
    assert len(gone.ledger_list) == 1


async def test_crash_between_metadata_and_bookie_delete_is_finished_on_open() -> None:
    env = Env()
    client = env.client
    assert isinstance(client, InMemoryLedgerClient)
    ml = await env.factory().open("t", config(max_entries=1, retention_minutes=0, retention_mb=0))
    pos = [await ml.append(b"%d" % i) for i in range(3)]
    real_delete = client.delete_ledger

    async def crash(spec: object) -> None:
        raise RuntimeError("process killed here")  # a bookie that fails is no crash: see below

    client.delete_ledger = crash  # type: ignore[method-assign]
    with pytest.raises(RuntimeError):
        await ml.trim()
    client.delete_ledger = real_delete  # type: ignore[method-assign]
    meta = env.store.get_managed_ledger("t")
    assert meta is not None and pos[0].ledger_id not in meta.ledger_ids
    assert retention.deleting_ids(meta.properties) == [pos[0].ledger_id, pos[1].ledger_id]
    assert pos[0].ledger_id in client.ledgers  # the bookie still holds it
    await env.factory().open("t", config(max_entries=1))  # finishes them in the background
    async with asyncio.timeout(10):
        while retention.deleting_ids(env.store.get_managed_ledger("t").properties):  # type: ignore[union-attr]
            await asyncio.sleep(0.01)
    assert pos[0].ledger_id not in client.ledgers and pos[1].ledger_id not in client.ledgers
    assert {m.ledger_id for m in env.store.list_ledgers()} == {pos[2].ledger_id}


@pytest.mark.parametrize(
    ("horizon", "expected"),
    [
        (None, []),  # no run yet (or not known yet): compaction holds everything
        (Position(1, 4), [1]),
        (Position(2, 3), [1]),  # ledger 2 only partly compacted
        (Position(2, 4), [1, 2]),
        (Position(9, 0), [1, 2, 3]),  # what retention allows, no more
    ],
)
def test_compaction_holds_ledgers_after_the_horizon(horizon: Position | None, expected: list[int]) -> None:
    ledgers = _infos((1, 5, MB, 1), (2, 5, MB, 2), (3, 5, MB, 3), (4, 5, MB, 0))
    assert retention.compacted_only(ledgers, [1, 2, 3], horizon) == expected


async def test_trim_with_compaction_on_waits_for_the_horizon() -> None:
    from dataclasses import replace

    env = Env()
    held = replace(config(max_entries=1, retention_minutes=0, retention_mb=0), retain_uncompacted=True)
    ml = await env.factory().open("c", held)
    pos = [await ml.append(b"%d" % i) for i in range(4)]  # one entry per ledger
    await ml.trim()  # no cursor: all consumed, but none compacted
    assert len(ml.ledger_list) == 4
    ml.compacted_through = pos[1]
    await ml.trim()
    assert [info.ledger_id for info in ml.ledger_list] == [p.ledger_id for p in pos[2:]]
    ml.update_config(replace(held, retain_uncompacted=False))
    await ml.trim()
    assert [info.ledger_id for info in ml.ledger_list] == [pos[3].ledger_id]
