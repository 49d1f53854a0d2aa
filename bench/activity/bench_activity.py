"""Cost follows activity: what idle topics cost a broker (`make bench-activity`).

For each tree (a checkout of Quire: e.g. main and a branch, side by side in one run), a
`quire standalone` on SQLite with one bookie is started from that tree's code. Topics are
created in steps (one message each over REST, `--concurrency` requests in flight), then left
idle. At each step the bench reports the broker's RSS (and KiB per topic over the RSS before the
first topic) and produce p50/p99 to one active topic, measured right after the step ("busy"),
and again after the topics have been idle longer than `--idle-unload-ms` (which the broker is
given as QUIRE_IDLE_TOPIC_UNLOAD_MS; a tree without idle unload ignores it), "idle".

    python -m bench.activity.bench_activity --tree main=/work/main --tree branch=. --steps 1000,5000
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import httpx
import psutil

from bench.common import free_port, pct
from devtools.procs import Proc, wait_ready


@dataclass
class Row:
    tree: str
    topics: int
    phase: str
    rss_mib: float
    kib_per_topic: float
    p50_ms: float
    p99_ms: float
    created_per_s: float


def _free_run(count: int) -> int:
    for _ in range(100):
        first = free_port()
        if first + count < 65_000 and all(_port_free(p) for p in range(first, first + count)):
            return first
    raise RuntimeError("no run of free ports")


def _port_free(port: int) -> bool:
    import socket

    with socket.socket() as s:
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def _broker_pid(standalone: psutil.Process) -> int:
    """The broker child of a standalone (the one whose command line names `broker`)."""
    for child in standalone.children(recursive=True):
        if "broker" in " ".join(child.cmdline()):
            return child.pid
    raise RuntimeError("no broker process under the standalone")


def _rss_mib(pid: int) -> float:
    return psutil.Process(pid).memory_info().rss / 2**20


async def _create(client: httpx.AsyncClient, base: str, first: int, last: int, concurrency: int) -> float:
    """Topics first..last-1, one message each; returns topics per second."""
    queue = iter(range(first, last))
    start = time.perf_counter()

    async def worker() -> None:
        for i in queue:
            url = f"{base}/v1/topics/public/default/idle-{i}/messages"
            for _ in range(50):  # a loaded broker may miss a lease renewal: 503, then it is back
                try:
                    r = await client.post(url, json={"messages": [{"value": "x"}]})
                except httpx.TransportError:
                    await asyncio.sleep(0.2)
                    continue
                if r.status_code < 500:
                    break
                await asyncio.sleep(0.2)
            r.raise_for_status()

    await asyncio.gather(*(worker() for _ in range(concurrency)))
    return (last - first) / max(time.perf_counter() - start, 1e-9)


async def _latency(client: httpx.AsyncClient, base: str, n: int) -> tuple[float, float]:
    url = f"{base}/v1/topics/public/default/active/messages"
    samples = []
    failed = 0
    for _ in range(n):
        t0 = time.perf_counter()
        r = await client.post(url, json={"messages": [{"value": "y" * 100}]})
        if r.status_code >= 500 and failed < n // 10:  # counted, not timed (a rollover's 503)
            failed += 1
            continue
        r.raise_for_status()
        samples.append((time.perf_counter() - t0) * 1000)
    if failed:
        print(f"  ({failed} produces of {n} failed and were not timed)", flush=True)
    return pct(samples, 50), pct(samples, 99)


async def _run_tree(name: str, tree: Path, steps: list[int], args: argparse.Namespace) -> list[Row]:
    rows: list[Row] = []
    with tempfile.TemporaryDirectory(prefix=f"bench-activity-{name}-", ignore_cleanup_errors=True) as tmp:
        port, bookie_port = free_port(), _free_run(4)
        env = {
            "PYTHONPATH": str(tree),
            "QUIRE_PULSAR_PORT": "0",
            "QUIRE_KAFKA_PORT": "0",
            "QUIRE_BOOKIE_METRICS_PORT": str(_free_run(4)),
            "QUIRE_COMPACTOR_METRICS_PORT": str(free_port()),
            "QUIRE_IDLE_TOPIC_UNLOAD_MS": str(args.idle_unload_ms),
        }
        cmd = [
            sys.executable,
            "-m",
            "app.cli",
            "standalone",
            "--data-dir",
            f"{tmp}/data",
            "--port",
            str(port),
        ]
        proc = Proc([*cmd, "--bookie-port", str(bookie_port)], env, Path(tmp) / "standalone.log", cwd=tree)
        proc.start()
        try:
            base = f"http://127.0.0.1:{port}"
            wait_ready(base, timeout_s=120)
            broker = _broker_pid(psutil.Process(proc.pid))
            limits = httpx.Limits(max_connections=args.concurrency + 2)
            async with httpx.AsyncClient(timeout=60, limits=limits) as client:
                await _latency(client, base, 50)  # the active topic exists, and the broker is warm
                baseline = _rss_mib(broker)
                made = 0
                for n in steps:
                    rate = await _create(client, base, made, n, args.concurrency)
                    made = n
                    for phase in ("busy", "idle"):
                        if phase == "idle":
                            await asyncio.sleep(args.idle_unload_ms / 1000 + args.idle_margin_s)
                        p50, p99 = await _latency(client, base, args.samples)
                        rss = _rss_mib(broker)
                        kib = (rss - baseline) * 1024 / n
                        rows.append(Row(name, n, phase, rss, kib, p50, p99, rate))
                        print(_line(rows[-1]), flush=True)
        except BaseException:
            print(proc.log()[-4000:], file=sys.stderr)
            raise
        finally:
            proc.stop()
    return rows


def _line(r: Row) -> str:
    return (
        f"| {r.tree} | {r.topics:,} | {r.phase} | {r.created_per_s:.0f} | {r.rss_mib:.0f} MiB | "
        f"{r.kib_per_topic:.1f} | {r.p50_ms:.1f} / {r.p99_ms:.1f} ms |"
    )


HEADER = (
    "| tree | topics | phase | created per s | broker RSS | KiB per topic | produce p50 / p99 |\n"
    "|---|---:|---|---:|---:|---:|---:|"
)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--tree", action="append", help="NAME=PATH of a Quire checkout (repeatable)")
    parser.add_argument("--steps", default="1000,5000,20000")
    parser.add_argument("--concurrency", type=int, default=32)
    parser.add_argument("--samples", type=int, default=500, help="produces per latency measurement")
    parser.add_argument("--idle-unload-ms", type=int, default=5_000)
    parser.add_argument("--idle-margin-s", type=float, default=10.0)
    args = parser.parse_args()
    trees = [t.split("=", 1) for t in (args.tree or [f"this={os.getcwd()}"])]
    steps = [int(s) for s in args.steps.split(",")]
    rows: list[Row] = []
    for name, path in trees:
        rows += asyncio.run(_run_tree(name, Path(path).resolve(), steps, args))
    print()
    print(HEADER)
    for r in rows:
        print(_line(r))


if __name__ == "__main__":
    main()
