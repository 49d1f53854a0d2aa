"""Auto-recovery with real processes: four `quire bookie` processes (E=3, Qw=2, Qa=2 ledgers
written through the ledger manager), `quire autorecovery` processes and a real broker.

- A bookie killed with -9 whose disk is wiped refuses to start (its cookie); the auditor lists
  every ledger it held; recovery gives every entry its two copies back (read from each bookie
  of its write set); then a second bookie killed with -9 costs no acknowledged entry.
- Decommissioning a bookie through the broker drains it: it shows `decommissioned`, and once it
  is stopped every entry is still readable.
- A recovery process killed with -9 in the middle of a copy: another one finishes it once the
  first one's claim lapses.
- Bookies that ask for the cluster secret: a recovery process given it drains one of them.
"""

from __future__ import annotations

import asyncio
import re
import shutil
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from bookie.auditor import Auditor, AuditorConfig
from bookie.auth import ClientSecurity
from bookie.client import BookieClientConfig, BookieLedgerClient
from bookie.ledger_metadata import LedgerMetadata
from bookie.ledgers import LedgerManager, ledger_spec
from bookie.registry import BookieState, MetadataBookieRegistry, RegistryConfig
from bookie.replica_io import ReplicaIO, ReplicaIOConfig
from managed_ledger.metadata.sql import SqlMetadataStore
from tests.bookie.conftest import BookieProcess
from tests.support import QuireProcess, free_port, port_open, wait_until

pytestmark = pytest.mark.slow

HEARTBEAT = {"QUIRE_BOOKIE_HEARTBEAT_INTERVAL_MS": "200", "QUIRE_BOOKIE_HEARTBEAT_TIMEOUT_MS": "2000"}
RECOVERY = {
    "QUIRE_AUTORECOVERY_LOST_BOOKIE_GRACE_MS": "1000",
    "QUIRE_AUTORECOVERY_AUDIT_INTERVAL_MS": "200",
    "QUIRE_AUTORECOVERY_LEASE_MS": "2000",
    "QUIRE_AUTORECOVERY_CLAIM_MS": "3000",
    "QUIRE_AUTORECOVERY_OPEN_LEDGER_GRACE_MS": "1000",
    "QUIRE_AUTORECOVERY_POLL_INTERVAL_MS": "200",
}
WAIT_S = 60.0


def payload(ledger_id: int, entry_id: int, size: int = 100) -> bytes:
    return (b"%d:%d:" % (ledger_id, entry_id)).ljust(size, b"x")


class Cluster:
    def __init__(self, tmp_path: Path, secret: str = "") -> None:
        self.tmp_path = tmp_path
        self.url = f"sqlite:///{tmp_path / 'metadata.db'}"
        self.env = {"QUIRE_DATABASE_URL": self.url, **HEARTBEAT}
        if secret:  # every process of the cluster gets it, and so do the test's own clients
            self.env["QUIRE_BOOKIE_AUTH_SECRET"] = secret
        security = ClientSecurity(secret=secret.encode())
        self.store = SqlMetadataStore(self.url)
        self.bookies = [
            BookieProcess(tmp_path / f"b{i}", tmp_path / f"b{i}.log", self.env).start() for i in range(4)
        ]
        self.client = BookieLedgerClient(BookieClientConfig(security=security))
        self.ledgers = LedgerManager(self.store, self.client)
        self.io = ReplicaIO(ReplicaIOConfig(security=security))
        self.processes: list[QuireProcess] = []

    def autorecovery(self, name: str, **extra: str) -> tuple[QuireProcess, int]:
        port = free_port()
        env = {**self.env, **RECOVERY, "QUIRE_DATA_DIR": str(self.tmp_path / name), **extra}
        process = QuireProcess(["autorecovery", "--port", str(port)], env, self.tmp_path / f"{name}.log")
        self.processes.append(process.start())
        wait_until(lambda: port_open(port) or not process.alive(), WAIT_S, f"{name} metrics port")
        assert process.alive(), process.log()[-3000:]
        return process, port

    async def write(self, ensemble: tuple[str, ...], entries: int, size: int = 100) -> LedgerMetadata:
        handle = await self.ledgers.create(len(ensemble), 2, 2, ensemble=ensemble)
        for first in range(0, entries, 500):
            batch = range(first, min(first + 500, entries))
            await asyncio.gather(*(handle.add_entry(payload(handle.ledger_id, e, size)) for e in batch))
        return await self.ledgers.close(handle)

    def named(self, ledger_id: int) -> set[str]:
        return {b for _, bookies in self.store.get_ledger(ledger_id).history() for b in bookies}

    async def assert_two_copies(self, ledger_id: int, size: int = 100) -> None:
        """Every entry is on every bookie of its write set (asked one by one, not any replica)."""
        meta = self.store.get_ledger(ledger_id)
        spec = ledger_spec(meta)
        for first in range(0, meta.last_entry_id + 1, 256):
            ids = range(first, min(first + 256, meta.last_entry_id + 1))
            pairs = [(e, b) for e in ids for b in spec.write_set(e)]
            got = await asyncio.gather(*(self.io.read_entry(b, ledger_id, e) for e, b in pairs))
            for (e, b), stored in zip(pairs, got, strict=True):
                assert stored == payload(ledger_id, e, size), (ledger_id, e, b)

    async def assert_readable(self, metas: list[LedgerMetadata], size: int = 100) -> None:
        for meta in metas:
            read = await self.ledgers.read(meta.ledger_id, 0, meta.last_entry_id)
            assert read == [payload(meta.ledger_id, e, size) for e in range(meta.last_entry_id + 1)]

    async def close(self) -> None:
        for process in self.processes:
            process.stop()
        for bookie in self.bookies:
            bookie.stop()
        await self.io.close()
        await self.client.close()
        self.store.close()


@pytest.fixture
async def cluster(tmp_path: Path) -> AsyncIterator[Cluster]:
    c = Cluster(tmp_path)
    try:
        yield c
    finally:
        await c.close()


def _ensembles(addresses: list[str]) -> Iterator[tuple[str, ...]]:
    """Every way to pick 3 of the 4 bookies, in several orders: each bookie is in most ledgers."""
    for skip in range(4):
        rest = [a for i, a in enumerate(addresses) if i != skip]
        yield tuple(rest)
        yield (rest[2], rest[0], rest[1])


def _post(url: str) -> httpx.Response:
    return httpx.post(url, timeout=5)


def _get_json(url: str) -> Any:
    return httpx.get(url, timeout=5).json()


def _metric(port: int, name: str) -> float:
    text = httpx.get(f"http://127.0.0.1:{port}/metrics", timeout=5).text
    found = re.search(rf"^{name}_total (\S+)$", text, re.M)
    return float(found.group(1)) if found else 0.0


async def test_lost_bookie_recovered_then_a_second_loss_costs_nothing(cluster: Cluster) -> None:
    addresses = [b.address for b in cluster.bookies]
    metas = [await cluster.write(e, 60) for e in _ensembles(addresses)]
    lost = cluster.bookies[0]
    lost.kill9()
    shutil.rmtree(lost.data_dir)
    lost.data_dir.mkdir()
    with pytest.raises(RuntimeError, match="exited at start"):
        lost.start()  # the cookie: its disk is not the one it registered with
    assert "wiped" in lost.log()
    # The auditor (the real one, over the same store) lists every ledger the lost bookie held.
    registry = MetadataBookieRegistry(cluster.store, RegistryConfig(2000))
    auditor = Auditor(cluster.store, registry, AuditorConfig("test-auditor", 1000, 1000))
    on_lost = {m.ledger_id for m in metas if lost.address in m.ensemble}

    def listed() -> bool:
        auditor.audit_once()
        return {r.ledger_id for r in cluster.store.list_underreplicated()} == on_lost

    wait_until(listed, WAIT_S, "the lost bookie's ledgers listed", interval_s=0.2)
    assert all(r.missing == (lost.address,) for r in cluster.store.list_underreplicated())
    process, port = cluster.autorecovery("recovery-1")
    wait_until(lambda: cluster.store.list_underreplicated() == [], WAIT_S, "re-replication", interval_s=0.2)
    for meta in metas:
        assert lost.address not in cluster.named(meta.ledger_id)
        await cluster.assert_two_copies(meta.ledger_id)
    assert _metric(port, "quire_recovery_ensemble_changes") == len(on_lost)
    assert _metric(port, "quire_recovered_entries") > 0
    second = cluster.bookies[1]
    second.kill9()
    await cluster.assert_readable(metas)
    assert process.alive()


async def test_decommission_through_the_broker_drains_the_bookie(cluster: Cluster) -> None:
    addresses = [b.address for b in cluster.bookies]
    metas = [await cluster.write(e, 40) for e in _ensembles(addresses)]
    cluster.autorecovery("recovery-1")
    port = free_port()
    broker_env = {
        **cluster.env,
        "QUIRE_DATA_DIR": str(cluster.tmp_path / "broker"),
        "QUIRE_BOOKIES": "[" + ", ".join(f'"{a}"' for a in addresses) + "]",
    }
    broker = QuireProcess(["broker", "--port", str(port)], broker_env, cluster.tmp_path / "broker.log")
    cluster.processes.append(broker.start())
    wait_until(lambda: port_open(port) or not broker.alive(), WAIT_S, "broker port")
    base = f"http://127.0.0.1:{port}"
    target = cluster.bookies[2]
    assert _post(f"{base}/admin/v2/bookies/nobody:1/decommission").status_code == 404
    r = _post(f"{base}/admin/v2/bookies/{target.address}/decommission")
    assert r.status_code == 204, r.text

    def state() -> str:
        bookies = _get_json(f"{base}/admin/v2/bookies/all")["bookies"]
        return str({b["bookieId"]: b["state"] for b in bookies}[target.address])

    assert state() in ("decommissioning", "decommissioned")
    wait_until(lambda: state() == "decommissioned", WAIT_S, "the bookie decommissioned", interval_s=0.2)
    assert _get_json(f"{base}/admin/v2/bookies/underreplicated") == {"ledgers": []}
    assert target.stop() == 0
    for meta in metas:
        assert target.address not in cluster.named(meta.ledger_id)
        await cluster.assert_two_copies(meta.ledger_id)
    await cluster.assert_readable(metas)
    (stored,) = [b for b in cluster.store.list_bookies() if b.bookie_id == target.address]
    assert stored.state == BookieState.DECOMMISSIONED


async def test_recovery_process_killed_mid_copy_another_finishes(cluster: Cluster) -> None:
    addresses = [b.address for b in cluster.bookies]
    size = 4096
    meta = await cluster.write(tuple(addresses[1:]), 6000, size)
    slow = {"QUIRE_AUTORECOVERY_COPIES_IN_FLIGHT": "1"}
    first, port = cluster.autorecovery("recovery-1", **slow)
    cluster.store.set_bookie_state(addresses[1], BookieState.DECOMMISSIONING)
    wait_until(lambda: _metric(port, "quire_recovered_entries") > 0, WAIT_S, "the copy under way", 0.02)
    first.kill9()
    (row,) = cluster.store.list_underreplicated()  # killed before it finished
    assert row.claimed_by and addresses[1] in cluster.named(meta.ledger_id)
    cluster.autorecovery("recovery-2")
    wait_until(lambda: cluster.store.list_underreplicated() == [], WAIT_S, "the second process", 0.2)
    assert addresses[1] not in cluster.named(meta.ledger_id)
    cluster.bookies[1].stop()
    await cluster.assert_two_copies(meta.ledger_id, size)
    await cluster.assert_readable([meta], size)


async def test_a_recovery_process_with_the_secret_drains_a_bookie_that_asks_for_it(tmp_path: Path) -> None:
    cluster = Cluster(tmp_path, secret="the cluster's bookie secret")
    try:
        addresses = [b.address for b in cluster.bookies]
        metas = [await cluster.write(e, 40) for e in _ensembles(addresses)]
        cluster.autorecovery("recovery-1")
        target = cluster.bookies[2]
        cluster.store.set_bookie_state(target.address, BookieState.DECOMMISSIONING)

        def drained() -> bool:
            (row,) = [b for b in cluster.store.list_bookies() if b.bookie_id == target.address]
            return row.state == BookieState.DECOMMISSIONED and cluster.store.list_underreplicated() == []

        wait_until(drained, WAIT_S, "the drain", interval_s=0.2)
        target.stop()
        for meta in metas:
            assert target.address not in cluster.named(meta.ledger_id)
            await cluster.assert_two_copies(meta.ledger_id)
        assert not any("refused connection" in b.log() for b in cluster.bookies)
    finally:
        await cluster.close()
