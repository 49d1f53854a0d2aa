"""`make bench-console`: the server time of every console page with 1,000 topics in a namespace.

A `quire standalone` on free ports (its own temporary data directory); BENCH_CONSOLE_TOPICS
topics are created in public/default, one of them with messages, two subscriptions and a
compaction run. Each page is fetched WARMUP times, then SAMPLES times on one keep-alive
connection; the table gives the median and p95 of the server's own time (the `Server-Timing`
header the console sets: the page's handler with its API calls, from the request to the
response) and of the time the client saw. The bar is a server time under 300 ms per page.
"""

from __future__ import annotations

import argparse
import asyncio
import re
import statistics
import tempfile
import time
from pathlib import Path

import httpx

from bench.common import pct
from devtools.procs import Proc, free_port
from tests.test_cli_standalone import free_port_run  # runs of ports for the bookies and their metrics

BAR_MS = 300.0
WARMUP = 3
SAMPLES = 20
NS = "public/default"


def pages(topic: str) -> list[tuple[str, str]]:
    t = f"/console/topics/{NS}/{topic}"
    return [
        ("cluster", "/console"),
        ("cluster chart (htmx poll)", "/console/cluster/chart"),
        ("tenants", "/console/tenants"),
        ("tenant (namespaces, topic counts)", "/console/tenants/public"),
        ("namespace (1,000 topics, page 1)", f"/console/namespaces/{NS}"),
        ("namespace, search", f"/console/namespaces/{NS}?q=77"),
        ("namespace, last page", f"/console/namespaces/{NS}?page=10"),
        ("topic", t),
        ("topic chart (htmx poll)", f"{t}/chart"),
        ("compaction status (htmx poll)", f"{t}/compaction"),
        ("messages (20, JSON)", f"{t}/messages"),
        ("messages as hex (100)", f"{t}/messages?mode=hex&n=100"),
        ("examine a subscription's 1st", f"{t}/messages?sub=audit&position=1"),
        ("Kafka groups", "/console/kafka/groups"),
    ]


async def populate(client: httpx.AsyncClient, topics: int) -> str:
    sem = asyncio.Semaphore(16)

    async def create(i: int) -> None:
        async with sem:
            r = await client.put(f"/admin/v2/persistent/{NS}/topic-{i:04d}")
            assert r.status_code in (204, 409), r.text

    await asyncio.gather(*(create(i) for i in range(topics)))
    topic = "topic-0000"
    for sub in ("audit", "billing"):
        r = await client.put(
            f"/v1/topics/{NS}/{topic}/subscriptions/{sub}", json={"initial_position": "earliest"}
        )
        assert r.status_code in (200, 201), r.text
    for batch in range(10):
        messages = [
            {"key": f"k{i % 50}", "value": f'{{"n": {batch * 100 + i}, "pad": "{"x" * 80}"}}'}
            for i in range(100)
        ]
        assert (
            await client.post(f"/v1/topics/{NS}/{topic}/messages", json={"messages": messages})
        ).status_code == 200
    assert (await client.put(f"/admin/v2/persistent/{NS}/{topic}/compaction")).status_code == 204
    for _ in range(120):
        if (await client.get(f"/admin/v2/persistent/{NS}/{topic}/compaction")).json()["status"] != "RUNNING":
            break
        await asyncio.sleep(0.5)
    return topic


async def measure(client: httpx.AsyncClient, url: str) -> tuple[list[float], list[float]]:
    server, seen = [], []
    for i in range(WARMUP + SAMPLES):
        started = time.perf_counter()
        r = await client.get(url)
        elapsed = (time.perf_counter() - started) * 1000
        assert r.status_code == 200, (url, r.status_code, r.text[:300])
        timing = re.search(r"console;dur=([\d.]+)", r.headers.get("server-timing", ""))
        assert timing, url
        if i >= WARMUP:
            server.append(float(timing[1]))
            seen.append(elapsed)
    return server, seen


async def run(base: str, topics: int) -> list[str]:
    async with httpx.AsyncClient(base_url=base, timeout=60) as client:
        topic = await populate(client, topics)
        listed = (await client.get(f"/admin/v2/persistent/{NS}")).json()
        rows = [
            f"Console pages, {len(listed):,} topics in {NS}; median and p95 of {SAMPLES} requests each (ms)",
            "",
            "| page | server median | server p95 | client median | under 300 ms |",
            "| --- | ---: | ---: | ---: | --- |",
        ]
        for name, url in pages(topic):
            server, seen = await measure(client, url)
            p95 = pct(server, 95)
            ok = "yes" if p95 < BAR_MS else "**no**"
            median, seen_median = statistics.median(server), statistics.median(seen)
            rows.append(f"| {name} | {median:.1f} | {p95:.1f} | {seen_median:.1f} | {ok} |")
        return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--topics", type=int, default=1000)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="quire-bench-console-") as tmp:
        port = free_port()
        quire_args = ["standalone", "--data-dir", f"{tmp}/data", "--port", str(port)]
        quire_args += ["--bookie-port", str(free_port_run(4))]  # no Kafka or Pulsar listener (Proc)
        env = {
            "QUIRE_BOOKIE_METRICS_PORT": str(free_port_run(4)),
            "QUIRE_COMPACTOR_METRICS_PORT": str(free_port()),
        }
        proc = Proc.quire(quire_args, env, Path(tmp) / "standalone.log").start()
        try:
            base = f"http://127.0.0.1:{port}"
            proc.wait_ready(base, "standalone")
            print("\n".join(asyncio.run(run(base, args.topics))))
        finally:
            proc.stop()


if __name__ == "__main__":
    main()
