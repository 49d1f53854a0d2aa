"""`make bench-replication`: Quire's replicated write path next to a replicated peer, in one run on
this machine, printed as one table with the bars beside the figures.

- REST produce (batches of 100 and 1,000 messages per request, and one message per request from
  64 connections and from one, wrk as in `make bench`) against a broker writing ledgers at 1/1/1 on one
  bookie, 3/2/2 on three and 3/3/2 on three (E/Qw/Qa): separate bookie processes and a broker
  sharing one SQLite metadata store, a fresh stack per configuration.
- The peer: a three-server NATS JetStream cluster started here, a file stream with
  num_replicas=3; windowed async publishes (windows of 1,000) and publishes awaiting each ack
  (64 concurrent, and one at a time), through nats-py.
- A bookie killed with -9 mid-run: three bookies at 3/2/2 plus a spare, producers of batches of
  100 for KILL_RUN_S seconds, one bookie of the topic's ensemble killed at KILL_AT_S. It counts
  producer errors (non-200 answers, or no answer within REQUEST_TIMEOUT_S), the longest stall
  (largest gap between two successful answers, the run's start and end included) and, after
  the run, the acknowledged message ids a reader cannot find.
- Re-replication: RECOVERY_MB of 1 KiB entries in closed 3/2/2 ledgers over four bookies, one
  killed with -9, then a `quire autorecovery` process with short grace periods; the time from
  the broker first listing under-replicated ledgers to the list being empty, and the bytes the
  worker copied (its own counter), give MB/s.
Every phase is bounded in time; every process is stopped by process group, also on error.
"""

from __future__ import annotations

import asyncio
import itertools
import os
import re
import shutil
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import httpx
import orjson

from bench.bench_api import (
    BATCH_CONNECTIONS,
    CONNECTIONS,
    DURATION_S,
    TOPIC,
    batch_body,
    bounded,
    progress,
    wrk_rate,
)
from bench.http_load import Connection, wrk_path
from bench.replication_stack import Stack, nats_cluster, nats_server_path, quire_stack
from devtools.cluster import FAST_HEARTBEAT
from devtools.procs import HOST

Row = dict[str, float]
QUORUMS = ((1, 1, 1, 1), (3, 2, 2, 3), (3, 3, 2, 3))  # E, Qw, Qa, bookies
KILL_RUN_S = float(os.environ.get("QUIRE_BENCH_KILL_RUN_S", "15"))
KILL_AT_S = KILL_RUN_S / 3
KILL_PRODUCERS = 8
REQUEST_TIMEOUT_S = 10.0
RECOVERY_MB = int(os.environ.get("QUIRE_BENCH_RECOVERY_MB", "200"))
ENTRY_BYTES = 1024
ENTRIES_PER_LEDGER = 5_000
PHASE_TIMEOUT_S = 300.0
RECOVERY_TIMEOUT_S = max(300.0, RECOVERY_MB * 3.0)


def label(quorum: tuple[int, ...]) -> str:
    return "/".join(map(str, quorum[:3]))


# --- REST produce at each quorum -----------------------------------------------------------------
def rest_rows(tmp: Path, quorum: tuple[int, int, int, int]) -> Row:
    e, qw, qa, bookies = quorum
    progress(f"quire {label(quorum)} on {bookies} bookie(s)")
    stack, base = quire_stack(tmp / f"q{e}{qw}{qa}", (e, qw, qa), bookies)
    with stack:
        port = int(base.rsplit(":", 1)[1])
        return {
            "single": wrk_rate(port, f"{TOPIC}/single/messages", batch_body(1), CONNECTIONS),
            "one": wrk_rate(port, f"{TOPIC}/one/messages", batch_body(1), 1),
            "batch100": 100 * wrk_rate(port, f"{TOPIC}/b100/messages", batch_body(100), BATCH_CONNECTIONS),
            "batch1000": 1000
            * wrk_rate(port, f"{TOPIC}/b1000/messages", batch_body(1000), BATCH_CONNECTIONS),
        }


# --- the peer: JetStream R3 ----------------------------------------------------------------------
async def jetstream_r3(urls: list[str]) -> Row:
    import nats

    nc = await nats.connect(servers=urls)
    js = nc.jetstream()
    payload = b"x" * 100
    try:
        await _add_r3_stream(js)
        single = await _closed_loop(CONNECTIONS, lambda: js.publish("r3.one", payload))
        one = await _closed_loop(1, lambda: js.publish("r3.one", payload))
        n, started = 0, time.perf_counter()
        while time.perf_counter() - started < DURATION_S:
            await asyncio.gather(*[js.publish("r3.win", payload) for _ in range(1000)])
            n += 1000
        return {"single": single, "one": one, "batch1000": n / (time.perf_counter() - started)}
    finally:
        await nc.close()


async def _add_r3_stream(js: Any) -> None:
    """The cluster elects its JetStream meta leader a few seconds after its routes are up: retry
    the stream's creation until then (bounded by the phase's timeout)."""
    from nats.js.api import StorageType

    while True:
        try:
            await js.add_stream(name="R3", subjects=["r3.>"], storage=StorageType.FILE, num_replicas=3)
            return
        except Exception as exc:  # nats-py raises several classes of its own while electing
            progress(f"jetstream cluster not ready yet ({type(exc).__name__}); retrying")
            await asyncio.sleep(1)


async def _closed_loop(clients: int, call: Callable[[], Awaitable[object]]) -> float:
    n = 0
    deadline = time.perf_counter() + DURATION_S

    async def client() -> None:
        nonlocal n
        while time.perf_counter() < deadline:
            await call()
            n += 1

    started = time.perf_counter()
    await asyncio.gather(*(client() for _ in range(clients)))
    return n / (time.perf_counter() - started)


def jetstream_rows(tmp: Path) -> Row:
    progress("nats jetstream cluster (3 servers, R3)")
    stack, urls = nats_cluster(tmp / "nats")
    with stack:
        return bounded(jetstream_r3(urls), PHASE_TIMEOUT_S, "jetstream r3")


# --- a bookie killed mid-run ---------------------------------------------------------------------
class KillRun:
    """Producers of batches of 100 on one topic; what they saw while a bookie died."""

    def __init__(self, port: int, path: str) -> None:
        self.port, self.path = port, path
        self.body = batch_body(100)
        self.ok_times: list[float] = []
        self.acked: list[str] = []
        self.errors = 0

    async def producer(self, deadline: float) -> None:
        conn: Connection | None = None
        while time.perf_counter() < deadline:
            try:
                if conn is None:
                    conn = await Connection.open(HOST, self.port)
                status, raw = await asyncio.wait_for(
                    conn.request("POST", self.path, self.body), REQUEST_TIMEOUT_S
                )
            except (OSError, EOFError, TimeoutError, ValueError, IndexError):
                # No answer (or a broken one): an error, and a fresh connection for the next try.
                self.errors += 1
                if conn is not None:
                    conn.close()
                conn = None
                continue
            if status != 200:
                self.errors += 1
                continue
            self.ok_times.append(time.perf_counter())
            self.acked.extend(r["message_id"] for r in orjson.loads(raw)["results"])
        if conn is not None:
            conn.close()

    async def run(self, kill: Callable[[], None]) -> float:
        """Run the producers for KILL_RUN_S, calling `kill` at KILL_AT_S; the longest stall."""
        started = time.perf_counter()
        deadline = started + KILL_RUN_S

        async def killer() -> None:
            await asyncio.sleep(KILL_AT_S)
            await asyncio.to_thread(kill)

        await asyncio.gather(killer(), *(self.producer(deadline) for _ in range(KILL_PRODUCERS)))
        marks = [started, *sorted(self.ok_times), max(deadline, time.perf_counter())]
        return max(b - a for a, b in itertools.pairwise(marks))


def current_ensemble(base: str, topic: str) -> list[str]:
    stats = httpx.get(f"{base}/admin/v2/persistent/public/default/{topic}/internalStats", timeout=10).json()
    ensembles: dict[str, list[str]] = stats["ledgers"][-1]["ensembles"]
    return ensembles[max(ensembles, key=int)]


def readable_ids(base: str, topic: str) -> set[str]:
    """Every message id a reader finds from the earliest, page after page (bounded)."""
    found: set[str] = set()
    start, deadline = "earliest", time.monotonic() + PHASE_TIMEOUT_S
    with httpx.Client(base_url=base, timeout=60) as client:
        while time.monotonic() < deadline:
            params = {"start": start, "max_messages": "10000"}
            page = client.get(f"{TOPIC}/{topic}/messages", params=params).raise_for_status().json()
            found.update(m["message_id"] for m in page["messages"])
            if not page["messages"] or page["next"] is None:
                return found
            start = page["next"]
    raise TimeoutError(f"reading {topic} back took over {PHASE_TIMEOUT_S:g} s")


def kill_row(tmp: Path) -> Row:
    progress(f"a bookie killed at {KILL_AT_S:g} s of a {KILL_RUN_S:g} s run (3/2/2, 3 bookies + a spare)")
    stack, base = quire_stack(tmp / "kill", (3, 2, 2), 3)
    with stack:
        topic = "kill"
        httpx.post(f"{base}{TOPIC}/{topic}/messages", content=batch_body(100), timeout=30).raise_for_status()
        spare = stack.bookie()  # started once the topic's first ledger is on the other three
        victim = current_ensemble(base, topic)[0]
        port = int(base.rsplit(":", 1)[1])
        run = KillRun(port, f"{TOPIC}/{topic}/messages")
        stall = bounded(run.run(lambda: stack.kill9(victim)), KILL_RUN_S + 60, "bookie kill run")
        lost = len(set(run.acked) - readable_ids(base, topic))
        rate = len(run.acked) / KILL_RUN_S
        # Evidence that the writer replaced the dead bookie rather than the run missing it.
        replaced = float(spare in current_ensemble(base, topic))
    return {
        "errors": float(run.errors),
        "stall": stall,
        "lost": float(lost),
        "rate": rate,
        "replaced": replaced,
    }


# --- re-replication of a lost bookie's copies ----------------------------------------------------
async def write_ledgers(db_url: str, addresses: list[str]) -> float:
    """RECOVERY_MB of 1 KiB entries in closed 3/2/2 ledgers over rotating ensembles of three of
    the four bookies; the bytes whose write set includes the first bookie (the one to lose)."""
    from bench.common import bookie_client_config
    from bookie.client import BookieLedgerClient
    from bookie.ledgers import LedgerManager, ledger_spec
    from managed_ledger.metadata.sql import SqlMetadataStore

    store = SqlMetadataStore(db_url)
    client = BookieLedgerClient(bookie_client_config())
    manager = LedgerManager(store, client)
    payload = os.urandom(ENTRY_BYTES)
    ledgers = max(1, RECOVERY_MB * 1024 * 1024 // (ENTRY_BYTES * ENTRIES_PER_LEDGER))
    on_lost = 0
    try:
        for i in range(ledgers):
            ensemble = tuple(addresses[(i + k) % 4] for k in range(3))
            handle = await manager.create(3, 2, 2, ensemble=ensemble)
            for _ in range(ENTRIES_PER_LEDGER // 1000):
                await asyncio.gather(*(handle.add_entry(payload) for _ in range(1000)))
            spec = ledger_spec(await manager.close(handle))
            on_lost += sum(addresses[0] in spec.write_set(e) for e in range(ENTRIES_PER_LEDGER))
            if i % 10 == 9:
                progress(f"  {i + 1}/{ledgers} ledgers written")
    finally:
        await client.close()
        store.close()
    return float(on_lost * ENTRY_BYTES)


def metric(port: int, name: str) -> float:
    text = httpx.get(f"http://{HOST}:{port}/metrics", timeout=5).text
    found = re.search(rf"^{name}_total (\S+)$", text, re.M)
    return float(found.group(1)) if found else 0.0


def wait_rereplicated(base: str) -> tuple[float, float]:
    """(first time the broker lists an under-replicated ledger, first time after that the list
    is empty), polled every 0.1 s, bounded by RECOVERY_TIMEOUT_S."""
    listed, deadline = 0.0, time.monotonic() + RECOVERY_TIMEOUT_S
    while time.monotonic() < deadline:
        ledgers = httpx.get(f"{base}/admin/v2/bookies/underreplicated", timeout=10).json()["ledgers"]
        now = time.monotonic()
        if ledgers and not listed:
            listed = now
        elif listed and not ledgers:
            return listed, now
        time.sleep(0.1)
    raise TimeoutError(f"re-replication not done within {RECOVERY_TIMEOUT_S:g} s")


def rereplication_row(tmp: Path) -> Row:
    progress(f"re-replication: {RECOVERY_MB} MB of 1 KiB entries at 3/2/2 over 4 bookies")
    with Stack(tmp / "rerepl", FAST_HEARTBEAT) as stack:
        addresses = [stack.bookie() for _ in range(4)]
        base = stack.broker((3, 2, 2), addresses)
        expected = bounded(write_ledgers(stack.db_url, addresses), RECOVERY_TIMEOUT_S, "writing ledgers")
        progress(f"killing {addresses[0]} (holds {expected / 1e6:,.0f} MB of copies); autorecovery starts")
        killed = time.monotonic()
        stack.kill9(addresses[0])
        metrics_port = stack.autorecovery()
        listed, done = wait_rereplicated(base)
        copied = metric(metrics_port, "quire_recovery_bytes")
    return {
        "copied_mb": copied / 1e6,
        "expected_mb": expected / 1e6,
        "copy_s": done - listed,
        "total_s": done - killed,
        "mb_s": copied / 1e6 / (done - listed),
    }


# --- the table -----------------------------------------------------------------------------------
def bar(ok: bool) -> str:
    return "ok" if ok else "MISSED"


def print_rest(q: dict[str, Row], js: Row) -> None:
    cols = [label(x) for x in QUORUMS]
    head = f"{'produce (msg/s, 100 B messages)':<50}" + "".join(f"{c:>11}" for c in cols) + f"{'JS R3':>11}"
    print(head)
    print("-" * len(head))
    rows = (
        (f"1 msg/req, {CONNECTIONS} conns | JS await each ack x{CONNECTIONS}", "single", "single"),
        ("1 msg/req, 1 conn | JS await each ack x1", "one", "one"),
        (f"batches of 100, {BATCH_CONNECTIONS} conns", "batch100", ""),
        (f"batches of 1,000, {BATCH_CONNECTIONS} conns | JS windows of 1,000", "batch1000", "batch1000"),
    )
    for name, key, js_key in rows:
        peer = f"{js[js_key]:>11,.0f}" if js_key else f"{'-':>11}"
        print(f"{name:<50}" + "".join(f"{q[c][key]:>11,.0f}" for c in cols) + peer)


def print_bars(q: dict[str, Row], js: Row, kill: Row, rerepl: Row) -> None:
    r322, r111 = q["3/2/2"], q["1/1/1"]
    checks = [
        (f"3/2/2 batches of 1,000 vs JS R3 windowed: {r322['batch1000'] / js['batch1000']:.2f}x", ">= 5x",
         r322["batch1000"] >= 5 * js["batch1000"]),
        (f"3/2/2 batches of 100 vs JS R3 windowed: {r322['batch100'] / js['batch1000']:.2f}x", ">= 5x",
         r322["batch100"] >= 5 * js["batch1000"]),
        (f"3/2/2 1 msg/req vs JS R3 awaiting each ack: {r322['single'] / js['single']:.2f}x", ">= 1x",
         r322["single"] >= js["single"]),
        (f"the same, one in flight on each side: {r322['one'] / js['one']:.2f}x", ">= 1x",
         r322["one"] >= js["one"]),
        (f"3/2/2 batches of 1,000 vs 1/1/1: {r322['batch1000'] / r111['batch1000']:.2f}x", ">= 0.5x",
         r322["batch1000"] >= 0.5 * r111["batch1000"]),
        (f"3/2/2 batches of 100 vs 1/1/1: {r322['batch100'] / r111['batch100']:.2f}x", ">= 0.5x",
         r322["batch100"] >= 0.5 * r111["batch100"]),
        (f"bookie killed: {kill['errors']:.0f} errors, longest stall {kill['stall']:.2f} s", "0, < 2 s",
         kill["errors"] == 0 and kill["stall"] < 2),
        (f"bookie killed: acknowledged but not readable: {kill['lost']:.0f}", "lost: 0", kill["lost"] == 0),
        (f"re-replication: {rerepl['mb_s']:.1f} MB/s", ">= 50 MB/s", rerepl["mb_s"] >= 50),
    ]  # fmt: skip
    width = max(len(c[0]) for c in checks)
    print(f"\n{'figure':<{width}}  {'bar':<11}verdict")
    for figure, wanted, ok in checks:
        print(f"{figure:<{width}}  {wanted:<11}{bar(ok)}")


def print_table(q: dict[str, Row], js: Row, kill: Row, rerepl: Row) -> None:
    print(f"\nQuire replication vs NATS JetStream R3 ({DURATION_S:g} s per throughput row, one run,")
    print(f"  this machine: {os.cpu_count()} cores, shared with whatever else runs on it)")
    print("  Quire: separate bookie processes + 1 broker (1 uvicorn worker), one SQLite metadata store;")
    print("    every bookie fsyncs each group of adds before it answers; wrk, 1 thread, closed loop")
    print("  JS R3: 3 nats-server -js routed on loopback, file stream num_replicas=3 (default sync),")
    print("    nats-py on one connection\n")
    print_rest(q, js)
    print(
        f"\nbookie killed with -9 at {KILL_AT_S:g} s of {KILL_RUN_S:g} s (3/2/2, 3 bookies + 1 spare, "
        f"{KILL_PRODUCERS} producers of batches of 100): {kill['rate']:,.0f} msg/s acknowledged, "
        f"{kill['errors']:.0f} errors, longest stall {kill['stall']:.2f} s, lost: {kill['lost']:.0f}; "
        f"the spare is {'now' if kill['replaced'] else 'NOT'} in the topic's ensemble"
    )
    print(
        f"re-replication (3/2/2 over 4 bookies, 1 KiB entries, one killed with -9): "
        f"{rerepl['copied_mb']:,.1f} MB copied (the lost bookie held {rerepl['expected_mb']:,.1f} MB) in "
        f"{rerepl['copy_s']:.1f} s from listed to empty ({rerepl['total_s']:.1f} s from the kill): "
        f"{rerepl['mb_s']:.1f} MB/s"
    )
    print_bars(q, js, kill, rerepl)


def main() -> None:
    if wrk_path() is None:
        sys.exit("make bench-replication needs wrk (the HTTP load generator): apt-get install wrk")
    if nats_server_path() is None:
        sys.exit("make bench-replication needs nats-server (the peer): apt-get install nats-server")
    tmp = Path(tempfile.mkdtemp(prefix="quire-bench-repl-"))
    try:
        quire = {label(q): rest_rows(tmp, q) for q in QUORUMS}
        js = jetstream_rows(tmp)
        kill = kill_row(tmp)
        rerepl = rereplication_row(tmp)
        print_table(quire, js, kill, rerepl)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
