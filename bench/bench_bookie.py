"""`make bench-bookie`: durable adds per second through a real bookie, against the raw disk.

Starts `quire bookie` on a free port in a temporary directory and, from this process, writes
ledgers through `BookieLedgerClient` (one connection, uvloop) with 1, 16 and 256 adds in flight,
for 100 B and 1 KiB entries. Every add is acknowledged only after the bookie's fdatasync. Each
cell is the median of several rounds. Beside it, the raw ceiling measured in the same run on the
same disk, its rounds interleaved with the bookie's: a Python loop of write + fdatasync of N
records per fsync (N = in-flight count), the grouping a perfect group commit would get. Last,
the bookie's resident memory after writing 1x and 5x a volume of data (it must not grow with
the data stored).

Not a test: nothing here asserts; it prints one table. The bar is
>= 50,000 durable adds/s of 100 B entries with 256 in flight.
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import psutil

from bench.common import bookie_client_config, free_port, start_bookie, stop_bookie
from bookie.client import BookieLedgerClient, BookieLedgerWriter
from bookie.types import LedgerSpec

SIZES = (100, 1024)
IN_FLIGHT = (1, 16, 256)
BAR_ADDS_PER_S = 50_000


async def pump(writer: BookieLedgerWriter, payload: bytes, count: int, in_flight: int) -> float:
    """Keep `in_flight` adds outstanding until `count` are acknowledged; seconds taken."""
    window: collections.deque[asyncio.Future[int]] = collections.deque()
    start = time.perf_counter()
    for _ in range(count):
        window.append(writer.add_entry_future(payload))
        if len(window) >= in_flight:
            await window.popleft()
    while window:
        await window.popleft()
    return time.perf_counter() - start


class Ledgers:
    def __init__(self, client: BookieLedgerClient, address: str) -> None:
        self.client = client
        self.address = address
        self.next_id = 1

    async def writer(self) -> BookieLedgerWriter:
        spec = LedgerSpec(self.next_id, (self.address,))
        self.next_id += 1
        return await self.client.create_ledger(spec)


async def measure_cell(
    ledgers: Ledgers, tmp: Path, size: int, in_flight: int, seconds: float, rounds: int
) -> tuple[float, float]:
    """Median bookie adds/s and raw records/s, rounds interleaved so both see the same disk."""
    payload = os.urandom(size)
    # Size each bookie round from a short probe so that every round takes about `seconds`.
    probe_count = 200 * in_flight if in_flight > 1 else 300
    probe = await pump(await ledgers.writer(), payload, probe_count, in_flight)
    per_round = max(500, int(seconds * probe_count / probe))
    bookie, raw = [], []
    for _ in range(rounds):
        writer = await ledgers.writer()
        bookie.append(per_round / await pump(writer, payload, per_round, in_flight))
        await writer.close()
        raw.append(raw_rate(tmp, size, in_flight, seconds))
    return statistics.median(bookie), statistics.median(raw)


def raw_rate(directory: Path, size: int, group: int, seconds: float) -> float:
    """Records per second of a write + fdatasync loop, `group` records per fsync, appending."""
    record = os.urandom(size)
    path = directory / f"raw-{size}-{group}.log"
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        records = 0
        start = time.perf_counter()
        while time.perf_counter() - start < seconds:
            os.write(fd, b"".join([record] * group))
            os.fdatasync(fd)
            records += group
        return records / (time.perf_counter() - start)
    finally:
        os.close(fd)
        path.unlink()


async def rss_growth(ledgers: Ledgers, pid: int, volume_bytes: int) -> tuple[int, int]:
    """Bookie RSS after writing `volume_bytes` of 1 KiB entries, then after 5x in total."""
    payload = os.urandom(1024)
    per_ledger = 50_000
    written = 0
    marks = []
    for target in (volume_bytes, 5 * volume_bytes):
        while written < target:
            count = min(per_ledger, (target - written) // len(payload) + 1)
            writer = await ledgers.writer()
            await pump(writer, payload, count, 256)
            await writer.close()
            written += count * len(payload)
        await asyncio.sleep(0.5)
        marks.append(psutil.Process(pid).memory_info().rss)
    return marks[0], marks[1]


def fmt_rate(x: float) -> str:
    return f"{x:,.0f}"


async def bench(args: argparse.Namespace, tmp: Path) -> None:
    port = free_port()
    proc = start_bookie(tmp / "bookie", port, tmp / "bookie.log")
    client = BookieLedgerClient(bookie_client_config())
    try:
        ledgers = Ledgers(client, f"127.0.0.1:{port}")
        await pump(await ledgers.writer(), b"w" * 100, 5_000, 256)  # warm up
        rows = []
        for size in SIZES:
            for in_flight in IN_FLIGHT:
                rate, raw = await measure_cell(ledgers, tmp, size, in_flight, args.seconds, args.rounds)
                rows.append((size, in_flight, rate, raw))
                print(
                    f"  measured {size} B x {in_flight} in flight: {fmt_rate(rate)} adds/s", file=sys.stderr
                )
        rss1, rss5 = await rss_growth(ledgers, proc.pid, args.volume_mb * 1024 * 1024)
    finally:
        await client.close()
        stop_bookie(proc)
    print_table(rows, rss1, rss5, args)


def print_table(
    rows: list[tuple[int, int, float, float]], rss1: int, rss5: int, args: argparse.Namespace
) -> None:
    print(f"\nbookie durable adds, one connection, median of {args.rounds} rounds (cpus: {os.cpu_count()})")
    print(
        f"{'entry':>6} {'in flight':>9} {'adds/s':>10} {'MB/s':>8} {'raw write+fdatasync/s':>22} {'ratio':>6}"
    )
    for size, in_flight, rate, raw in rows:
        mb = rate * size / 1e6
        ratio = rate / raw
        print(f"{size:>5}B {in_flight:>9} {fmt_rate(rate):>10} {mb:>8.1f} {fmt_rate(raw):>22} {ratio:>6.2f}")
    best = next(rate for size, n, rate, _ in rows if size == 100 and n == 256)
    verdict = "PASS" if best >= BAR_ADDS_PER_S else "FAIL"
    print(f"bar: >= {BAR_ADDS_PER_S:,} adds/s of 100 B at 256 in flight: {fmt_rate(best)} -> {verdict}")
    vol = args.volume_mb
    print(
        f"bookie RSS after {vol} MiB written: {rss1 / 2**20:.1f} MiB; after {5 * vol} MiB: "
        f"{rss5 / 2**20:.1f} MiB (growth {(rss5 - rss1) / 2**20:+.1f} MiB)"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=1.5, help="target duration of one round")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--volume-mb", type=int, default=64, help="1x volume for the RSS check")
    args = parser.parse_args()
    try:
        import uvloop

        loop_factory: Callable[[], asyncio.AbstractEventLoop] = uvloop.new_event_loop
    except ImportError:  # pragma: no cover - uvloop is a dependency
        loop_factory = asyncio.new_event_loop
    with (
        tempfile.TemporaryDirectory(prefix="quire-bench-bookie-") as tmp,
        asyncio.Runner(loop_factory=loop_factory) as runner,
    ):
        runner.run(bench(args, Path(tmp)))


if __name__ == "__main__":
    main()
