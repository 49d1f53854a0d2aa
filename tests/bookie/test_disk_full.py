"""A real bookie on a small real filesystem, written at full speed until the disk is full.

Running out of space must turn the bookie read-only, not kill it: adds are refused with
READ_ONLY, the process stays up, every acknowledged entry reads back, and once space is freed
(a filler file the test made is removed) adds are taken again. The periodic usage check is set
to an hour, so only the journal's own space reservation can notice the full disk.

Needs `mount -t tmpfs` (root, as here and in CI); skipped with the reason otherwise.
"""

from __future__ import annotations

import asyncio
import collections
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from bookie.client import BookieLedgerClient, BookieLedgerWriter
from bookie.errors import BookieError, ErrorCode
from bookie.types import LedgerSpec
from tests.bookie.conftest import BookieProcess

pytestmark = pytest.mark.process

DISK_SIZE = "48m"
FILLER_BYTES = 16 * 1024 * 1024
SEGMENT_BYTES = 4 * 1024 * 1024
PAYLOAD_BYTES = 64 * 1024
WINDOW = 32  # adds in flight
MAX_ADDS = 2000  # 125 MiB of payload: far more than the disk holds, so the loop always ends
ENTRIES_PER_LEDGER = 200
WRITABLE_AGAIN_WAIT_S = 30.0


def payload(ledger_id: int, entry_id: int) -> bytes:
    return (b"%d:%d:" % (ledger_id, entry_id)).ljust(PAYLOAD_BYTES, bytes([ledger_id % 251 + 1]))


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    mount_point = tmp_path / "disk"
    mount_point.mkdir()
    try:
        done = subprocess.run(
            ["mount", "-t", "tmpfs", "-o", f"size={DISK_SIZE}", "tmpfs", str(mount_point)],
            capture_output=True,
            text=True,
            timeout=30,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        pytest.skip(f"cannot mount a tmpfs here: {exc}")
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {done.stderr.strip()}")
    try:
        yield mount_point
    finally:
        subprocess.run(["umount", "-l", str(mount_point)], capture_output=True, timeout=30)


def write_filler(path: Path, size: int) -> None:
    chunk = b"\xaa" * (1024 * 1024)
    with open(path, "wb") as f:
        for _ in range(size // len(chunk)):
            f.write(chunk)
        f.flush()
        os.fsync(f.fileno())


async def write_until_refused(
    client: BookieLedgerClient, address: str, acked: dict[tuple[int, int], bytes]
) -> BookieError:
    """Keep WINDOW adds in flight over successive ledgers until one is refused; the refusal."""
    ledger_id = 1
    writer = await client.create_ledger(LedgerSpec(ledger_id, (address,)))
    window: collections.deque[tuple[int, int, asyncio.Future[int]]] = collections.deque()
    entry_id = 0
    try:
        for _ in range(MAX_ADDS):
            if entry_id == ENTRIES_PER_LEDGER:
                ledger_id, entry_id = ledger_id + 1, 0
                writer = await client.create_ledger(LedgerSpec(ledger_id, (address,)))
            window.append((ledger_id, entry_id, writer.add_entry_future(payload(ledger_id, entry_id))))
            entry_id += 1
            if len(window) >= WINDOW:
                await _settle(window.popleft(), acked)
        while window:
            await _settle(window.popleft(), acked)
    except BookieError as exc:
        for _ledger, _entry, future in window:
            if not future.done():
                future.cancel()
            elif not future.cancelled():
                future.exception()
        return exc
    raise AssertionError(f"{MAX_ADDS} adds of {PAYLOAD_BYTES} bytes all fit on a {DISK_SIZE} disk")


async def _settle(item: tuple[int, int, asyncio.Future[int]], acked: dict[tuple[int, int], bytes]) -> None:
    ledger_id, entry_id, future = item
    assert await future == entry_id
    acked[ledger_id, entry_id] = payload(ledger_id, entry_id)


async def wait_writable(client: BookieLedgerClient, address: str) -> None:
    async with asyncio.timeout(WRITABLE_AGAIN_WAIT_S):
        while (await client.bookie_stats(address))["read_only"]:
            await asyncio.sleep(0.2)


async def test_a_full_disk_turns_the_bookie_read_only_and_freeing_space_turns_it_back(
    small_disk: Path, tmp_path: Path
) -> None:
    filler = small_disk / "filler"
    write_filler(filler, FILLER_BYTES)
    env = {
        "QUIRE_JOURNAL_MAX_SIZE_BYTES": str(SEGMENT_BYTES),
        "QUIRE_DISK_CHECK_INTERVAL_S": "3600",
        "QUIRE_GC_INTERVAL_S": "3600",
    }
    bookie = BookieProcess(small_disk / "bookie", tmp_path / "bookie.log", env).start()
    client = BookieLedgerClient()
    try:
        acked: dict[tuple[int, int], bytes] = {}
        refusal = await write_until_refused(client, bookie.address, acked)
        assert refusal.code == ErrorCode.READ_ONLY, refusal
        assert bookie.alive(), bookie.log()
        assert len(acked) > 100  # the disk held a good part of its size before it was full
        stats = await client.bookie_stats(bookie.address)
        assert stats["read_only"] is True and stats["disk_full"] is True and stats["failed"] is False
        for (ledger_id, entry_id), data in acked.items():
            spec = LedgerSpec(ledger_id, (bookie.address,))
            assert await client.read_entries(spec, entry_id, entry_id) == [data]

        filler.unlink()
        await wait_writable(client, bookie.address)
        writer: BookieLedgerWriter = await client.create_ledger(LedgerSpec(1000, (bookie.address,)))
        for entry_id in range(10):
            assert await writer.add_entry(payload(1000, entry_id)) == entry_id
        spec = LedgerSpec(1000, (bookie.address,))
        assert await client.read_entries(spec, 0, 9) == [payload(1000, e) for e in range(10)]
        assert bookie.alive(), bookie.log()
    finally:
        await client.close()
        bookie.stop()
