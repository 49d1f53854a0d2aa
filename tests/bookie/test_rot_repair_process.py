"""Rotten copies are repaired, with real processes: two `quire bookie` processes holding every entry
of a closed ledger (E=Qw=Qa=2), and a `quire autorecovery` process.

A bit of one stored entry is flipped on one bookie's disk while it is down (the campaign's
bit-rot). The bookie's scrub (or a read that meets the copy) lists the rotten copy in the
under-replicated list, and a recovery worker rewrites it in place from the other bookie's copy.
Then the *other* bookie is lost for good (stopped, its disk wiped): every entry is still read,
from the bookie that held the rotten copy. Without the repair that entry would be lost with the
second fault.
"""

from __future__ import annotations

import asyncio
import random
import shutil
import time
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from bench.chaos.disk_faults import rot
from bookie.client import BookieLedgerClient
from bookie.errors import BookieError, ErrorCode
from bookie.ledger_metadata import LedgerMetadata
from bookie.ledgers import LedgerManager
from bookie.replica_io import ReplicaIO
from managed_ledger.metadata.sql import SqlMetadataStore
from tests.bookie.conftest import BookieProcess
from tests.bookie.test_autorecovery_process import HEARTBEAT, RECOVERY, payload
from tests.support import QuireProcess, free_port, port_open, wait_until

pytestmark = pytest.mark.slow
WAIT_S = 60.0
ENTRIES = 20


class RotCluster:
    def __init__(self, tmp_path: Path, scrub_interval_s: str) -> None:
        self.tmp_path = tmp_path
        self.url = f"sqlite:///{tmp_path / 'metadata.db'}"
        self.env = {
            "QUIRE_DATABASE_URL": self.url,
            **HEARTBEAT,
            "QUIRE_BOOKIE_SCRUB_INTERVAL_S": scrub_interval_s,
        }
        self.store = SqlMetadataStore(self.url)
        self.bookies = [BookieProcess(tmp_path / n, tmp_path / f"{n}.log", self.env).start() for n in "ab"]
        self.client = BookieLedgerClient()
        self.ledgers = LedgerManager(self.store, self.client)
        self.io = ReplicaIO()
        self.recovery: QuireProcess | None = None

    def start_autorecovery(self) -> None:
        port = free_port()
        env = {**self.env, **RECOVERY, "QUIRE_DATA_DIR": str(self.tmp_path / "ar")}
        process = QuireProcess(["autorecovery", "--port", str(port)], env, self.tmp_path / "ar.log")
        self.recovery = process.start()
        wait_until(lambda: port_open(port) or not process.alive(), WAIT_S, "autorecovery metrics port")
        assert process.alive(), process.log()[-3000:]

    async def write(self) -> LedgerMetadata:
        ensemble = tuple(b.address for b in self.bookies)
        handle = await self.ledgers.create(2, 2, 2, ensemble=ensemble)
        for e in range(ENTRIES):
            await handle.add_entry(payload(handle.ledger_id, e))
        return await self.ledgers.close(handle)

    async def read_from(self, bookie: BookieProcess, ledger_id: int, entry_id: int) -> bytes | None:
        return await self.io.read_entry(bookie.address, ledger_id, entry_id)

    async def wait_repaired(self, bookie: BookieProcess, ledger_id: int, entry_id: int) -> bool:
        """Whether the bookie serves the entry within WAIT_S (no failure: the test goes on to
        the second fault either way, so that a missing repair shows as the entry lost)."""
        deadline = time.monotonic() + WAIT_S
        while time.monotonic() < deadline:
            try:
                if await self.read_from(bookie, ledger_id, entry_id) == payload(ledger_id, entry_id):
                    return self.store.get_underreplicated(ledger_id) is None or await self._row_gone(
                        ledger_id
                    )
            except BookieError as exc:
                assert exc.code == ErrorCode.CORRUPT, exc
            await asyncio.sleep(0.3)
        return False

    async def _row_gone(self, ledger_id: int) -> bool:
        deadline = time.monotonic() + WAIT_S
        while time.monotonic() < deadline and self.store.get_underreplicated(ledger_id) is not None:
            await asyncio.sleep(0.3)
        return self.store.get_underreplicated(ledger_id) is None

    async def close(self) -> None:
        if self.recovery is not None:
            self.recovery.stop()
        for bookie in self.bookies:
            bookie.stop()
        await self.io.close()
        await self.client.close()
        self.store.close()


@pytest.fixture(params=["scrub", "read"])
async def cluster(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[RotCluster]:
    # "scrub": the periodic scrub finds the rotten copy; "read": the scrub is off and a read
    # that meets the copy lists it.
    c = RotCluster(tmp_path, "1" if request.param == "scrub" else "0")
    try:
        yield c
    finally:
        await c.close()


async def test_a_rotten_copy_is_rewritten_and_survives_the_loss_of_the_other(cluster: RotCluster) -> None:
    meta = await cluster.write()
    ledger_id = meta.ledger_id
    rotten_holder, other = cluster.bookies
    rotten_holder.kill9()
    rotten_holder.start()  # its start's checkpoint covers the entries: `rot` flips only those
    rotten_holder.kill9()
    rotten = rot(rotten_holder.data_dir, random.Random(23), 1)
    assert [lid for lid, _ in rotten] == [ledger_id], rotten
    entry_id = rotten[0][1]
    rotten_holder.start()
    with pytest.raises(BookieError) as bad:  # in "read" mode, this read is what lists it
        await cluster.read_from(rotten_holder, ledger_id, entry_id)
    assert bad.value.code == ErrorCode.CORRUPT, bad.value
    cluster.start_autorecovery()

    repaired = await cluster.wait_repaired(rotten_holder, ledger_id, entry_id)

    other.stop()  # the second fault: the good copy's holder is lost for good
    shutil.rmtree(other.data_dir)
    got = [await cluster.read_from(rotten_holder, ledger_id, e) for e in range(ENTRIES)]
    assert got == [payload(ledger_id, e) for e in range(ENTRIES)], "an acknowledged entry was lost"
    assert repaired, "the rotten copy was served again but its row stayed listed"
    assert "rewrites its rotten copy" in rotten_holder.log()
    assert cluster.recovery is not None and "rewritten on" in cluster.recovery.log()
