"""Rotten copies listed in the under-replicated list (`bookie.scrubber`) are rewritten in place by
the recovery worker (`bookie.rot_repair`), over real bookie servers on the in-memory storage and
the in-memory metadata store (test_autorecovery.py's cluster). The fake storage cannot rot, so a
rotten copy is one the bookie lost: the worker's rewrite puts it back either way. The auditor keeps
such a row although its bookie heartbeats; the ledger's metadata never changes (no ensemble
change, no fencing of an open ledger); a holder that is down holds the row back until it is up."""

from __future__ import annotations

from bookie.ledger_metadata import LedgerState
from bookie.ledgers import ledger_spec
from bookie.recovery_store import mark_rotten
from tests.bookie.test_autorecovery import (  # noqa: F401
    ENTRIES,
    GRACE_MS,
    START_MS,
    Cluster,
    _addresses,
    bookies,
    cluster,
)


def _rot(c: Cluster, bookie: str, ledger_id: int, entry_ids: set[int]) -> None:
    for e in entry_ids:
        del c.bookies[bookie].storage.ledgers[ledger_id].entries[e]
    assert mark_rotten(c.store, ledger_id, bookie, entry_ids, START_MS)


def _stored(c: Cluster, bookie: str, ledger_id: int, entry_id: int) -> bytes | None:
    return c.bookies[bookie].storage.ledgers[ledger_id].entries.get(entry_id)


async def test_rotten_copies_are_rewritten_in_place_and_the_row_dropped(cluster: Cluster) -> None:  # noqa: F811
    a, b, c, _d = _addresses(cluster)
    meta = await cluster.ledger((a, b, c))
    spec = ledger_spec(meta)
    on_a = [e for e in range(ENTRIES) if a in spec.write_set(e)][:3]
    _rot(cluster, a, meta.ledger_id, set(on_a))
    cluster.tick(1_000)
    assert cluster.auditor.audit_once().cleared == 0  # a heartbeats, but its rotten copies stay listed
    row = cluster.store.get_underreplicated(meta.ledger_id)
    assert row is not None and row.missing == () and row.rotten == tuple((a, e) for e in on_a)
    worker = cluster.worker()
    assert await worker.run_once() and not await worker.run_once()
    assert cluster.store.list_underreplicated() == []
    assert [_stored(cluster, a, meta.ledger_id, e) for e in on_a] == [b"entry-%03d" % e for e in on_a]
    assert worker.counters.recovered_entries == 3 and worker.counters.ensemble_changes == 0
    assert cluster.store.get_ledger(meta.ledger_id) == meta  # the same bookies hold it
    cluster.assert_fully_replicated(meta.ledger_id)


async def test_a_rotten_copy_in_an_open_ledger_is_rewritten_without_fencing(cluster: Cluster) -> None:  # noqa: F811
    a, b, _c, _d = _addresses(cluster)
    meta = await cluster.ledger((a, b), close=False)
    _rot(cluster, b, meta.ledger_id, {4})
    assert await cluster.worker().run_once()
    assert _stored(cluster, b, meta.ledger_id, 4) == b"entry-004"
    after = cluster.store.get_ledger(meta.ledger_id)
    assert after.state == LedgerState.OPEN and after == meta
    assert cluster.store.list_underreplicated() == []


async def test_a_holder_that_is_down_holds_the_row_until_it_is_back(cluster: Cluster) -> None:  # noqa: F811
    a, b, c, _d = _addresses(cluster)
    meta = await cluster.ledger((a, b, c))
    entry = next(e for e in range(ENTRIES) if c in ledger_spec(meta).write_set(e))
    _rot(cluster, c, meta.ledger_id, {entry})
    cluster.dead.add(c)  # not heartbeating (its server still answers: only the registry counts)
    cluster.tick(20_000)
    worker = cluster.worker()
    assert await worker.run_once()
    row = cluster.store.get_underreplicated(meta.ledger_id)
    assert row is not None and row.rotten == ((c, entry),)  # held back, not dropped
    assert _stored(cluster, c, meta.ledger_id, entry) is None
    assert not await worker.run_once()  # deferred for a grace period
    cluster.dead.discard(c)
    cluster.tick(GRACE_MS * 7)
    assert await worker.run_once()
    assert cluster.store.list_underreplicated() == []
    assert _stored(cluster, c, meta.ledger_id, entry) == b"entry-%03d" % entry


async def test_a_rotten_copy_on_a_bookie_no_longer_in_the_write_set_is_dropped(cluster: Cluster) -> None:  # noqa: F811
    a, b, c, d = _addresses(cluster)
    meta = await cluster.ledger((a, b, c))
    spec = ledger_spec(meta)
    not_on_d = next(e for e in range(ENTRIES) if d not in spec.write_set(e))
    assert mark_rotten(cluster.store, meta.ledger_id, d, {not_on_d, ENTRIES + 5}, START_MS)
    worker = cluster.worker()
    assert await worker.run_once()
    assert cluster.store.list_underreplicated() == [] and worker.counters.recovered_entries == 0
