"""A real `quire bookie` whose journal is damaged in the middle (a lost page before intact,
acknowledged records) refuses to start: it exits 1 with one line that names the segment, the
offset and what the operator can do, and leaves the log as it found it."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from pathlib import Path

from bookie.client import BookieLedgerClient
from bookie.types import LedgerSpec
from tests.bookie.conftest import start_bookie_process
from tests.support import REPO

ENTRIES = 30
PAGE = 4096


def test_mid_segment_damage_stops_the_bookie_with_one_clear_line(tmp_path: Path) -> None:
    bookie = start_bookie_process(tmp_path)
    spec = LedgerSpec(7, (bookie.address,))

    async def write() -> None:
        client = BookieLedgerClient()
        try:
            writer = await client.create_ledger(spec)
            for i in range(ENTRIES):
                await writer.add_entry(b"%04d" % i * 250)  # 1000 bytes each: ~31 KB of records
        finally:
            await client.close()

    try:
        asyncio.run(write())
    finally:
        bookie.kill9()
    (segment,) = sorted((bookie.data_dir / "journal").glob("*.log"))
    with open(segment, "r+b") as f:
        f.seek(PAGE)
        f.write(bytes(PAGE))  # a lost write in the middle: records after it are intact
    damaged = segment.read_bytes()

    done = subprocess.run(
        [sys.executable, "-m", "app.cli", "bookie", "--data-dir", str(bookie.data_dir), "--port",
         str(bookie.port)],
        cwd=REPO,
        env={**os.environ, "QUIRE_BOOKIE_HOST": "127.0.0.1"},
        capture_output=True,
        timeout=60,
    )  # fmt: skip
    stderr = done.stderr.decode(errors="replace")
    assert done.returncode == 1, stderr
    assert "Traceback" not in stderr
    last = stderr.strip().splitlines()[-1]
    assert last.startswith(f"quire bookie: cannot open the storage in {bookie.data_dir}"), last
    assert segment.name in last and "not a torn tail" in last and "--format" in last, last
    assert segment.read_bytes() == damaged  # nothing cut: the acknowledged records are all there
