"""Fault tests: a real process driving a managed ledger (real bookie process, SQLite or
PostgreSQL metadata) is killed with -9 at random moments, mid appends, acks, flushes,
rollovers and trims; after each round a new process takes over and retries.

After all rounds, reopened here:
- every acknowledged append reads back identical, or was trimmed after the cursor consumed it;
- no sequence id is stored twice, nor acknowledged at two positions (dedup across crashes);
- every ack a flush reported durable is still acked: no cursor moved back past it.
"""

from __future__ import annotations

import contextlib
import importlib.util
import os
import random
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from managed_ledger.entry_format import batch_sequence, entry_offsets, stamp_offset
from managed_ledger.factory import ManagedLedgerFactory
from managed_ledger.metadata.sql import SqlMetadataStore
from managed_ledger.position import Position
from tests.kinds import kind
from tests.managed_ledger.fault_child import CONFIG, NAME, payload
from tests.support import REPO, QuireProcess, free_port, port_open, wait_until

ROUNDS = 5
TIMEOUT_S = 60.0

pytestmark = pytest.mark.skipif(
    importlib.util.find_spec("app.processes.bookie") is None, reason="the bookie process has not landed yet"
)


@pytest.fixture
@kind("process")
def bookie(tmp_path: Path) -> Iterator[str]:
    port = free_port()
    process = QuireProcess(
        ["bookie", "--data-dir", str(tmp_path / "bookie"), "--port", str(port)],
        {"QUIRE_BOOKIE_HOST": "127.0.0.1"},
        tmp_path / "bookie.log",
    ).start()
    try:
        wait_until(lambda: port_open(port) or not process.alive(), TIMEOUT_S, "bookie port")
        assert process.alive(), process.log()
        yield f"127.0.0.1:{port}"
    finally:
        process.stop()


class Log:
    """The child's log, parsed; a torn last line (killed mid-write) is ignored."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def lines(self) -> list[list[str]]:
        if not self.path.exists():
            return []
        text = self.path.read_text()
        rows = text.split("\n")[:-1]  # the part after the last newline may be torn
        return [r.split() for r in rows if r]

    def acked(self) -> list[tuple[int, Position]]:
        return [
            (int(r[1]), Position(int(r[2]), int(r[3]))) for r in self.lines() if r[0] == "A" and len(r) == 4
        ]

    def flushed_acks(self) -> list[Position]:
        return [Position(int(r[1]), int(r[2])) for r in self.lines() if r[0] == "K" and len(r) == 3]


def _run_round(bookie: str, db: str, log: Log, seed: int, tmp_path: Path) -> None:
    rng = random.Random(seed)
    acked = log.acked()
    start_seq = max(0, max((s for s, _ in acked), default=-1) - rng.randrange(40))
    before = len(log.lines())
    stderr = open(tmp_path / f"child-{seed}.err", "wb")  # noqa: SIM115 - closed below
    child = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "tests.managed_ledger.fault_child",
            *("--bookie", bookie, "--db", db, "--log", str(log.path)),
            *("--start-seq", str(start_seq), "--seed", str(seed)),
        ],
        cwd=REPO,
        stderr=stderr,
        start_new_session=True,
    )
    try:
        target = before + rng.randrange(100, 1_500)

        def progressed() -> bool:
            if child.poll() is not None:
                raise AssertionError(f"child died: {(tmp_path / f'child-{seed}.err').read_text()}")
            return len(log.lines()) >= target

        wait_until(progressed, TIMEOUT_S, "the child to make progress")
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(child.pid, signal.SIGKILL)
        child.wait(timeout=10)
        stderr.close()


async def _check(bookie: str, db: str, log: Log) -> None:
    from bookie.client import BookieLedgerClient

    store = SqlMetadataStore(db)
    client = BookieLedgerClient()
    factory = ManagedLedgerFactory(client, store, [bookie], timers=False)
    try:
        ml = await factory.open(NAME, CONFIG)
        cursor = ml.cursors["sub"]
        by_seq: dict[int, set[Position]] = {}
        for seq, pos in log.acked():
            by_seq.setdefault(seq, set()).add(pos)
            if ml.ledger_list.contains(pos):
                stored_entry = await ml.read_entry(pos)
                offsets = entry_offsets(stored_entry)
                assert offsets is not None, f"acked {seq} at {pos} has no Kafka offset stamped"
                # the appender stamps the entry's offset; every other byte is the producer's
                want = stamp_offset(payload(seq), offsets[0])
                assert stored_entry == want, f"acked {seq} at {pos} changed"
            else:
                assert cursor.is_acked(pos), f"acked {seq} at {pos} is gone but was never consumed"
        assert all(len(p) == 1 for p in by_seq.values()), "a sequence id was acknowledged twice"
        stored: list[int] = []
        bases: list[int] = []
        start = Position(-1, -1)
        while entries := await ml.read_entries(start, 1_000):
            stored.extend(batch_sequence(p)[1] or -1 for _, p in entries)
            bases.extend((entry_offsets(p) or (-1, 0))[0] for _, p in entries)
            start = ml.next_position(entries[-1][0])
        assert len(stored) == len(set(stored)), "dedup let a retried sequence id be stored twice"
        in_order = bases == sorted(set(bases)) and min(bases, default=0) >= 0
        assert in_order, "an offset given twice or out of order"
        flushed = log.flushed_acks()
        behind = [p for p in flushed if not cursor.is_acked(p)]
        assert not behind, f"cursor moved back past flushed acks {behind[:5]}"
        assert len(log.acked()) > 0 and len(flushed) > 0
        assert len(ml.ledger_list) < 1 + len(log.acked()) // 20, "trimming never ran"
    finally:
        await factory.close()
        await client.close()
        store.close()


@pytest.mark.slow
async def test_kill9_at_random_moments_loses_nothing_acknowledged(
    bookie: str, metadata_url: str, tmp_path: Path
) -> None:
    log = Log(tmp_path / "child.log")
    SqlMetadataStore(metadata_url).close()  # migrate once, before children race to
    for seed in range(ROUNDS):
        _run_round(bookie, metadata_url, log, seed, tmp_path)
        if seed in (1, ROUNDS - 1):  # most rounds leave the crash state to the next child
            await _check(bookie, metadata_url, log)
    kinds = [r[0] for r in log.lines()]
    print({k: kinds.count(k) for k in "AKDO"})
