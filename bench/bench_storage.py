"""The bookie storage engine alone (no network): durable adds/s with 1, 16 and 256 in flight.

Run: `.venv/bin/python -m bench.bench_storage [--data-dir DIR] [--seconds S]`.

Every add is acknowledged only after the fdatasync that covers it. Next to each row, the raw
ceiling measured in the same run on the same disk: a loop of one pwrite of `in_flight`
pre-encoded records + one fdatasync, i.e. the same grouping with no Python work per record.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import tempfile
import time
from pathlib import Path

from bookie.storage.engine import LedgerStorage, StorageConfig
from bookie.storage.records import encode_add, encode_segment_header


async def engine_rate(data_dir: Path, size: int, in_flight: int, seconds: float) -> float:
    """Durable adds/s: `in_flight` tasks, each adding its share of one ledger's entries."""
    shutil.rmtree(data_dir, ignore_errors=True)
    storage = LedgerStorage(StorageConfig(data_dir, gc_interval_s=3600))
    await storage.start()
    payload = os.urandom(size)
    done = 0
    stop_at = time.perf_counter() + seconds

    async def writer(first: int) -> None:
        nonlocal done
        entry_id = first
        while time.perf_counter() < stop_at:
            for _ in range(64):  # check the clock now and then, not per add
                await storage.add_entry(1, entry_id, entry_id - in_flight, payload)
                entry_id += in_flight
                done += 1

    started = time.perf_counter()
    await asyncio.gather(*(writer(i) for i in range(in_flight)))
    elapsed = time.perf_counter() - started
    await storage.close()
    return done / elapsed


def raw_rate(data_dir: Path, size: int, in_flight: int, seconds: float) -> float:
    """Records/s of pwrite + fdatasync of pre-encoded groups of `in_flight` records."""
    data_dir.mkdir(parents=True, exist_ok=True)
    path = data_dir / "raw.log"
    group = b"".join(encode_add(1, e, e - 1, os.urandom(size)) for e in range(in_flight))
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        os.write(fd, encode_segment_header(1, 0))
        offset, records = 16, 0
        started = time.perf_counter()
        while time.perf_counter() - started < seconds:
            os.pwrite(fd, group, offset)
            os.fdatasync(fd)
            offset += len(group)
            records += in_flight
            if offset > 256 * 1024**2:
                offset = 16
        return records / (time.perf_counter() - started)
    finally:
        os.close(fd)
        path.unlink()


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data-dir", type=Path, default=None)
    parser.add_argument("--seconds", type=float, default=3.0)
    args = parser.parse_args()
    root = args.data_dir or Path(tempfile.mkdtemp(prefix="quire-bench-storage-"))
    print(
        f"data dir {root}, {args.seconds:.0f} s per row, loop {type(asyncio.get_running_loop()).__module__}"
    )
    print(f"{'entry':>6} {'in flight':>9} {'adds/s':>10} {'MB/s':>7} {'raw recs/s':>11} {'ratio':>6}")
    try:
        for size in (100, 1024):
            for in_flight in (1, 16, 256):
                rate = await engine_rate(root / "engine", size, in_flight, args.seconds)
                raw = raw_rate(root / "raw", size, in_flight, args.seconds)
                print(
                    f"{size:>5}B {in_flight:>9} {rate:>10,.0f} {rate * size / 1e6:>7.1f} "
                    f"{raw:>11,.0f} {rate / raw:>6.2f}"
                )
    finally:
        if args.data_dir is None:
            shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    try:
        import uvloop

        uvloop.run(main())
    except ImportError:
        asyncio.run(main())
