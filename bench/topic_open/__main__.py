"""`make bench-topic-open`: how fast a broker creates topics and reopens them after a restart.

A `quire standalone` (one bookie; SQLite in its data directory, or a schema of its own on the
PostgreSQL server at QUIRE_TEST_POSTGRES_URL) on free ports. Phase one creates `--topics` topics
in public/default by producing one message to each (automatic creation), `--inflight` requests in
flight on as many keep-alive connections. Then the standalone is stopped (SIGTERM: every ledger
closed cleanly; or `--kill9`: the last ledgers stay OPEN and reopening must fence them, as a
failover does) and started again on the same data, and phase two asks every topic once for its
last message id, with the same concurrency. Each phase reports topics per second (its wall time,
first request to last answer), the p50/p99 of one request, and the broker's CPU time per topic
(from /proc: unlike the rate, it does not move with the load of a shared machine). Errors (any
answer but 200 once a 503 has been retried: a broker renewing its lease asks clients to retry,
and they do) are counted in the rate; the first few are printed, and the retries counted.

`--checkout DIR` runs the standalone from another checkout's code (say /work/main), so that two
branches are measured side by side with the same client. Not a test: it prints one table row per
run.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import signal
import sys
import tempfile
import time
from dataclasses import dataclass, replace
from pathlib import Path

from bench.common import pct
from bench.http_load import Connection
from devtools import postgres
from devtools.procs import HOST, Proc, free_port
from tests.test_cli_standalone import free_port_run  # runs of ports for the bookies and their metrics

NS = "public/default"
BODY = b'{"messages": [{"value": "hello"}]}'
RETRIES = 100
RETRY_PAUSE_S = 0.1


@dataclass(frozen=True)
class Phase:
    topics: int
    seconds: float
    p50_ms: float
    p99_ms: float
    errors: int
    retries: int
    cpu_s: float = 0.0  # the broker's CPU time (user + system) over the phase

    @property
    def cpu_ms_per_topic(self) -> float:
        return self.cpu_s * 1000 / self.topics

    @property
    def rate(self) -> float:
        return self.topics / self.seconds


async def drive(port: int, paths: list[tuple[str, str, bytes]], inflight: int) -> Phase:
    """Every request once, `inflight` connections each taking the next one as it finishes."""
    conns = [await Connection.open(HOST, port) for _ in range(inflight)]
    latencies: list[float] = []
    errors: list[str] = []
    retries: list[str] = []
    queue = iter(paths)

    async def worker(conn: Connection) -> None:
        for method, path, body in queue:
            started = time.perf_counter()
            for _ in range(RETRIES):  # a 503 says retry (a lease being renewed): clients do
                status, data = await conn.request(method, path, body)
                if status != 503:
                    break
                retries.append(path)
                await asyncio.sleep(RETRY_PAUSE_S)
            latencies.append((time.perf_counter() - started) * 1000)
            if status != 200:
                errors.append(f"{method} {path}: {status} {data[:200]!r}")

    started = time.perf_counter()
    await asyncio.gather(*(worker(c) for c in conns))
    seconds = time.perf_counter() - started
    for c in conns:
        c.close()
    for e in errors[:3]:
        print("error:", e, file=sys.stderr)
    return Phase(len(paths), seconds, pct(latencies, 50), pct(latencies, 99), len(errors), len(retries))


def broker_cpu_s(standalone: Proc) -> float:
    """The CPU time the standalone's broker child has used: it is what one topic costs, whatever
    else the machine is doing (the rate is not, on a shared machine)."""
    pid = standalone.pid
    for child in Path(f"/proc/{pid}/task/{pid}/children").read_text().split():
        if b"broker" in Path(f"/proc/{child}/cmdline").read_bytes().split(b"\0"):
            fields = Path(f"/proc/{child}/stat").read_text().rsplit(")", 1)[1].split()
            return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    raise RuntimeError("the standalone has no broker child")


def measured(proc: Proc, port: int, requests: list[tuple[str, str, bytes]], inflight: int) -> Phase:
    before = broker_cpu_s(proc)
    phase = asyncio.run(drive(port, requests, inflight))
    return replace(phase, cpu_s=broker_cpu_s(proc) - before)


def standalone(checkout: Path, data: Path, port: int, bookie_port: int, url: str | None, log: Path) -> Proc:
    args = ["standalone", "--data-dir", str(data), "--port", str(port), "--bookie-port", str(bookie_port)]
    if url is not None:
        args += ["--database-url", url]
    path = (str(checkout), str(checkout / "clients" / "python"), os.environ.get("BENCH_PYTHONPATH"))
    env = {
        "QUIRE_BOOKIE_METRICS_PORT": str(free_port_run(4)),
        "QUIRE_COMPACTOR_METRICS_PORT": str(free_port()),
        # BENCH_PYTHONPATH: more on the path (a sitecustomize that profiles the broker, say)
        "PYTHONPATH": os.pathsep.join(p for p in path if p),
    }
    proc = Proc([sys.executable, "-m", "app.cli", *args], env, log, cwd=checkout)
    return proc.start()


def run(checkout: Path, topics: int, inflight: int, database: str, kill9: bool) -> tuple[Phase, Phase]:
    url: str | None = None
    schema = None
    base = postgres.server_url()
    if database == "postgres":
        url, schema = postgres.create_schema(base, "bench_open")
    try:
        with tempfile.TemporaryDirectory(prefix="quire-bench-topic-open-") as tmp:
            port, bookie_port = free_port(), free_port_run(4)
            log = Path(tmp) / "standalone.log"
            names = [f"t{i:06d}" for i in range(topics)]
            proc = standalone(checkout, Path(tmp) / "data", port, bookie_port, url, log)
            try:
                proc.wait_ready(f"http://{HOST}:{port}", "standalone")
                produce = [("POST", f"/v1/topics/{NS}/{n}/messages", BODY) for n in names]
                created = measured(proc, port, produce, inflight)
                if kill9:
                    proc.kill9()
                else:
                    proc.signal(signal.SIGTERM)
                    proc.wait(120)
                proc = standalone(checkout, Path(tmp) / "data", port, bookie_port, url, log)
                proc.wait_ready(f"http://{HOST}:{port}", "standalone")
                ask = [("GET", f"/v1/topics/{NS}/{n}/last-message-id", b"") for n in names]
                reopened = measured(proc, port, ask, inflight)
            finally:
                proc.stop()
                if os.environ.get("BENCH_KEEP_LOG"):
                    print(log.read_text()[-4000:], file=sys.stderr)
    finally:
        if schema is not None:
            postgres.drop_schema(base, schema)
    return created, reopened


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--topics", type=int, default=5000)
    parser.add_argument("--inflight", type=int, default=48)
    parser.add_argument("--database", choices=("sqlite", "postgres"), default="sqlite")
    parser.add_argument("--kill9", action="store_true", help="restart by kill -9 (ledgers left OPEN)")
    parser.add_argument("--checkout", action="append", type=Path, help="checkouts to compare (default: this)")
    args = parser.parse_args()
    checkouts = args.checkout or [Path(__file__).resolve().parents[2]]
    restart = "kill -9" if args.kill9 else "SIGTERM"
    print(f"{args.topics:,} topics, {args.inflight} in flight, {args.database}, restart by {restart}")
    print()
    print(
        "| code | created/s | create p50 / p99 ms | broker CPU ms per create "
        "| reopened/s | reopen p50 / p99 ms | broker CPU ms per reopen | errors | 503 retries |"
    )
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    for checkout in checkouts:
        c, r = run(checkout, args.topics, args.inflight, args.database, args.kill9)
        print(
            f"| {checkout} | {c.rate:,.0f} | {c.p50_ms:.1f} / {c.p99_ms:.1f} | {c.cpu_ms_per_topic:.1f} "
            f"| {r.rate:,.0f} | {r.p50_ms:.1f} / {r.p99_ms:.1f} | {r.cpu_ms_per_topic:.1f} "
            f"| {c.errors} + {r.errors} | {c.retries} + {r.retries} |",
            flush=True,
        )


if __name__ == "__main__":
    main()
