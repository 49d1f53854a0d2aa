"""The managed ledger's key rules on the SQL metadata store (SQLite and PostgreSQL)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from bookie.memory import InMemoryLedgerClient
from managed_ledger import retention
from managed_ledger.errors import ManagedLedgerFencedError
from managed_ledger.metadata.api import LedgerState
from managed_ledger.metadata.sql import SqlMetadataStore
from managed_ledger.position import Position
from tests.managed_ledger.ml_support import Env, batch, config, ledgers_of


@pytest.fixture
def env(metadata_url: str) -> Iterator[Env]:
    store = SqlMetadataStore(metadata_url)
    try:
        yield Env(store=store)
    finally:
        store.close()


async def test_rollover_and_restart_recovery(env: Env) -> None:
    ml = await env.factory().open("t", config(max_entries=2))
    positions = [await ml.append(b"e%d" % i) for i in range(5)]
    ledgers = ledgers_of(ml)
    assert [lg["entries"] for lg in ledgers] == [2, 2, 1]
    assert [lg["timestamp"] == 0 for lg in ledgers] == [False, False, True]
    ml2 = await env.factory().open("t", config(max_entries=2))  # crash of the first owner
    last = env.store.get_ledger(positions[-1].ledger_id)
    assert last.state == LedgerState.CLOSED and last.last_entry_id == 0 and last.length_bytes == 2
    assert [p for _, p in await ml2.read_entries(Position(0, 0), 10)] == [b"e%d" % i for i in range(5)]
    assert (await ml2.append(b"x")).ledger_id > positions[-1].ledger_id
    with pytest.raises(ManagedLedgerFencedError):
        await ml.append(b"stale")


async def test_cursor_flush_is_one_statement_batch_and_recovers(env: Env) -> None:
    store = env.store
    assert isinstance(store, SqlMetadataStore)
    ml = await env.factory().open("t", config())
    positions = [await ml.append(b"%d" % i) for i in range(2_000)]
    a = await ml.open_cursor("a", "earliest")
    b = await ml.open_cursor("b", "earliest")
    before = store.statement_count
    for p in positions[::2]:
        a.ack([p])
        b.ack([p])
    a.ack_cumulative(positions[999])
    assert store.statement_count == before  # acks touch no SQL
    await a.flush()  # flushes both dirty cursors in one transaction
    assert 0 < store.statement_count - before <= 4
    ml2 = await env.factory().open("t", config())
    assert ml2.cursors["a"].mark_delete_position == positions[1000]
    assert ml2.cursors["b"].backlog == 1_000
    assert len(ml2.cursors["b"].individually_deleted_ranges()) == 999  # entry 0 is mark-deleted


async def test_dedup_rebuild_and_reset_by_time(env: Env) -> None:
    ml = await env.factory().open("t", config(dedup=True, dedup_entries=4, max_entries=3))
    for s in range(10):
        assert ml.dedup_check("p", [s]) == [False]
        await ml.append(batch(1_000 + s, "p", s), producer_name="p", highest_sequence_id=s)
    cursor = await ml.open_cursor("s", "earliest")
    ml2 = await env.factory().open("t", config(dedup=True, max_entries=3))
    assert ml2.dedup_check("p", [9, 10]) == [True, False]
    await ml2.cursors["s"].reset_to_time(1_005)
    ml3 = await env.factory().open("t", config(dedup=True, max_entries=3))
    assert ml3.cursors["s"].backlog == 5
    assert cursor.name == "s"


async def test_trim_and_interrupted_delete(env: Env) -> None:
    client = env.client
    assert isinstance(client, InMemoryLedgerClient)
    ml = await env.factory().open("t", config(max_entries=1, retention_minutes=0, retention_mb=0))
    cursor = await ml.open_cursor("s", "earliest")
    positions = [await ml.append(b"%d" % i) for i in range(4)]
    cursor.ack(positions[:2])
    await ml.trim()
    assert env.store.get_managed_ledger("t").ledger_ids == tuple(p.ledger_id for p in positions[2:])  # type: ignore[union-attr]
    assert {m.ledger_id for m in env.store.list_ledgers()} == {p.ledger_id for p in positions[2:]}
    meta = env.store.get_managed_ledger("t")
    assert meta is not None and retention.deleting_ids(meta.properties) == []
    factory = env.factory()
    await factory.delete("t")
    assert env.store.get_managed_ledger("t") is None and client.ledgers == {}
