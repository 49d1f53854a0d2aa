"""`make bench-ml`: what the managed ledger layer costs over the bare bookie client.

Starts `quire bookie` on a free port in a temporary directory and a SQL metadata store (SQLite
file there by default, or --database-url), then from this process (uvloop), in the same run
against the same bookie:
- the bare client: `BookieLedgerClient` writer, 100 B entries, N adds in flight, each add an
  awaited `add_entry` coroutine in its own task (the way the managed ledger calls it);
- the managed ledger: `ManagedLedger.append` of the same entries with N in flight, with Pulsar's
  default rollover (50,000 entries), so rollovers happen inside the measurement;
- the ratio of the two (the bar: the layer costs under 30%, i.e. ratio >= 0.70);
- SQL statements per 10,000 appends (ledger creation, rollover, cursor flush, trimming) and per
  10,000 acks (a durable cursor reading and acking every entry one by one with the default
  1 s flush interval; the bar: well under one per hundred). The store counts its statements.
Each rate is the median of several rounds. Not a test: it prints one table.
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import os
import statistics
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

from bench.common import bookie_client_config, free_port, start_bookie, stop_bookie
from bookie.client import BookieLedgerClient
from bookie.types import LedgerSpec
from managed_ledger.api import ManagedLedgerConfig
from managed_ledger.factory import ManagedLedgerFactory
from managed_ledger.metadata.sql import SqlMetadataStore

ENTRY_BYTES = 100
BAR_RATIO = 0.70
BARE_LEDGER_BASE = 1_000_000_000  # far above the store's sequence: no clash with the ML's ledgers


async def pump(add: Callable[[], Awaitable[object]], count: int, in_flight: int) -> float:
    """Keep `in_flight` calls outstanding (each in its own task) until `count` completed."""
    window: collections.deque[asyncio.Future[object]] = collections.deque()
    start = time.perf_counter()
    for _ in range(count):
        window.append(asyncio.ensure_future(add()))
        if len(window) >= in_flight:
            await window.popleft()
    while window:
        await window.popleft()
    return time.perf_counter() - start


class Bench:
    def __init__(self, args: argparse.Namespace, address: str, store: SqlMetadataStore) -> None:
        self.args = args
        self.address = address
        self.store = store
        self.client = BookieLedgerClient(bookie_client_config())
        self.payload = os.urandom(ENTRY_BYTES)
        self.next_bare = BARE_LEDGER_BASE

    async def bare_round(self) -> float:
        spec = LedgerSpec(self.next_bare, (self.address,))
        self.next_bare += 1
        writer = await self.client.create_ledger(spec)
        payload = self.payload
        took = await pump(lambda: writer.add_entry(payload), self.args.count, self.args.in_flight)
        await writer.close()
        return float(self.args.count / took)

    async def rounds(self) -> tuple[list[float], list[float], float]:
        """Bare and managed ledger rates, round by round alternately (the machine's noise hits
        both alike), and SQL statements per 10,000 managed ledger appends."""
        factory = ManagedLedgerFactory(self.client, self.store, [self.address])
        ml = await factory.open("bench", ManagedLedgerConfig())
        payload = self.payload
        bare, managed = [], []
        statements = 0
        for _ in range(self.args.rounds):
            bare.append(await self.bare_round())
            before = self.store.statement_count
            took = await pump(lambda: ml.append(payload), self.args.count, self.args.in_flight)
            statements += self.store.statement_count - before
            managed.append(self.args.count / took)
        await factory.close()
        return bare, managed, statements * 10_000 / (self.args.count * self.args.rounds)

    async def ack_statements(self) -> tuple[float, float]:
        """(SQL statements per 10,000 acks, acks/s) for a cursor acking every entry singly."""
        factory = ManagedLedgerFactory(self.client, self.store, [self.address])
        ml = await factory.open("bench-acks", ManagedLedgerConfig())
        payload = self.payload
        await pump(lambda: ml.append(payload), self.args.acks, self.args.in_flight)
        cursor = await ml.open_cursor("sub", "earliest")
        before = self.store.statement_count
        start = time.perf_counter()
        acked = 0
        while acked < self.args.acks:
            entries = await cursor.read_entries(500)
            for position, _ in entries:
                cursor.ack([position])
            acked += len(entries)
            await asyncio.sleep(0)
        took = time.perf_counter() - start
        await factory.close()  # flushes the cursor: counted
        statements = self.store.statement_count - before
        return statements * 10_000 / acked, acked / took


def fmt(x: float) -> str:
    return f"{x:,.0f}"


async def bench(args: argparse.Namespace, tmp: Path) -> None:
    port = free_port()
    proc = start_bookie(tmp / "bookie", port, tmp / "bookie.log")
    store = SqlMetadataStore(args.database_url or f"sqlite:///{tmp / 'metadata.db'}")
    try:
        b = Bench(args, f"127.0.0.1:{port}", store)
        await b.bare_round()  # warm-up: connection, bookie journal
        bare, ml, sql_per_append = await b.rounds()
        sql_per_ack, ack_rate = await b.ack_statements()
        await b.client.close()
    finally:
        store.close()
        stop_bookie(proc)
    bare_rate, ml_rate = statistics.median(bare), statistics.median(ml)
    ratio = ml_rate / bare_rate
    backend = (args.database_url or "sqlite").split(":")[0]
    rows = [
        (f"bare bookie client, appends/s ({args.in_flight} in flight)", fmt(bare_rate), ""),
        (f"managed ledger, appends/s ({args.in_flight} in flight)", fmt(ml_rate), ""),
        (
            "managed ledger / bare",
            f"{ratio:.2f}",
            f">= {BAR_RATIO:.2f} {'ok' if ratio >= BAR_RATIO else 'MISSED'}",
        ),
        (f"SQL statements per 10,000 appends ({backend})", f"{sql_per_append:.1f}", "< 100 (1 per 100)"),
        (f"SQL statements per 10,000 acks ({backend})", f"{sql_per_ack:.1f}", "< 100 (1 per 100)"),
        ("cursor acks/s (read + ack one by one)", fmt(ack_rate), ""),
    ]
    width = max(len(r[0]) for r in rows)
    print(
        f"\nmanaged ledger bench: {ENTRY_BYTES} B entries, {args.count:,} per round, median of {args.rounds}"
    )
    print(f"{'metric':<{width}}  {'value':>12}  bar")
    for name, value, bar in rows:
        print(f"{name:<{width}}  {value:>12}  {bar}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--count", type=int, default=60_000, help="appends per round")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--in-flight", type=int, default=256)
    parser.add_argument("--acks", type=int, default=50_000)
    parser.add_argument("--database-url", default="", help="metadata store (default: SQLite in a temp dir)")
    args = parser.parse_args()
    loop_factory: Callable[[], asyncio.AbstractEventLoop]
    try:
        import uvloop

        loop_factory = uvloop.new_event_loop
    except ImportError:  # pragma: no cover - uvloop is a dependency
        loop_factory = asyncio.new_event_loop
    with (
        tempfile.TemporaryDirectory(prefix="quire-bench-ml-") as tmp,
        asyncio.Runner(loop_factory=loop_factory) as runner,
    ):
        runner.run(bench(args, Path(tmp)))


if __name__ == "__main__":
    main()
