"""Auto-recovery and a ledger that is still being written (review 2026-11-28, finding 6): the
segments before the writer's last one are copied without fencing, the writer is fenced only when
its last segment still names an unavailable bookie after the grace, and a bookie that joined the
cluster after a ledger was made is not counted missing from it because of its cookie's age."""

from __future__ import annotations

import pytest

from bookie.errors import BookieError
from bookie.ledger_metadata import BadVersionError, LedgerState
from bookie.registry import BookieCookie
from tests.bookie import test_autorecovery
from tests.bookie.test_autorecovery import ENTRIES, GRACE_MS, TIMEOUT_MS, Cluster, _addresses

bookies = test_autorecovery.bookies  # the fixtures, shared
cluster = test_autorecovery.cluster


def _named(of: Cluster, ledger_id: int) -> set[str]:
    return {b for _, bs in of.store.get_ledger(ledger_id).history() for b in bs}


async def test_a_writer_that_replaced_a_lost_bookie_is_not_fenced(cluster: Cluster) -> None:
    a, b, c, _ = _addresses(cluster)
    handle = await cluster.ledgers.create(3, 2, 2, ensemble=(a, b, c))
    for i in range(ENTRIES):
        await handle.add_entry(b"entry-%03d" % i)
    cluster.kill(a)
    for i in range(ENTRIES, 2 * ENTRIES):
        await handle.add_entry(b"entry-%03d" % i)  # a replaced by d
    cluster.tick(TIMEOUT_MS)
    cluster.auditor.audit_once()
    cluster.tick(GRACE_MS)
    assert cluster.auditor.audit_once().marked == 1  # a is lost: its closed segment is listed
    worker = cluster.worker(open_ledger_grace_ms=20_000)
    assert await worker.run_once()  # the closed segment copied at once, the row done
    assert cluster.store.list_underreplicated() == []
    cluster.tick(20_000)
    assert not await worker.run_once()
    try:
        await handle.add_entry(b"entry-%03d" % (2 * ENTRIES))
    except BookieError as exc:
        raise AssertionError(f"a healthy writer was fenced by re-replication: {exc}") from exc
    # The writer closes the row as re-replication left it (a swapped out of its first segment).
    closed = await cluster.ledgers.close(handle)
    assert closed.state == LedgerState.CLOSED and closed.last_entry_id == 2 * ENTRIES
    assert a not in _named(cluster, handle.ledger_id)
    assert worker.counters.ensemble_changes == 1
    cluster.assert_fully_replicated(handle.ledger_id)


async def test_an_ensemble_change_onto_a_newer_bookie_does_not_fence_the_writer(cluster: Cluster) -> None:
    a, b, c, d = _addresses(cluster)
    for address in (a, b, c):
        cluster.store.put_bookie_cookie(BookieCookie(address, "old-" + address, "/d", cluster.clock.now - 1))
    handle = await cluster.ledgers.create(3, 2, 2, ensemble=(a, b, c))
    cluster.tick(1_000)
    cluster.store.put_bookie_cookie(BookieCookie(d, "new-d", "/d", cluster.clock.now))  # d joins later
    for i in range(ENTRIES):
        await handle.add_entry(b"entry-%03d" % i)
    cluster.kill(c)
    for i in range(ENTRIES, 2 * ENTRIES):
        await handle.add_entry(b"entry-%03d" % i)  # c replaced by d
    cluster.auditor.audit_once()
    assert handle.ledger_id not in {r.ledger_id for r in cluster.store.list_underreplicated()}
    # Closed, d's segment is checked against d itself: it holds what it was given (no churn).
    await cluster.ledgers.close(handle)
    assert (await cluster.checker().check_once()).missing == {}
    assert cluster.auditor.audit_once().marked == 0 and cluster.store.list_underreplicated() == []


async def test_an_open_ledger_whose_last_segment_names_a_lost_bookie_is_fenced_after_the_grace(
    cluster: Cluster,
) -> None:
    """Lost bookie a in the writer's own segment (the writer replaced c, then a went while it was
    idle): the writer is left alone during the grace and fenced after it. (With two of the four
    bookies gone the recovery cannot finish here: the ledger stays IN_RECOVERY, listed.)"""
    a, b, c, _ = _addresses(cluster)
    handle = await cluster.ledgers.create(3, 2, 2, ensemble=(a, b, c))
    for i in range(ENTRIES):
        await handle.add_entry(b"entry-%03d" % i)
    cluster.kill(c)
    await handle.add_entry(b"entry-%03d" % ENTRIES)  # c replaced by d: (a, b, d) from entry 30
    cluster.kill(a)  # the writer is idle: it has not seen a go
    cluster.tick(TIMEOUT_MS)
    cluster.auditor.audit_once()
    cluster.tick(GRACE_MS)
    cluster.auditor.audit_once()
    (row,) = cluster.store.list_underreplicated()
    assert set(row.missing) == {a, c}
    worker = cluster.worker(open_ledger_grace_ms=20_000)
    assert await worker.run_once()
    assert cluster.store.get_ledger(handle.ledger_id).state == LedgerState.OPEN  # in the grace
    cluster.tick(20_000)
    await worker.run_once()
    assert cluster.store.get_ledger(handle.ledger_id).state != LedgerState.OPEN  # fenced
    assert [r.ledger_id for r in cluster.store.list_underreplicated()] == [handle.ledger_id]


async def test_a_writer_closing_a_ledger_someone_recovered_still_loses_the_race(cluster: Cluster) -> None:
    """Close re-reads the row only to keep re-replication's swaps: a row another owner recovered
    still fails the close with BadVersionError, which the managed ledger takes as being fenced."""
    a, b, c, _ = _addresses(cluster)
    handle = await cluster.ledgers.create(3, 2, 2, ensemble=(a, b, c))
    await handle.add_entry(b"entry-000")
    recovered = await cluster.ledgers.recover_and_close(handle.ledger_id)
    with pytest.raises(BadVersionError):
        await cluster.ledgers.close(handle)
    assert cluster.store.get_ledger(handle.ledger_id) == recovered
