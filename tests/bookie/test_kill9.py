"""kill -9 of a real bookie under a pipelined write load, restarted on the same data dir, again
and again: every acknowledged entry reads back byte-identical, and an entry that was sent but not
acknowledged is either absent or exactly what was sent -- never torn, never someone else's bytes.

The writer is a child process (CHILD below) that keeps WINDOW adds in flight and appends
"ledger entry" to a file, flushed, for each acknowledgement it receives. The test kills the
bookie (not the writer) once a random number of acks are in, waits for the writer to notice, and
restarts the bookie.
"""

from __future__ import annotations

import asyncio
import hashlib
import random
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from bookie.client import BookieLedgerClient
from bookie.errors import ErrorCode, NoSuchEntryError
from bookie.protocol import LEDGER_ENTRY, Op
from bookie.types import LedgerSpec
from tests.bookie.conftest import BookieProcess, start_bookie_process
from tests.support import REPO, wait_until

pytestmark = pytest.mark.process

CYCLES = 5
WINDOW = 128
BEYOND = 2 * WINDOW  # unacknowledged ids checked past the last ack

CHILD = """
import asyncio, collections, sys
from bookie.client import BookieLedgerClient
from bookie.errors import BookieError
from bookie.types import LedgerSpec
from tests.bookie.test_kill9 import WINDOW, payload

async def main(address, ledger_id, ack_path):
    client = BookieLedgerClient()
    writer = await client.create_ledger(LedgerSpec(ledger_id, (address,)))
    window = collections.deque()
    with open(ack_path, "a") as acks:
        entry_id = 0
        try:
            while True:
                window.append((entry_id, writer.add_entry_future(payload(ledger_id, entry_id))))
                entry_id += 1
                if len(window) >= WINDOW:
                    acked, future = window.popleft()
                    assert await future == acked
                    acks.write(f"{ledger_id} {acked}\\n")
                    acks.flush()
        except BookieError as exc:
            print(f"writer stopped at entry {entry_id}: {exc}", file=sys.stderr)
    for _, future in window:
        future.cancel() if not future.done() else future.exception()
    await client.close()

asyncio.run(main(sys.argv[1], int(sys.argv[2]), sys.argv[3]))
"""


def payload(ledger_id: int, entry_id: int) -> bytes:
    """Deterministic, distinct per (ledger, entry), 32 B .. 1.3 KiB."""
    digest = hashlib.blake2b(f"{ledger_id}:{entry_id}".encode(), digest_size=32).digest()
    return digest * (1 + (entry_id * 7 + ledger_id) % 40)


def acked_entries(path: Path) -> dict[int, int]:
    """Highest acknowledged entry per ledger; acks arrive in id order, so it covers 0..max."""
    best: dict[int, int] = {}
    if not path.exists():
        return best
    for line in path.read_text().splitlines():
        ledger_id, entry_id = map(int, line.split())
        assert entry_id == best.get(ledger_id, -1) + 1, "acks out of order"
        best[ledger_id] = entry_id
    return best


async def verify(address: str, acked: dict[int, int]) -> None:
    client = BookieLedgerClient()
    try:
        for ledger_id, last_acked in acked.items():
            spec = LedgerSpec(ledger_id, (address,))
            entries = await client.read_entries(spec, 0, last_acked)
            for entry_id, data in enumerate(entries):
                assert data == payload(ledger_id, entry_id), f"ledger {ledger_id} entry {entry_id} differs"
            conn = await client.connection(address)
            for entry_id in range(last_acked + 1, last_acked + 1 + BEYOND):
                reply = await conn.call(Op.READ, LEDGER_ENTRY.pack(ledger_id, entry_id))
                code = int.from_bytes(reply[:2], "little")
                if code == ErrorCode.OK:
                    assert reply[2:] == payload(ledger_id, entry_id), f"unacked {ledger_id}:{entry_id} torn"
                else:
                    assert code == ErrorCode.NO_SUCH_ENTRY, (ledger_id, entry_id, reply)
            # Closing the ledger the way a broker would: recovery proves at least every ack.
            last = await client.recover(spec)
            assert last >= last_acked
            tail = await client.read_entries(spec, last_acked, last)
            assert tail == [payload(ledger_id, e) for e in range(last_acked, last + 1)]
            try:
                await client.read_entries(spec, last + 1, last + 1)
            except NoSuchEntryError:
                pass
            else:
                raise AssertionError(f"ledger {ledger_id}: entry after the recovered last {last}")
    finally:
        await client.close()


def run_writer_until_killed(
    bookie: BookieProcess, ledger_id: int, ack_path: Path, rng: random.Random, kill: Callable[[], object]
) -> None:
    log = open(ack_path.with_suffix(f".{ledger_id}.log"), "wb")  # noqa: SIM115 - closed below
    child = subprocess.Popen(
        [sys.executable, "-c", CHILD, bookie.address, str(ledger_id), str(ack_path)],
        cwd=REPO,
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    try:
        target = rng.randint(300, 3000)
        wait_until(
            lambda: acked_entries(ack_path).get(ledger_id, -1) >= target or child.poll() is not None,
            60,
            f"{target} acks of ledger {ledger_id}",
        )
        assert child.poll() is None, "writer died before the bookie was killed"
        kill()
        child.wait(timeout=30)
    finally:
        if child.poll() is None:
            child.kill()
            child.wait(timeout=10)
        log.close()


def test_kill9_under_pipelined_load(tmp_path: Path) -> None:
    rng = random.Random(20251121)
    ack_path = tmp_path / "acks.txt"
    bookie = start_bookie_process(tmp_path)
    try:
        for cycle in range(CYCLES):
            run_writer_until_killed(bookie, 100 + cycle, ack_path, rng, bookie.kill9)
            bookie.start()
            acked = acked_entries(ack_path)
            assert acked.get(100 + cycle, -1) >= 300
            asyncio.run(verify(bookie.address, {100 + cycle: acked[100 + cycle]}))
        # And once more at the end: nothing written in an earlier cycle was lost by a later kill.
        bookie.stop()
        bookie.start()
        asyncio.run(verify_all(bookie.address, acked_entries(ack_path)))
    finally:
        bookie.stop()


async def verify_all(address: str, acked: dict[int, int]) -> None:
    client = BookieLedgerClient()
    try:
        for ledger_id, last_acked in acked.items():
            entries = await client.read_entries(LedgerSpec(ledger_id, (address,)), 0, last_acked)
            assert entries == [payload(ledger_id, e) for e in range(last_acked + 1)]
    finally:
        await client.close()


def test_sigterm_under_load_drains_and_keeps_every_ack(tmp_path: Path) -> None:
    """A clean stop in the middle of a write load: the bookie stops reading, answers what it
    started, exits 0, and everything it acknowledged is there after the restart."""
    ack_path = tmp_path / "acks.txt"
    bookie = start_bookie_process(tmp_path)
    exit_codes: list[int | None] = []
    try:
        run_writer_until_killed(
            bookie, 500, ack_path, random.Random(7), lambda: exit_codes.append(bookie.stop())
        )
        assert exit_codes == [0]
        bookie.start()
        acked = acked_entries(ack_path)
        asyncio.run(verify(bookie.address, acked))
    finally:
        bookie.stop()
