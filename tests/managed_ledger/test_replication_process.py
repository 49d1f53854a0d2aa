"""Replication with real processes: four `quire bookie` processes registered in one metadata
store, a managed ledger writing E=3 Qw=2 Qa=2 through the real client under a pipelined load,
and one bookie of the ledger being written killed with -9, or stopped with SIGSTOP for longer
than the add timeout. No append may fail, every acknowledged entry must read back as sent, and
the ledger's metadata must show the ensemble change that took the bookie out."""

from __future__ import annotations

import asyncio
import os
import signal
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

from bookie.client import BookieClientConfig, BookieLedgerClient
from bookie.ledgers import ledger_spec
from bookie.protocol import LEDGER_ENTRY, Op
from bookie.registry import MetadataBookieRegistry, RegistryConfig
from managed_ledger.api import ManagedLedgerConfig, RetentionPolicy
from managed_ledger.factory import ManagedLedgerFactory
from managed_ledger.ledger import ManagedLedger
from managed_ledger.metadata.sql import SqlMetadataStore
from managed_ledger.position import Position
from tests.bookie.conftest import BookieProcess
from tests.support import wait_until

pytestmark = pytest.mark.slow

HEARTBEAT_ENV = {"QUIRE_BOOKIE_HEARTBEAT_INTERVAL_MS": "200", "QUIRE_BOOKIE_HEARTBEAT_TIMEOUT_MS": "2000"}
ADD_TIMEOUT_S = 1.0
WINDOW = 64
BOUND_S = 60.0  # every wait for the load or a read is bounded by this


@dataclass
class Cluster:
    store: SqlMetadataStore
    bookies: list[BookieProcess]
    client: BookieLedgerClient
    ml: ManagedLedger

    def bookie(self, address: str) -> BookieProcess:
        return next(b for b in self.bookies if b.address == address)


@pytest.fixture
async def cluster(tmp_path: Path) -> AsyncIterator[Cluster]:
    url = f"sqlite:///{tmp_path / 'metadata.db'}"
    store = SqlMetadataStore(url)
    env = {"QUIRE_DATABASE_URL": url, **HEARTBEAT_ENV}
    bookies = [BookieProcess(tmp_path / f"bookie{i}", tmp_path / f"bookie{i}.log", env) for i in range(4)]
    client = BookieLedgerClient(BookieClientConfig(add_timeout_s=ADD_TIMEOUT_S))
    factory: ManagedLedgerFactory | None = None
    try:
        for bookie in bookies:
            bookie.start()
        registry = MetadataBookieRegistry(store, RegistryConfig(heartbeat_timeout_ms=2000))
        wait_until(lambda: len(registry.live_bookies()) == 4, 30, "four live bookies")
        factory = ManagedLedgerFactory(client, store, placement=registry, timers=False)
        config = ManagedLedgerConfig(
            ensemble_size=3, write_quorum=2, ack_quorum=2, retention=RetentionPolicy(-1, -1)
        )
        ml = await factory.open("public/default/replicated", config)
        yield Cluster(store, bookies, client, ml)
    finally:
        for bookie in bookies:
            if bookie.process is not None and bookie.alive():
                os.kill(bookie.process.pid, signal.SIGCONT)
            bookie.stop()
        if factory is not None:
            await factory.close()
        await client.close()
        store.close()


def payload(i: int) -> bytes:
    return b"message-%06d-" % i + bytes([i % 251]) * (i % 300)


async def produce(ml: ManagedLedger, count: int, on_ack: Callable[[int], None]) -> dict[Position, bytes]:
    """Append `count` entries with WINDOW in flight; every append must succeed."""
    acked: dict[Position, bytes] = {}
    window: set[asyncio.Task[None]] = set()

    async def one(i: int) -> None:
        position = await ml.append(payload(i))
        acked[position] = payload(i)
        on_ack(len(acked))

    async with asyncio.timeout(BOUND_S):
        for i in range(count):
            if len(window) >= WINDOW:
                done, window = await asyncio.wait(window, return_when=asyncio.FIRST_COMPLETED)
                for task in done:
                    task.result()  # an append that failed fails the test here
            window.add(asyncio.ensure_future(one(i)))
        for task in asyncio.as_completed(window):
            await task
    return acked


async def assert_all_readable(cluster: Cluster, acked: dict[Position, bytes]) -> None:
    reader = BookieLedgerClient()
    try:
        async with asyncio.timeout(BOUND_S):
            for ledger_id in sorted({p.ledger_id for p in acked}):
                meta = cluster.store.get_ledger(ledger_id)
                ids = sorted(p.entry_id for p in acked if p.ledger_id == ledger_id)
                entries = await reader.read_entries(ledger_spec(meta), ids[0], ids[-1])
                for entry_id in ids:
                    assert entries[entry_id - ids[0]] == acked[Position(ledger_id, entry_id)]
    finally:
        await reader.close()


def current_ledger(cluster: Cluster) -> int:
    current = cluster.ml._appender.current
    assert current is not None
    return current.ledger_id


async def test_kill9_of_a_bookie_under_load_loses_nothing(cluster: Cluster) -> None:
    await cluster.ml.append(b"first")  # opens the ledger
    ledger_id = current_ledger(cluster)
    victim = cluster.bookie(cluster.store.get_ledger(ledger_id).ensemble[0])
    killed = asyncio.Event()

    def on_ack(count: int) -> None:
        if count == 500 and not killed.is_set():
            killed.set()
            victim.kill9()

    acked = await produce(cluster.ml, 2_000, on_ack)
    assert killed.is_set() and len(acked) == 2_000
    meta = cluster.store.get_ledger(ledger_id)
    assert len(meta.ensembles) >= 2 and victim.address in meta.ensembles[0][1]
    assert victim.address not in meta.ensembles[-1][1]
    await cluster.ml.close()
    await assert_all_readable(cluster, acked)


async def test_a_bookie_stopped_longer_than_the_add_timeout_is_replaced(cluster: Cluster) -> None:
    await cluster.ml.append(b"first")
    ledger_id = current_ledger(cluster)
    victim = cluster.bookie(cluster.store.get_ledger(ledger_id).ensemble[1])
    assert victim.process is not None
    os.kill(victim.process.pid, signal.SIGSTOP)
    try:
        # Writes go on (after one add timeout) while it is stopped, for three add timeouts.
        acked = await produce(cluster.ml, 300, lambda _count: None)
        await asyncio.sleep(3 * ADD_TIMEOUT_S)
        acked.update(await produce(cluster.ml, 300, lambda _count: None))
    finally:
        os.kill(victim.process.pid, signal.SIGCONT)
    acked.update(await produce(cluster.ml, 300, lambda _count: None))
    meta = cluster.store.get_ledger(ledger_id)
    assert len(meta.ensembles) >= 2 and victim.address not in meta.ensembles[-1][1]
    await cluster.ml.close()
    await assert_all_readable(cluster, acked)
    # Nothing the stopped bookie holds is corrupt: whatever entry of the ledger it stored is the
    # one that was sent (it may have stored entries it never acknowledged).
    assert victim.address in ledger_spec(cluster.store.get_ledger(ledger_id)).bookies
    checked = 0
    async with asyncio.timeout(BOUND_S):
        for position, sent in acked.items():
            if position.ledger_id != ledger_id:
                continue
            body = LEDGER_ENTRY.pack(ledger_id, position.entry_id)
            reply = await cluster.client._call(victim.address, Op.READ, body)
            if reply[:2] == b"\x00\x00":
                assert reply[2:] == sent
                checked += 1
    assert checked > 0  # adds sent to it while stopped were stored after SIGCONT
