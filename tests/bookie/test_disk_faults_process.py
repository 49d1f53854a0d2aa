"""A real `quire bookie` on a slow, failing or lying disk (the test-only disk shim,
QUIRE_TEST_DISK_FAULTS, `bookie/storage/diskio.py`), and after a power loss.

- A failed fsync is never followed by an acknowledgement: the bookie exits 70 (after a failed
  fsync the page cache cannot be trusted, PostgreSQL's fsyncgate), and a restart serves every
  entry it acknowledged before.
- A slow fsync delays the acknowledgement by as much: nothing is answered before its sync.
- A journal write the disk reports done but drops: a read of that entry is answered CORRUPT,
  never served and never "no such entry"; after a kill, the hole followed by intact records is
  damage that is not a torn tail, and the bookie refuses to start.
- Bit rot between a kill and a restart: the rotten entry is answered CORRUPT, the others served.
- A power loss (kill -9, each segment cut back to its last fsynced length plus a torn part of
  what followed): every acknowledged entry is served after the restart, the unsynced one not.
"""

from __future__ import annotations

import asyncio
import contextlib
import random
import shutil
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

import pytest

from bench.chaos.disk_faults import control_file, power_loss_cut, rot, set_faults, shim_env
from bookie.client import BookieLedgerClient
from bookie.errors import BookieError, ErrorCode, NoSuchEntryError
from bookie.types import LedgerSpec
from managed_ledger.metadata.sql import SqlMetadataStore
from tests.bookie.conftest import BookieProcess, start_bookie_process
from tests.support import wait_until

PAYLOAD = b"x" * 500


def _bookie(tmp_path: Path) -> tuple[BookieProcess, Path]:
    return start_bookie_process(tmp_path, env=shim_env(tmp_path, "bookie")), control_file(tmp_path, "bookie")


def _run(action: Callable[[BookieLedgerClient], Awaitable[object]]) -> object:
    async def go() -> object:
        client = BookieLedgerClient()
        try:
            return await action(client)
        finally:
            await client.close()

    return asyncio.run(go())


async def _add(client: BookieLedgerClient, spec: LedgerSpec, count: int) -> list[int]:
    writer = await client.create_ledger(spec)
    return [await writer.add_entry(PAYLOAD + b"%d" % i) for i in range(count)]


def _read_all(spec: LedgerSpec, last: int, first: int = 0) -> list[bytes]:
    result = _run(lambda client: client.read_entries(spec, first, last))
    assert isinstance(result, list)
    return result


def test_a_failed_fsync_is_never_acknowledged_and_stops_the_bookie(tmp_path: Path) -> None:
    bookie, control = _bookie(tmp_path)
    spec = LedgerSpec(1, (bookie.address,))
    outcome: list[object] = []

    async def write(client: BookieLedgerClient) -> None:
        writer = await client.create_ledger(spec)
        for i in range(5):
            await writer.add_entry(PAYLOAD + b"%d" % i)
        set_faults(control, fsync_error=True)
        try:
            outcome.append(await asyncio.wait_for(writer.add_entry(b"never synced"), 20))
        except (BookieError, OSError, TimeoutError) as exc:
            outcome.append(exc)

    try:
        _run(write)
        assert not isinstance(outcome[0], int), "an add whose fsync failed was acknowledged"
        wait_until(lambda: not bookie.alive(), 20, "the bookie to stop")
        assert bookie.stop() == 70, bookie.log()[-3000:]
        assert "journal write or fsync failed" in bookie.log()
        set_faults(control)
        bookie.start()
        assert _read_all(spec, 4) == [PAYLOAD + b"%d" % i for i in range(5)]
    finally:
        bookie.stop()


def test_a_slow_fsync_delays_the_acknowledgement(tmp_path: Path) -> None:
    bookie, control = _bookie(tmp_path)
    spec = LedgerSpec(2, (bookie.address,))

    async def write(client: BookieLedgerClient) -> float:
        writer = await client.create_ledger(spec)
        await writer.add_entry(PAYLOAD)
        set_faults(control, fsync_delay_ms=1200)
        started = time.monotonic()
        await writer.add_entry(PAYLOAD)
        return time.monotonic() - started

    try:
        took = _run(write)
        assert isinstance(took, float) and took >= 1.2, took
        assert _read_all(spec, 1) == [PAYLOAD, PAYLOAD]
    finally:
        bookie.stop()


def test_a_lost_write_is_answered_corrupt_and_then_refuses_the_start(tmp_path: Path) -> None:
    bookie, control = _bookie(tmp_path)
    spec = LedgerSpec(3, (bookie.address,))

    async def write(client: BookieLedgerClient) -> None:
        writer = await client.create_ledger(spec)
        await writer.add_entry(PAYLOAD + b"0")
        set_faults(control, lose_writes=1)
        await writer.add_entry(PAYLOAD + b"1")  # the disk lies: acknowledged, never written
        set_faults(control)
        for i in range(2, 6):
            await writer.add_entry(PAYLOAD + b"%d" % i)

    try:
        _run(write)
        assert _read_all(spec, 0) == [PAYLOAD + b"0"]
        with pytest.raises(BookieError) as lost:
            _read_all(spec, 1, first=1)
        assert lost.value.code == ErrorCode.CORRUPT, lost.value
        assert "checksum mismatch" in bookie.log()
        assert _read_all(spec, 5, first=2) == [PAYLOAD + b"%d" % i for i in range(2, 6)]
        bookie.kill9()
        with pytest.raises(RuntimeError, match="exited"):
            bookie.start()
        assert "not a torn tail" in bookie.log(), bookie.log()[-3000:]
    finally:
        bookie.stop()


def test_a_power_loss_keeps_every_acknowledged_entry(tmp_path: Path) -> None:
    bookie, control = _bookie(tmp_path)
    spec = LedgerSpec(4, (bookie.address,))
    acked: list[int] = []

    async def write(client: BookieLedgerClient) -> None:
        writer = await client.create_ledger(spec)
        for i in range(20):
            acked.append(await writer.add_entry(PAYLOAD + b"%d" % i))
        set_faults(control, fsync_delay_ms=5000)
        unsynced = asyncio.ensure_future(writer.add_entry(b"y" * 3000))
        await asyncio.sleep(1.0)
        assert not unsynced.done()
        bookie.kill9()  # the power goes while the last group waits for its sync
        unsynced.cancel()

    try:
        _run(write)
        files, lost = power_loss_cut(bookie.data_dir, control, random.Random(4))
        assert files == 1 and 0 < lost <= 3000 + 34, (files, lost)
        set_faults(control)
        bookie.start()
        assert acked == list(range(20))
        assert _read_all(spec, 19) == [PAYLOAD + b"%d" % i for i in range(20)]
        with pytest.raises(NoSuchEntryError):
            _read_all(spec, 20, first=20)
    finally:
        bookie.stop()


def test_bit_rot_between_a_kill_and_a_restart_is_answered_corrupt(tmp_path: Path) -> None:
    """The campaign's bit-rot: entries the index checkpoint covers (written before the last
    start) get a flipped bit while the bookie is down; a read of one is CORRUPT, never served."""
    bookie, _control = _bookie(tmp_path)
    spec = LedgerSpec(5, (bookie.address,))
    try:
        _run(lambda client: _add(client, spec, 10))
        bookie.kill9()
        bookie.start()  # the start's checkpoint covers the ten records
        bookie.kill9()
        rotten = rot(bookie.data_dir, random.Random(5), 1)
        assert [ledger for ledger, _ in rotten] == [5], rotten
        bookie.start()
        entry = rotten[0][1]
        with pytest.raises(BookieError) as bad:
            _read_all(spec, entry, first=entry)
        assert bad.value.code == ErrorCode.CORRUPT, bad.value
        others = [e for e in range(10) if e != entry]
        assert [_read_all(spec, e, first=e)[0] for e in others] == [PAYLOAD + b"%d" % e for e in others]
    finally:
        bookie.stop()


def test_a_second_process_on_a_copy_of_the_disk_is_refused(tmp_path: Path) -> None:
    """The copy carries the running bookie's cookie instance (and its process mark), but it is
    another directory: the registration it finds is watched, its heartbeat moves, and the copy
    refuses to start (exit 2) while the first keeps its registration (`bookie.registration`)."""
    database = f"sqlite:///{tmp_path / 'metadata.db'}"
    env = {"QUIRE_DATABASE_URL": database, "QUIRE_BOOKIE_HEARTBEAT_INTERVAL_MS": "200",
           "QUIRE_BOOKIE_HEARTBEAT_TIMEOUT_MS": "1000"}  # fmt: skip
    first = BookieProcess(tmp_path / "a", tmp_path / "a.log", env).start()
    shutil.copytree(first.data_dir, tmp_path / "b")
    twin = BookieProcess(
        tmp_path / "b", tmp_path / "b.log", {**env, "QUIRE_BOOKIE_ADVERTISED_ADDRESS": first.address}
    )
    try:
        with contextlib.suppress(RuntimeError):
            twin.start()
        time.sleep(3.0)
        assert first.alive()
        assert not twin.alive(), "a second process under a running bookie's id keeps running"
        assert twin.stop() == 2, twin.log()[-3000:]
        assert "served by another live process" in twin.log(), twin.log()[-3000:]
        store = SqlMetadataStore(database)
        try:
            (row,) = store.list_bookies()
            assert row.process_id and row.heartbeat_ms > 0  # still the first one's, heartbeating
            before = row.heartbeat_ms
            wait_until(lambda: store.list_bookies()[0].heartbeat_ms > before, 10, "the first's heartbeat")
            assert "served by another live process" not in first.log()
        finally:
            store.close()
    finally:
        twin.stop()
        first.stop()
