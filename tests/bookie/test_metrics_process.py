"""A real `quire bookie` serving Prometheus metrics on its metrics port: entries written and read
with the real bookie client move the counters by exactly what was written and read, every group
commit is one sample of the fsync and group-size histograms, and the ledger gauge follows a
delete. Without a metrics port the bookie serves none; a metrics port in use stops it at start."""

from __future__ import annotations

import asyncio
import os
import socket
import subprocess
import sys
from pathlib import Path

from bookie.client import BookieLedgerClient
from bookie.types import LedgerSpec
from tests.bookie.conftest import start_bookie_process
from tests.metrics_text import scrape
from tests.support import REPO, free_port, port_open, wait_until


async def write(address: str, ledger_id: int, payloads: list[bytes]) -> None:
    client = BookieLedgerClient()
    try:
        writer = await client.create_ledger(LedgerSpec(ledger_id, (address,)))
        await asyncio.gather(*(writer.add_entry(p) for p in payloads))
    finally:
        await client.close()


async def read(address: str, ledger_id: int, last: int) -> list[bytes]:
    client = BookieLedgerClient()
    try:
        return await client.read_entries(LedgerSpec(ledger_id, (address,)), 0, last)
    finally:
        await client.close()


async def delete(address: str, ledger_id: int) -> None:
    client = BookieLedgerClient()
    try:
        await client.delete_ledger(LedgerSpec(ledger_id, (address,)))
    finally:
        await client.close()


def test_bookie_metrics_count_what_was_written_and_read(tmp_path: Path) -> None:
    metrics_port = free_port()
    bookie = start_bookie_process(tmp_path, env={"QUIRE_BOOKIE_METRICS_PORT": str(metrics_port)})
    try:
        # The metrics port is bound before the bookie port, so it answers by now.
        before = scrape(metrics_port)
        assert before["quire_bookie_add_entries_total"] == 0 and before["quire_bookie_ledgers"] == 0
        assert before["quire_bookie_journal_sync_seconds_count"] == 0
        assert before["quire_bookie_read_only"] == 0 and 0 < before["quire_bookie_disk_usage_ratio"] < 1
        assert before["quire_bookie_rotten_copies_total"] == before["quire_bookie_scrub_passes_total"] == 0

        first = [b"entry-%d" % i * (i % 5 + 1) for i in range(120)]
        second = [b"y" * 1000] * 9
        asyncio.run(write(bookie.address, 1, first))
        asyncio.run(write(bookie.address, 2, second))
        assert asyncio.run(read(bookie.address, 1, 119)) == first
        after = scrape(metrics_port)

        assert after["quire_bookie_add_entries_total"] == 129
        assert after["quire_bookie_add_bytes_total"] == sum(map(len, first + second))
        assert after["quire_bookie_read_entries_total"] == 120
        assert after["quire_bookie_read_bytes_total"] == sum(map(len, first))
        assert after["quire_bookie_ledgers"] == 2 and after["quire_bookie_read_only"] == 0
        # every group commit is one fsync: one sample in each histogram, its adds in the sum
        groups = after["quire_bookie_journal_sync_seconds_count"]
        assert 1 <= groups <= 129
        assert after["quire_bookie_journal_group_entries_count"] == groups
        assert after["quire_bookie_journal_group_entries_sum"] == 129
        assert after['quire_bookie_journal_sync_seconds_bucket{le="+Inf"}'] == groups
        assert after["quire_bookie_journal_sync_seconds_sum"] > 0

        asyncio.run(delete(bookie.address, 1))
        deleted = scrape(metrics_port)
        assert deleted["quire_bookie_ledgers"] == 1
        assert deleted["quire_bookie_add_entries_total"] == 129
        # the delete is a group of its own with no entries: one more fsync, the same entries
        assert deleted["quire_bookie_journal_group_entries_count"] == groups + 1
        assert deleted["quire_bookie_journal_group_entries_sum"] == 129
        wait_until(lambda: "metrics on http://127.0.0.1:" in bookie.log(), 10, "the listening line")
        assert f"metrics on http://127.0.0.1:{metrics_port}/metrics" in bookie.log()
    finally:
        bookie.stop()
    assert not port_open(metrics_port)


def test_no_metrics_port_serves_no_metrics(tmp_path: Path) -> None:
    bookie = start_bookie_process(tmp_path)
    try:
        wait_until(lambda: "listening on" in bookie.log(), 10, "the listening line")
        assert "metrics on" not in bookie.log()
    finally:
        bookie.stop()


def test_metrics_port_in_use_stops_the_bookie_at_start(tmp_path: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        metrics_port = taken.getsockname()[1]
        args = ["bookie", "--data-dir", str(tmp_path), "--port", str(free_port())]
        done = subprocess.run(
            [sys.executable, "-m", "app.cli", *args, "--metrics-port", str(metrics_port)],
            cwd=REPO,
            env={**os.environ, "QUIRE_BOOKIE_HOST": "127.0.0.1"},
            capture_output=True,
            timeout=60,
        )
    assert done.returncode == 2  # a setting to change (app/listen.py)
    assert f"cannot listen on 127.0.0.1:{metrics_port} for metrics".encode() in done.stderr
    assert b"QUIRE_BOOKIE_METRICS_PORT" in done.stderr and b"Traceback" not in done.stderr
