"""The auto-recovery records of every metadata store (in-memory, SQLite, PostgreSQL): leader
leases and under-replicated ledgers, compare-and-set on version, seen alike by two instances;
and the bookie states only an operator or the auditor sets."""

from __future__ import annotations

from dataclasses import replace

import pytest

from bookie.errors import ProcessReplacedError
from bookie.ledger_metadata import BadVersionError, NotFoundError
from bookie.recovery_store import (
    LeaderLease,
    UnderReplicatedLedger,
    claim,
    claimable,
    mark_rotten,
    take_lease,
)
from bookie.registry import BookieRecord, BookieState
from tests.managed_ledger.test_metadata_contract import Opener, opener, store  # noqa: F401


def test_lease_create_and_cas(opener: Opener) -> None:  # noqa: F811
    first, second = opener(), opener()
    assert first.get_lease("auditor") is None
    created = first.put_lease(LeaderLease("auditor", "a", 100))
    assert created.version == 1 and second.get_lease("auditor") == created
    with pytest.raises(BadVersionError):
        second.put_lease(LeaderLease("auditor", "b", 200))  # version 0: one exists
    renewed = second.put_lease(replace(created, expires_ms=300))
    assert renewed.version == 2 and first.get_lease("auditor") == renewed
    with pytest.raises(BadVersionError):
        first.put_lease(replace(created, holder="c"))  # version 1 is stale now
    with pytest.raises(NotFoundError):
        first.put_lease(LeaderLease("other", "a", 1, version=4))


def test_take_lease_elects_one_holder_until_it_lapses(opener: Opener) -> None:  # noqa: F811
    a, b = opener(), opener()
    held = take_lease(a, "auditor", "a", now_ms=1_000, lease_ms=500)
    assert held is not None and held.holder == "a" and held.expires_ms == 1_500
    assert take_lease(b, "auditor", "b", now_ms=1_200, lease_ms=500) is None  # a holds it
    renewed = take_lease(a, "auditor", "a", now_ms=1_400, lease_ms=500)
    assert renewed is not None and renewed.expires_ms == 1_900
    taken = take_lease(b, "auditor", "b", now_ms=1_900, lease_ms=500)  # lapsed: b takes it
    assert taken is not None and taken.holder == "b"
    assert take_lease(a, "auditor", "a", now_ms=2_000, lease_ms=500) is None


def test_underreplicated_rows_create_list_cas_and_delete(opener: Opener) -> None:  # noqa: F811
    first, second = opener(), opener()
    assert first.list_underreplicated() == []
    row = first.put_underreplicated(UnderReplicatedLedger(7, ("b:2", "a:1", "b:2"), marked_ms=5))
    assert row == UnderReplicatedLedger(7, ("a:1", "b:2"), marked_ms=5, version=1)
    first.put_underreplicated(UnderReplicatedLedger(3, ("a:1",)))
    assert [r.ledger_id for r in second.list_underreplicated()] == [3, 7]
    assert second.get_underreplicated(7) == row and second.get_underreplicated(8) is None
    with pytest.raises(BadVersionError):
        second.put_underreplicated(UnderReplicatedLedger(7, ("c:1",)))
    with pytest.raises(ValueError, match="no missing bookie or rotten copy"):
        second.put_underreplicated(UnderReplicatedLedger(9, ()))
    grown = second.put_underreplicated(replace(row, missing=("a:1", "b:2", "c:3")))
    with pytest.raises(BadVersionError):
        first.delete_underreplicated(7, row.version)  # the row grew since it was read
    first.delete_underreplicated(7, grown.version)
    with pytest.raises(NotFoundError):
        first.delete_underreplicated(7, grown.version)
    with pytest.raises(NotFoundError):
        first.put_underreplicated(grown)
    assert [r.ledger_id for r in second.list_underreplicated()] == [3]


def test_one_worker_wins_a_claim_and_a_lapsed_claim_is_taken(opener: Opener) -> None:  # noqa: F811
    a, b = opener(), opener()
    row = a.put_underreplicated(UnderReplicatedLedger(1, ("x:1",)))
    assert claimable(row, 0)
    won = claim(a, row, "wa", now_ms=1_000, claim_ms=100)
    assert won is not None and (won.claimed_by, won.claim_expires_ms) == ("wa", 1_100)
    assert claim(b, row, "wb", now_ms=1_000, claim_ms=100) is None  # it read the old version
    current = b.get_underreplicated(1)
    assert current is not None and not claimable(current, 1_050) and claimable(current, 1_100)
    taken = claim(b, current, "wb", now_ms=1_100, claim_ms=100)
    assert taken is not None and taken.claimed_by == "wb"


def test_operator_states_survive_heartbeats_and_unknown_bookies_are_refused(
    store,  # noqa: F811
) -> None:
    store.put_bookie(BookieRecord("b1:3181", "i1", BookieState.WRITABLE, heartbeat_ms=1))
    with pytest.raises(NotFoundError):
        store.set_bookie_state("b9:3181", BookieState.DECOMMISSIONING)
    with pytest.raises(ValueError):
        store.set_bookie_state("b1:3181", BookieState.DOWN)
    for state in (BookieState.DECOMMISSIONING, BookieState.DECOMMISSIONED):
        assert store.set_bookie_state("b1:3181", state).state == state
        store.put_bookie(BookieRecord("b1:3181", "i1", BookieState.WRITABLE, heartbeat_ms=2, ledgers=3))
        (stored,) = store.list_bookies()
        assert (stored.state, stored.heartbeat_ms, stored.ledgers) == (state, 2, 3)
    assert store.set_bookie_state("b1:3181", BookieState.WRITABLE).state == BookieState.WRITABLE


def test_a_state_change_with_an_expected_state_is_a_compare_and_set(store) -> None:  # noqa: F811
    store.put_bookie(BookieRecord("b1:3181", "i1", BookieState.WRITABLE, heartbeat_ms=1))
    with pytest.raises(BadVersionError):
        store.set_bookie_state("b1:3181", BookieState.DECOMMISSIONED, expect=BookieState.DECOMMISSIONING)
    assert store.list_bookies()[0].state == BookieState.WRITABLE
    done = store.set_bookie_state("b1:3181", BookieState.DECOMMISSIONING, expect=BookieState.WRITABLE)
    assert done.state == BookieState.DECOMMISSIONING
    with pytest.raises(NotFoundError):
        store.set_bookie_state("b9:3181", BookieState.WRITABLE, expect=BookieState.DECOMMISSIONING)


def test_rotten_copies_are_kept_in_a_row_of_their_own(opener: Opener) -> None:  # noqa: F811
    first, second = opener(), opener()
    assert mark_rotten(first, 4, "a:1", {9, 2}, now_ms=10)
    row = second.get_underreplicated(4)
    assert row is not None and row.missing == () and row.rotten == (("a:1", 2), ("a:1", 9))
    assert row.named() == ("a:1",) and row.marked_ms == 10
    claimed = claim(second, row, "w", now_ms=20, claim_ms=100)
    assert claimed is not None
    assert mark_rotten(first, 4, "b:2", {2}, now_ms=30)  # a second holder: the claim is kept
    grown = first.get_underreplicated(4)
    assert grown is not None and grown.claimed_by == "w"
    assert grown.rotten == (("a:1", 2), ("a:1", 9), ("b:2", 2))
    assert mark_rotten(first, 4, "b:2", {2}, now_ms=40)  # already listed: nothing changes
    assert first.get_underreplicated(4) == grown
    both = second.put_underreplicated(replace(grown, missing=("c:3",)))
    assert both.named() == ("a:1", "b:2", "c:3")


def test_a_registration_expecting_another_process_is_refused(opener: Opener) -> None:  # noqa: F811
    first, second = opener(), opener()
    record = BookieRecord("b:1", "i", BookieState.WRITABLE, 100, process_id="p1")
    first.put_bookie(record, expect_process="")  # nobody registered yet
    first.put_bookie(replace(record, heartbeat_ms=200), expect_process="p1")  # its own heartbeat
    with pytest.raises(ProcessReplacedError):  # p2 expected nobody, or a third process
        second.put_bookie(replace(record, process_id="p2"), expect_process="")
    with pytest.raises(ProcessReplacedError):
        second.put_bookie(replace(record, process_id="p2"), expect_process="p0")
    second.put_bookie(replace(record, process_id="p2", heartbeat_ms=300), expect_process="p1")  # took over
    with pytest.raises(ProcessReplacedError):  # p1 comes back: its heartbeat is refused
        first.put_bookie(replace(record, heartbeat_ms=400), expect_process="p1")
    (row,) = first.list_bookies()
    assert (row.process_id, row.heartbeat_ms) == ("p2", 300)
    first.put_bookie(replace(record, process_id="", heartbeat_ms=500))  # no expectation: no check
    (row,) = second.list_bookies()
    assert row.process_id == "" and row.heartbeat_ms == 500
