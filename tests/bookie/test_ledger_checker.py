"""The periodic ledger check (review 2026-11-28, finding 12): a bookie that is up but lacks the
entries the metadata gives it is listed as under-replicated, stays listed although it
heartbeats, and gets its copies back; a bookie that cannot answer is no evidence; a pass checks
a bounded number of ledgers and the next pass goes on from there."""

from __future__ import annotations

import asyncio
import shutil
from pathlib import Path

from bookie.auditor import Auditor, AuditorConfig
from bookie.autorecovery import AutoRecoveryConfig, AutoRecoveryService
from bookie.client import BookieLedgerClient
from bookie.errors import BookieError, ErrorCode
from bookie.ledger_checker import CheckerConfig, LedgerChecker
from bookie.ledgers import LedgerManager
from bookie.registry import BookieCookie, BookieRecord, BookieState, MetadataBookieRegistry, RegistryConfig
from bookie.replica_io import ReplicaIO
from bookie.rereplication import ReplicationWorker, WorkerConfig
from managed_ledger.metadata.memory import InMemoryMetadataStore
from tests.bookie import test_autorecovery
from tests.bookie.local_cluster import LocalBookie
from tests.bookie.test_autorecovery import ENTRIES, TIMEOUT_MS, Clock, Cluster, _addresses

bookies = test_autorecovery.bookies  # the fixtures, shared
cluster = test_autorecovery.cluster


async def test_a_bookie_that_lost_a_closed_ledger_is_listed_then_the_ledger_re_replicated(
    cluster: Cluster,
) -> None:
    a, b, c, _ = _addresses(cluster)
    meta = await cluster.ledger((a, b, c))
    healthy = await cluster.ledger((a, b, c))
    del cluster.bookies[b].storage.ledgers[meta.ledger_id]  # lost without a change of registration
    assert cluster.auditor.audit_once().marked == 0  # the registry shows nothing wrong
    assert cluster.store.list_underreplicated() == []
    checker = cluster.checker()
    result = await checker.check_once()
    assert result.missing == {meta.ledger_id: {b}}
    assert sorted(result.checked) == sorted([meta.ledger_id, healthy.ledger_id])
    rows = cluster.store.list_underreplicated()
    assert [(r.ledger_id, r.missing) for r in rows] == [(meta.ledger_id, (b,))]
    assert checker.counters.missing_found == 1 and checker.counters.underreplicated_ledgers == 1
    cluster.tick(1_000)
    assert cluster.auditor.audit_once().cleared == 0  # b heartbeats, but it said it lacks them
    assert [r.missing for r in cluster.store.list_underreplicated()] == [(b,)]
    worker = cluster.worker()
    assert await worker.run_once()
    assert cluster.store.list_underreplicated() == []
    cluster.dead.add(b)  # whatever b holds, the metadata no longer names it
    cluster.assert_fully_replicated(meta.ledger_id)
    cluster.dead.discard(b)
    assert (await checker.check_once()).missing == {}
    assert cluster.auditor.audit_once().marked == 0 and cluster.store.list_underreplicated() == []
    assert b in {x for _, bs in cluster.store.get_ledger(healthy.ledger_id).history() for x in bs}


async def test_a_bookie_that_cannot_answer_is_not_listed(cluster: Cluster) -> None:
    a, b, c, _ = _addresses(cluster)
    await cluster.ledger((a, b, c))
    cluster.kill(b)  # still heartbeating in the registry for now, but refusing connections
    assert (await cluster.checker().check_once()).missing == {}
    read_entry = cluster.io.read_entry
    asked: list[str] = []

    async def failing(address: str, ledger_id: int, entry_id: int) -> bytes | None:
        asked.append(address)
        if address == c:
            raise BookieError(ErrorCode.TIMEOUT, "no answer in time")  # a timeout: no answer
        return await read_entry(address, ledger_id, entry_id)

    cluster.io.read_entry = failing  # type: ignore[method-assign]
    assert (await cluster.checker().check_once()).missing == {}
    assert c in asked and b in asked  # both were asked; neither answer counts as a loss
    assert cluster.store.list_underreplicated() == []
    cluster.tick(TIMEOUT_MS)  # b's heartbeat expired: down, so not even asked
    asked.clear()
    assert (await cluster.checker().check_once()).missing == {}
    assert b not in asked and a in asked


async def test_a_pass_is_bounded_and_the_next_goes_on(cluster: Cluster) -> None:
    a, b, c, _ = _addresses(cluster)
    ids = [(await cluster.ledger((a, b, c))).ledger_id for _ in range(3)]
    checker = cluster.checker(ledgers_per_pass=2, reads_in_flight=1)
    assert (await checker.check_once()).checked == ids[:2]
    assert (await checker.check_once()).checked == [ids[2], ids[0]]
    assert checker.counters.ledgers_checked == 4


async def test_a_real_bookie_that_lost_its_files_is_listed_and_re_replicated(tmp_path: Path) -> None:
    """The review's schedule on the real storage engine: a CLOSED 3/2/2 ledger; one bookie is
    stopped, its journal and index (CHECKPOINT included) are deleted under it and it starts
    again under the same registration. The registry sees nothing; the check lists it, a worker
    copies its share to the spare, and every entry is read back."""
    bookies = [LocalBookie(tmp_path / name) for name in "abc"] + [LocalBookie()]
    for bookie in bookies:
        await bookie.start()
    a, b, c, spare = (x.address for x in bookies)
    clock = Clock()
    store = InMemoryMetadataStore()
    client, io = BookieLedgerClient(), ReplicaIO()
    try:
        registry = MetadataBookieRegistry(store, RegistryConfig(TIMEOUT_MS), clock)
        for address in (a, b, c, spare):
            store.put_bookie(BookieRecord(address, "i", BookieState.WRITABLE, clock.now))
        ledgers = LedgerManager(store, client, clock=clock, placement=registry)
        handle = await ledgers.create(3, 2, 2, ensemble=(a, b, c))
        for i in range(ENTRIES):
            await handle.add_entry(b"entry-%03d" % i)
        meta = await ledgers.close(handle)
        await bookies[1].stop()
        for part in ("journal", "index"):
            shutil.rmtree(tmp_path / "b" / part)
        await bookies[1].start()
        auditor = Auditor(store, registry, AuditorConfig("a1", 15_000, 5_000), clock)
        assert auditor.audit_once().marked == 0
        checker = LedgerChecker(store, registry, io, CheckerConfig(), auditor.confirmed, clock)
        assert (await checker.check_once()).missing == {meta.ledger_id: {b}}
        assert auditor.audit_once().cleared == 0
        worker = ReplicationWorker(store, ledgers, registry, io, WorkerConfig("w1"), clock)
        assert await worker.run_once()
        assert store.list_underreplicated() == []
        history = store.get_ledger(meta.ledger_id).history()
        assert history == ((0, (a, spare, c)),)
        await bookies[1].stop()  # b holds nothing the ledger needs now
        read = await ledgers.read(meta.ledger_id, 0, ENTRIES - 1)
        assert read == [b"entry-%03d" % i for i in range(ENTRIES)]
        assert (await checker.check_once()).missing == {}
    finally:
        await io.close()
        await client.close()
        for bookie in bookies:
            await bookie.stop()


async def test_the_service_checks_only_while_its_auditor_holds_the_lease(cluster: Cluster) -> None:
    a, b, c, _ = _addresses(cluster)
    meta = await cluster.ledger((a, b, c))
    del cluster.bookies[b].storage.ledgers[meta.ledger_id]
    other = Auditor(cluster.store, cluster.registry, AuditorConfig("a2", 15_000, 5_000), cluster.clock)
    assert other.audit_once().leader  # another process audits (and checks)
    checker = cluster.checker()
    config = AutoRecoveryConfig(audit_interval_ms=5, poll_interval_ms=3_600_000, check_interval_ms=5)
    service = AutoRecoveryService(cluster.auditor, cluster.worker(), config, checker)
    service.start()
    try:
        await asyncio.sleep(0.2)
        assert checker.counters.passes == 0 and cluster.store.list_underreplicated() == []
        cluster.tick(15_000)  # a2's lease lapses: this process's auditor takes it, then checks
        async with asyncio.timeout(10):
            while checker.counters.passes == 0:
                await asyncio.sleep(0.01)
    finally:
        await service.close()
    assert [r.missing for r in cluster.store.list_underreplicated()] == [(b,)]  # the worker is asleep
    assert cluster.auditor.leading


async def test_ledgers_of_a_bookie_formatted_since_come_first_once(cluster: Cluster) -> None:
    """A bookie whose cookie is newer than a ledger it is in is looked at first, once for that
    instance (it may well hold the entries: it entered by an ensemble change or a copy), and at
    most half a pass goes to such ledgers, so the sweep always goes on."""
    a, b, c, d = _addresses(cluster)
    first = (await cluster.ledger((b, c, d))).ledger_id
    second = (await cluster.ledger((b, c, d))).ledger_id
    third = (await cluster.ledger((a, b, c))).ledger_id
    cluster.tick(1_000)
    cluster.store.put_bookie_cookie(BookieCookie(a, "later", "/d", cluster.clock.now))
    checker = cluster.checker(ledgers_per_pass=2)
    one, two = await checker.check_once(), await checker.check_once()
    assert one.checked == [third, first] and two.checked == [second, third]
    assert one.missing == two.missing == {} and cluster.store.list_underreplicated() == []
