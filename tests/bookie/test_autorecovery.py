"""The auditor and the recovery worker over real bookie servers (in-process, on the in-memory
storage) and the in-memory metadata store, on a manual clock: a lost bookie's ledgers are listed
only after the grace period and get their copies back elsewhere; a decommissioned bookie is
drained and marked so; an OPEN ledger is left to its writer for a grace period, then fenced and
closed; a deleted ledger's row is dropped; a claim held by a dead worker is taken once it lapses.
The process-level tests (kill -9, wiped disks, a broker) are in test_autorecovery_process.py."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator

import pytest

from bookie.auditor import AUDITOR_LEASE, Auditor, AuditorConfig
from bookie.client import BookieLedgerClient
from bookie.errors import BookieError, ErrorCode
from bookie.ledger_checker import CheckerConfig, LedgerChecker
from bookie.ledger_metadata import LedgerMetadata, LedgerState
from bookie.ledgers import LedgerManager, ledger_spec
from bookie.recovery_store import UnderReplicatedLedger, claim
from bookie.registry import BookieCookie, BookieRecord, BookieState, MetadataBookieRegistry, RegistryConfig
from bookie.replica_io import ReplicaIO
from bookie.rereplication import ReplicationWorker, WorkerConfig
from bookie.server import ServerConfig
from managed_ledger.metadata.memory import InMemoryMetadataStore
from tests.bookie.conftest import ThreadBookie

START_MS = 1_700_000_000_000
TIMEOUT_MS = 10_000
GRACE_MS = 5_000
ENTRIES = 30


class Clock:
    def __init__(self) -> None:
        self.now = START_MS

    def __call__(self) -> int:
        return self.now


@pytest.fixture
def bookies() -> Iterator[list[ThreadBookie]]:
    started = [ThreadBookie(ServerConfig(port=0)).start() for _ in range(4)]
    try:
        yield started
    finally:
        for b in started:
            if b.loop.is_running():
                b.stop()


class Cluster:
    def __init__(self, bookies: list[ThreadBookie]) -> None:
        self.bookies = {b.address: b for b in bookies}
        self.clock = Clock()
        self.store = InMemoryMetadataStore()
        self.client = BookieLedgerClient()
        self.io = ReplicaIO()
        self.registry = MetadataBookieRegistry(self.store, RegistryConfig(TIMEOUT_MS), self.clock)
        self.ledgers = LedgerManager(self.store, self.client, clock=self.clock, placement=self.registry)
        self.auditor = Auditor(self.store, self.registry, AuditorConfig("a1", 15_000, GRACE_MS), self.clock)
        self.dead: set[str] = set()
        self.heartbeat()

    def worker(self, name: str = "w1", **config: int) -> ReplicationWorker:
        return ReplicationWorker(
            self.store, self.ledgers, self.registry, self.io, WorkerConfig(name, **config), self.clock
        )

    def checker(self, **config: int) -> LedgerChecker:
        return LedgerChecker(
            self.store, self.registry, self.io, CheckerConfig(**config), self.auditor.confirmed, self.clock
        )

    def heartbeat(self) -> None:
        for address in self.bookies:
            if address not in self.dead:
                # As the bookie's own process would: under the instance its cookie names.
                cookie = self.store.get_bookie_cookie(address)
                instance = "i" if cookie is None else cookie.instance_id
                self.store.put_bookie(BookieRecord(address, instance, BookieState.WRITABLE, self.clock.now))

    def tick(self, ms: int) -> None:
        self.clock.now += ms
        self.heartbeat()

    def kill(self, address: str) -> None:
        self.bookies[address].stop()
        self.dead.add(address)

    async def ledger(self, ensemble: tuple[str, ...], close: bool = True) -> LedgerMetadata:
        handle = await self.ledgers.create(len(ensemble), 2, 2, ensemble=ensemble)
        for i in range(ENTRIES):
            await handle.add_entry(b"entry-%03d" % i)
        return await self.ledgers.close(handle) if close else handle.metadata

    def holders(self, ledger_id: int, entry_id: int) -> set[str]:
        return {
            a
            for a, b in self.bookies.items()
            if a not in self.dead and entry_id in getattr(b.storage.ledgers.get(ledger_id), "entries", {})
        }

    def assert_fully_replicated(self, ledger_id: int) -> None:
        meta = self.store.get_ledger(ledger_id)
        spec = ledger_spec(meta)
        for e in range(meta.last_entry_id + 1):
            write_set = set(spec.write_set(e))
            assert not write_set & self.dead, (e, write_set)
            assert write_set <= self.holders(ledger_id, e), (e, write_set)
            for address in write_set:
                stored = self.bookies[address].storage.ledgers[ledger_id].entries[e]
                assert stored == b"entry-%03d" % e


@pytest.fixture
async def cluster(bookies: list[ThreadBookie]) -> AsyncIterator[Cluster]:
    c = Cluster(bookies)
    try:
        yield c
    finally:
        await c.io.close()
        await c.client.close()


def _addresses(cluster: Cluster) -> list[str]:
    return sorted(cluster.bookies)


async def test_lost_bookie_is_listed_after_the_grace_and_recovered(cluster: Cluster) -> None:
    a, b, c, d = _addresses(cluster)
    on_a = [await cluster.ledger((a, b, c)), await cluster.ledger((b, a, d))]
    elsewhere = await cluster.ledger((b, c, d))
    cluster.kill(a)
    cluster.tick(TIMEOUT_MS)
    assert cluster.auditor.audit_once().lost == set()  # down, but not for the grace period yet
    assert cluster.store.list_underreplicated() == []
    cluster.tick(GRACE_MS)
    result = cluster.auditor.audit_once()
    assert result.leader and result.lost == {a} and result.marked == 2
    rows = cluster.store.list_underreplicated()
    assert [(r.ledger_id, r.missing) for r in rows] == [(m.ledger_id, (a,)) for m in on_a]
    worker = cluster.worker()
    assert await worker.run_once() and await worker.run_once() and not await worker.run_once()
    assert cluster.store.list_underreplicated() == []
    for meta in [*on_a, elsewhere]:
        cluster.assert_fully_replicated(meta.ledger_id)
    wanted = sum(1 for m in on_a for e in range(ENTRIES) if a in ledger_spec(m).write_set(e))
    assert worker.counters.recovered_entries == wanted and worker.counters.ensemble_changes == 2
    assert worker.counters.recovery_bytes == wanted * len(b"entry-000")
    assert cluster.store.get_ledger(elsewhere.ledger_id) == elsewhere  # untouched
    # A second bookie lost now costs no entry: every one has a copy on a live bookie.
    cluster.kill(b)
    for meta in [*on_a, elsewhere]:
        assert await cluster.ledgers.read(meta.ledger_id, 0, ENTRIES - 1) == [
            b"entry-%03d" % i for i in range(ENTRIES)
        ]


async def test_decommission_drains_the_bookie_then_marks_it(cluster: Cluster) -> None:
    a, b, c, d = _addresses(cluster)
    metas = [await cluster.ledger((a, b, c)), await cluster.ledger((d, a, b))]
    cluster.store.set_bookie_state(a, BookieState.DECOMMISSIONING)
    result = cluster.auditor.audit_once()  # no grace for a decommission: it is alive
    assert result.decommissioning == {a} and result.marked == 2 and result.decommissioned == []
    worker = cluster.worker()
    while await worker.run_once():
        pass
    assert cluster.auditor.audit_once().decommissioned == [a]
    assert {s.bookie_id: s.state for s in cluster.registry.all_bookies()}[a] == BookieState.DECOMMISSIONED
    cluster.dead.add(a)  # it holds nothing the metadata names any more
    for meta in metas:
        cluster.assert_fully_replicated(meta.ledger_id)
        assert a not in {x for _, bs in cluster.store.get_ledger(meta.ledger_id).history() for x in bs}


async def test_open_ledger_is_left_to_its_writer_then_fenced_and_closed(cluster: Cluster) -> None:
    a, b, c, _ = _addresses(cluster)
    meta = await cluster.ledger((a, b, c), close=False)
    cluster.kill(a)
    cluster.tick(TIMEOUT_MS)
    cluster.auditor.audit_once()
    cluster.tick(GRACE_MS)
    assert cluster.auditor.audit_once().marked == 1
    worker = cluster.worker(open_ledger_grace_ms=20_000)
    assert await worker.run_once()  # claimed, but deferred: the writer may still close it
    assert cluster.store.get_ledger(meta.ledger_id).state == LedgerState.OPEN
    (row,) = cluster.store.list_underreplicated()
    assert row.claim_expires_ms == row.marked_ms + 20_000
    assert not await worker.run_once()
    cluster.tick(20_000)
    assert await worker.run_once()
    closed = cluster.store.get_ledger(meta.ledger_id)
    assert closed.state == LedgerState.CLOSED and closed.last_entry_id == ENTRIES - 1
    assert cluster.store.list_underreplicated() == []
    cluster.assert_fully_replicated(meta.ledger_id)


async def test_deleted_ledger_row_is_dropped(cluster: Cluster) -> None:
    a, b, c, _ = _addresses(cluster)
    meta = await cluster.ledger((a, b, c))
    cluster.store.put_underreplicated(UnderReplicatedLedger(meta.ledger_id, (a,), START_MS))
    await cluster.ledgers.delete(meta.ledger_id)
    assert await cluster.worker().run_once()
    assert cluster.store.list_underreplicated() == []


async def test_ledger_deleted_during_the_copy_is_dropped(cluster: Cluster) -> None:
    a, b, c, _ = _addresses(cluster)
    meta = await cluster.ledger((a, b, c))
    cluster.store.set_bookie_state(a, BookieState.DECOMMISSIONING)
    cluster.auditor.audit_once()
    read_range = cluster.io.read_range

    async def deleting_read(address: str, ledger_id: int, entries: range, max_bytes: int) -> list[bytes]:
        await cluster.ledgers.delete(meta.ledger_id)  # a retention run, say, while we copy
        return await read_range(address, ledger_id, entries, max_bytes)

    cluster.io.read_range = deleting_read  # type: ignore[method-assign]
    assert await cluster.worker().run_once()
    assert cluster.store.list_underreplicated() == [] and cluster.store.list_ledgers() == []


async def test_a_dead_workers_claim_is_taken_once_it_lapses(cluster: Cluster) -> None:
    a, b, c, _ = _addresses(cluster)
    meta = await cluster.ledger((a, b, c))
    cluster.store.set_bookie_state(a, BookieState.DECOMMISSIONING)
    cluster.auditor.audit_once()
    (row,) = cluster.store.list_underreplicated()
    assert claim(cluster.store, row, "dead", cluster.clock.now, 30_000) is not None  # then it died
    survivor = cluster.worker("w2")
    assert not await survivor.run_once()
    cluster.tick(30_000)
    assert await survivor.run_once()
    assert cluster.store.list_underreplicated() == []
    cluster.dead.add(a)
    cluster.assert_fully_replicated(meta.ledger_id)


async def test_only_the_lease_holder_audits(cluster: Cluster) -> None:
    a, b, c, _ = _addresses(cluster)
    await cluster.ledger((a, b, c))
    cluster.store.set_bookie_state(a, BookieState.DECOMMISSIONING)
    other = Auditor(cluster.store, cluster.registry, AuditorConfig("a2", 15_000, GRACE_MS), cluster.clock)
    assert cluster.auditor.audit_once().leader
    assert not other.audit_once().leader
    cluster.tick(15_000)  # a1 stopped renewing: a2 takes over
    assert other.audit_once().leader
    lease = cluster.store.get_lease(AUDITOR_LEASE)
    assert lease is not None and lease.holder == "a2"


async def test_striped_segment_is_copied_by_ranges_with_fallback(cluster: Cluster) -> None:
    """E=3 Qw=2: the drained bookie holds two of every three entries (two runs, each read from
    the other bookie of its write set by strided ranges). One source lacks an entry mid-run and
    the other fails mid-run: only those two entries are read one by one (from the drained
    bookie), the failed source is not asked again, and every copy lands, with its bytes."""
    a, b, c, d = _addresses(cluster)
    meta = await cluster.ledger((a, b, c))
    del cluster.bookies[b].storage.ledgers[meta.ledger_id].entries[12]  # b's run: 0, 3, 6, ...
    cluster.store.set_bookie_state(a, BookieState.DECOMMISSIONING)
    cluster.auditor.audit_once()
    io = cluster.io
    read_range, read_entry = io.read_range, io.read_entry
    ranges: list[tuple[str, int]] = []
    singles: list[tuple[str, int]] = []

    async def failing_range(address: str, ledger_id: int, entries: range, max_bytes: int) -> list[bytes]:
        ranges.append((address, entries[0]))
        if address == c and entries[0] > 2:  # c answered its first range, then went away
            raise BookieError(ErrorCode.UNAVAILABLE, "connection lost")
        return await read_range(address, ledger_id, entries, max_bytes)

    async def counted_read(address: str, ledger_id: int, entry_id: int) -> bytes | None:
        singles.append((address, entry_id))
        return await read_entry(address, ledger_id, entry_id)

    io.read_range = failing_range  # type: ignore[method-assign]
    io.read_entry = counted_read  # type: ignore[method-assign]
    worker = cluster.worker(read_chunk_entries=4)
    assert await worker.run_once()
    assert cluster.store.list_underreplicated() == []
    wanted = [e for e in range(ENTRIES) if a in ledger_spec(meta).write_set(e)]
    assert sorted(cluster.bookies[d].storage.ledgers[meta.ledger_id].entries) == wanted
    cluster.dead.add(a)
    cluster.bookies[b].storage.ledgers[meta.ledger_id].entries[12] = b"entry-012"  # put back to check
    cluster.assert_fully_replicated(meta.ledger_id)
    assert worker.counters.recovered_entries == len(wanted)
    assert sorted(singles) == sorted([(b, 12), (a, 12), (a, 14)])  # b lacked 12; c failed at 14
    assert [start for addr, start in ranges if addr == c] == [2, 14]
    assert not any(addr == c for addr, _ in ranges[ranges.index((c, 14)) + 1 :])


async def test_replacement_failing_mid_copy_leaves_the_metadata_alone(cluster: Cluster) -> None:
    """The swap waits for every copy's acknowledgement: a replacement that goes away with adds in
    flight stops the copy, the ledger keeps naming the drained bookie and stays listed."""
    a, b, c, d = _addresses(cluster)
    meta = await cluster.ledger((a, b, c))
    cluster.store.set_bookie_state(a, BookieState.DECOMMISSIONING)
    cluster.auditor.audit_once()
    read_range = cluster.io.read_range
    calls = 0

    async def stopping_read(address: str, ledger_id: int, entries: range, max_bytes: int) -> list[bytes]:
        nonlocal calls
        calls += 1
        if calls == 3:  # the first window was sent to d; now d goes away
            cluster.kill(d)
        return await read_range(address, ledger_id, entries, max_bytes)

    cluster.io.read_range = stopping_read  # type: ignore[method-assign]
    worker = cluster.worker(read_chunk_entries=2)
    assert await worker.run_once()
    assert cluster.store.get_ledger(meta.ledger_id) == meta  # still names a: nothing swapped
    (row,) = cluster.store.list_underreplicated()
    assert row.ledger_id == meta.ledger_id and row.missing == (a,)
    assert worker.counters.ensemble_changes == 0 and worker.counters.ledgers_recovered == 0
    wanted = sum(1 for e in range(ENTRIES) if a in ledger_spec(meta).write_set(e))
    assert worker.counters.recovered_entries < wanted


async def test_rows_of_a_bookie_that_came_back_are_dropped_when_no_spare_took_its_copies(
    cluster: Cluster,
) -> None:
    a, b, c, d = _addresses(cluster)
    meta = await cluster.ledger((a, b, c))
    cluster.dead |= {a, d}  # a stops heartbeating (its disk is intact); d is no spare
    cluster.tick(TIMEOUT_MS)
    cluster.auditor.audit_once()
    cluster.tick(GRACE_MS)
    assert cluster.auditor.audit_once().marked == 1
    worker = cluster.worker()
    await worker.run_once()  # nowhere to copy to: the row stays
    assert [r.missing for r in cluster.store.list_underreplicated()] == [(a,)]
    cluster.tick(1_000)
    assert cluster.auditor.audit_once().cleared == 0  # still down: still listed
    cluster.dead.discard(a)
    cluster.tick(1_000)  # a heartbeats again, as the same instance
    result = cluster.auditor.audit_once()
    assert result.cleared == 1 and cluster.store.list_underreplicated() == []
    assert cluster.store.get_ledger(meta.ledger_id).history() == meta.history()
    # An auditor that has just taken over has not timed a down bookie yet: its rows stay.
    cluster.dead.add(a)
    cluster.tick(TIMEOUT_MS)
    cluster.auditor.audit_once()
    cluster.tick(GRACE_MS)
    cluster.auditor.audit_once()
    assert [r.missing for r in cluster.store.list_underreplicated()] == [(a,)]
    cluster.tick(15_000)  # the first auditor's lease runs out
    successor = Auditor(cluster.store, cluster.registry, AuditorConfig("a2", 15_000, GRACE_MS), cluster.clock)
    assert successor.audit_once().leader
    assert [r.missing for r in cluster.store.list_underreplicated()] == [(a,)]


async def test_a_bookie_formatted_within_the_grace_period_has_its_old_ledgers_listed(
    cluster: Cluster,
) -> None:
    a, b, c, _ = _addresses(cluster)
    before = await cluster.ledger((a, b, c))
    cluster.tick(1_000)
    # Wiped and started with --format: a new instance, heartbeating at once, holding nothing.
    cluster.bookies[a].storage.ledgers.clear()
    cluster.store.put_bookie_cookie(BookieCookie(a, "formatted", "/data/a", cluster.clock.now))
    cluster.tick(1_000)
    after = await cluster.ledger((b, a, c))
    result = cluster.auditor.audit_once()
    assert result.lost == set() and result.marked == 0  # up: missing only once it says so
    checked = await cluster.checker().check_once()
    assert checked.missing == {before.ledger_id: {a}}
    assert cluster.auditor.audit_once().marked == 0  # the checker's row stays listed
    assert [(r.ledger_id, r.missing) for r in cluster.store.list_underreplicated()] == [
        (before.ledger_id, (a,))
    ]
    worker = cluster.worker()
    while await worker.run_once():
        pass
    assert cluster.store.list_underreplicated() == []
    cluster.assert_fully_replicated(before.ledger_id)
    assert a not in {x for _, bs in cluster.store.get_ledger(before.ledger_id).history() for x in bs}
    assert cluster.store.get_ledger(after.ledger_id) == after  # made after the format: untouched
    assert cluster.auditor.audit_once().marked == 0
    assert (await cluster.checker().check_once()).missing == {}


async def test_a_ledger_still_naming_a_drained_bookie_is_listed_and_moved_off_it(cluster: Cluster) -> None:
    """A copy onto a bookie can be swapped in after the pass that found that bookie drained (it
    was decommissioned mid-copy): the ledger then names a bookie its operator may stop. The next
    pass lists it, and the copies move off the drained bookie."""
    a, b, _, d = _addresses(cluster)
    meta = await cluster.ledger((a, b, d))
    cluster.store.set_bookie_state(d, BookieState.DECOMMISSIONING)
    cluster.store.set_bookie_state(d, BookieState.DECOMMISSIONED)  # as the racing pass left it
    result = cluster.auditor.audit_once()
    assert result.drained == {d} and result.marked == 1
    rows = cluster.store.list_underreplicated()
    assert [(r.ledger_id, r.missing) for r in rows] == [(meta.ledger_id, (d,))]
    worker = cluster.worker()
    while await worker.run_once():
        pass
    cluster.dead.add(d)  # stopped, as a drained bookie may be
    cluster.assert_fully_replicated(meta.ledger_id)
    assert d not in {x for _, bs in cluster.store.get_ledger(meta.ledger_id).history() for x in bs}


async def test_a_decommission_cancelled_while_a_pass_ran_stays_cancelled(cluster: Cluster) -> None:
    """The auditor found the bookie drained, then the operator cancelled its decommission before
    the pass marked it: the pass's "decommissioned" is a compare-and-set from decommissioning, so
    the cancel wins and the bookie takes ledgers again."""
    a, *_ = _addresses(cluster)
    cluster.store.set_bookie_state(a, BookieState.DECOMMISSIONING)
    result = cluster.auditor.audit_once()  # nothing names a: drained at once
    assert result.decommissioned == [a]
    cluster.store.set_bookie_state(a, BookieState.DECOMMISSIONING)
    cluster.store.set_bookie_state(a, BookieState.WRITABLE, expect=BookieState.DECOMMISSIONING)  # cancel
    cluster.auditor._finish_decommissions({a}, result)  # the racing pass's late write
    assert {r.bookie_id: r.state for r in cluster.store.list_bookies()}[a] == BookieState.WRITABLE


async def test_a_segment_with_no_entry_on_the_lost_bookie_is_moved_off_it_without_copies(
    cluster: Cluster,
) -> None:
    """E=3 Qw=2 and one entry: entry 0 lives on the first two bookies only, so the third holds
    nothing of the ledger. Losing it leaves nothing to copy; the segment still moves off it (a
    pass that tried to read zero runs failed with IndexError and stalled every later ledger)."""
    a, b, c, _ = _addresses(cluster)
    handle = await cluster.ledgers.create(3, 2, 2, ensemble=(a, b, c))
    await handle.add_entry(b"entry-000")
    meta = await cluster.ledgers.close(handle)
    assert c not in ledger_spec(meta).write_set(0)
    cluster.kill(c)
    cluster.tick(TIMEOUT_MS)
    cluster.auditor.audit_once()
    cluster.tick(GRACE_MS)
    assert cluster.auditor.audit_once().marked == 1
    worker = cluster.worker()
    while await worker.run_once():
        pass
    assert cluster.store.list_underreplicated() == []
    assert c not in {x for _, bs in cluster.store.get_ledger(meta.ledger_id).history() for x in bs}
    assert worker.counters.recovered_entries == 0
    assert await cluster.ledgers.read(meta.ledger_id, 0, 0) == [b"entry-000"]
