"""`quire bookie` as a process: it says where it listens, refuses garbage settings with a clear
message, serves STATS, and stops cleanly on SIGTERM keeping what it acknowledged."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from bookie.client import BookieLedgerClient
from bookie.types import LedgerSpec
from tests.bookie.conftest import BookieProcess, start_bookie_process
from tests.support import REPO, free_port, wait_until


def test_garbage_setting_is_a_clear_error(tmp_path: Path) -> None:
    env = {**os.environ, "QUIRE_BOOKIE_MAX_FRAME_BYTES": "banana"}
    done = subprocess.run(
        [sys.executable, "-m", "app.cli", "bookie", "--data-dir", str(tmp_path), "--port", str(free_port())],
        cwd=REPO,
        env=env,
        capture_output=True,
        timeout=60,
    )
    assert done.returncode == 2
    assert b"bookie_max_frame_bytes" in done.stderr


def test_port_in_use_is_a_clear_error(tmp_path: Path, bookie_process: BookieProcess) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "app.cli", "bookie", "--data-dir", str(tmp_path / "other"), "--port",
         str(bookie_process.port)],
        cwd=REPO,
        env={**os.environ, "QUIRE_BOOKIE_HOST": "127.0.0.1"},
        capture_output=True,
        timeout=60,
    )  # fmt: skip
    assert done.returncode != 0
    assert b"cannot listen" in done.stderr


def test_sigterm_stops_cleanly_and_keeps_data(tmp_path: Path) -> None:
    bookie = start_bookie_process(tmp_path)
    spec = LedgerSpec(3, (bookie.address,))

    async def write() -> dict[str, object]:
        client = BookieLedgerClient()
        writer = await client.create_ledger(spec)
        await asyncio.gather(*(writer.add_entry(b"v%d" % i) for i in range(100)))
        stats = await client.bookie_stats(bookie.address)
        await client.close()
        return stats

    async def read() -> list[bytes]:
        client = BookieLedgerClient()
        try:
            return await client.read_entries(spec, 0, 99)
        finally:
            await client.close()

    try:
        # The port answers a moment before the line is in the log (its buffer is flushed after).
        wait_until(lambda: f"listening on 127.0.0.1:{bookie.port}" in bookie.log(), 10, "the listening line")
        stats = asyncio.run(write())
        assert stats["server"]["requests"] >= 100  # type: ignore[index]
        assert bookie.process is not None
        os.killpg(bookie.process.pid, signal.SIGTERM)
        assert bookie.process.proc is not None
        assert bookie.process.proc.wait(timeout=30) == 0
        assert "bookie stopped" in bookie.log()
        bookie.start()
        assert asyncio.run(read()) == [b"v%d" % i for i in range(100)]
    finally:
        bookie.stop()


def test_storage_setting_the_engine_refuses(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "app.cli", "bookie", "--data-dir", str(tmp_path), "--port", str(free_port())],
        cwd=REPO,
        env={**os.environ, "QUIRE_JOURNAL_MAX_SIZE_BYTES": "100"},
        capture_output=True,
        timeout=60,
    )
    assert done.returncode == 1
    assert b"journal_max_size_bytes" in done.stderr


def test_host_flag_or_bookie_host(monkeypatch: pytest.MonkeyPatch) -> None:
    from app.processes.bookie import listen_host
    from app.settings import Settings

    monkeypatch.delenv("QUIRE_BOOKIE_HOST", raising=False)
    monkeypatch.setenv("QUIRE_HOST", "0.0.0.0")
    assert listen_host(Settings()) == "0.0.0.0"  # `quire bookie --host 0.0.0.0`
    monkeypatch.setenv("QUIRE_BOOKIE_HOST", "127.0.0.2")
    assert listen_host(Settings()) == "127.0.0.2"
    monkeypatch.delenv("QUIRE_HOST")
    assert listen_host(Settings()) == "127.0.0.2"
