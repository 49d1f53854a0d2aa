"""`make soak`: a local cluster under a steady load for SOAK_S seconds (default 600), to see that
nothing grows or slows down with time.

The cluster: three `quire bookie` processes and two `quire broker` processes (E=2, Qw=2, Qa=2)
on PostgreSQL (QUIRE_SOAK_POSTGRES_URL, default postgres@127.0.0.1:5432/test) in a schema of
their own, created at the start and dropped at the end. Every process runs in a session of its
own and is stopped by process group, on success and on error alike (devtools/cluster.py).

The load, open loop: a batch of BATCH messages every 1/(rate/BATCH) seconds, round robin over
TOPICS topics (spread over both brokers by lookup; a 307 is followed and the owner looked up
again), each batch's latency measured from when it was due (so a late sender shows as latency,
not as fewer samples). On each topic a consumer of a shared subscription receives (long poll)
and acks what it got.

It prints the RSS of every process (VmRSS of /proc/<pid>/status) at the start and the end, and a
table of produce latency per minute (p50, p99, max), with the ratio of the last minute's p99 to
the first's: flat is good. Numbers from a shared, noisy machine say more by their trend than by
their level.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import statistics
import tempfile
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import httpx

from bench.common import create_schema, drop_schema, free_port, pct
from bench.replication_stack import Stack
from devtools.procs import HOST, wait_ready

POSTGRES_URL = os.environ.get("QUIRE_SOAK_POSTGRES_URL", "postgresql+psycopg://postgres@127.0.0.1:5432/test")
TOPICS = 4
BATCH = 100
VALUE = "v" * 100
SUBSCRIPTION = "soak"
MAX_IN_FLIGHT = 400  # produce requests; past this the sender waits (and latency shows it)
HTTP_TIMEOUT = httpx.Timeout(30.0, connect=5.0)
QUORUM = {"QUIRE_ENSEMBLE_SIZE": "2", "QUIRE_WRITE_QUORUM": "2", "QUIRE_ACK_QUORUM": "2"}


# --- the cluster ---------------------------------------------------------------------------------


def start_cluster(stack: Stack, bookies: int, brokers: int) -> tuple[dict[str, int], list[str]]:
    """Bookies and brokers; {name: pid} of every process, and the brokers' base URLs."""
    addresses = [stack.bookie() for _ in range(bookies)]
    pids = {f"bookie-{i}": stack.bookies[a].pid for i, a in enumerate(addresses)}
    urls = []
    for i in range(brokers):
        port = free_port()
        env = {
            "QUIRE_DATA_DIR": str(stack.tmp / f"broker-{i}"),
            "QUIRE_BOOKIES": "[" + ", ".join(f'"{a}"' for a in addresses) + "]",
            **QUORUM,
        }
        proc = stack.quire("broker", port, f"broker-{i}", env=env)
        pids[f"broker-{i}"] = proc.pid
        urls.append(f"http://{HOST}:{port}")
    for url in urls:
        wait_ready(url)
    return pids, urls


def rss_kib(pid: int) -> int | None:
    """VmRSS of a process in KiB, None if it is gone."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    except OSError:
        return None
    return None


# --- the load --------------------------------------------------------------------------------------


@dataclass
class Tally:
    started: float
    seconds: float
    latencies: dict[int, list[float]] = field(default_factory=dict)  # minute -> seconds
    errors: dict[int, Counter[str]] = field(default_factory=dict)
    produced: Counter[int] = field(default_factory=Counter)  # minute -> messages acknowledged
    consumed: Counter[int] = field(default_factory=Counter)  # minute -> messages acked by consumers
    redirects: int = 0

    def minute(self, t: float) -> int:
        return int((t - self.started) // 60)

    def error(self, t: float, what: str) -> None:
        self.errors.setdefault(self.minute(t), Counter())[what] += 1


class Load:
    def __init__(self, urls: list[str], rate: float, seconds: float, pids: dict[str, int]) -> None:
        self.urls = urls
        self.pids = pids
        self.rss: dict[str, dict[str, int | None]] = {}  # when -> process -> KiB
        self.load_average: dict[str, tuple[float, float, float]] = {}  # the machine's, 1/5/15 min
        self.rate = rate
        self.seconds = seconds
        self.topics = [f"public/default/soak-{i}" for i in range(TOPICS)]
        self.owner: dict[str, str] = {}
        self.http = httpx.AsyncClient(timeout=HTTP_TIMEOUT, follow_redirects=True)
        self.tally = Tally(time.monotonic(), seconds)
        self.stop = asyncio.Event()

    async def lookup(self, topic: str) -> str:
        r = await self.http.get(f"{self.urls[0]}/lookup/v2/topic/persistent/{topic}")
        r.raise_for_status()
        self.owner[topic] = str(r.json()["httpUrl"]).rstrip("/")
        return self.owner[topic]

    async def prepare(self) -> None:
        for topic in self.topics:
            base = await self.lookup(topic)
            r = await self.http.put(
                f"{base}/v1/topics/{topic}/subscriptions/{SUBSCRIPTION}",
                json={"initial_position": "earliest", "type": "shared"},
            )
            if r.status_code not in (200, 201):
                raise RuntimeError(f"subscription on {topic}: {r.status_code} {r.text}")

    async def produce(self, topic: str, due: float, seq: int) -> None:
        body = {"messages": [{"key": f"k{(seq + i) % 1000}", "value": VALUE} for i in range(BATCH)]}
        try:
            r = await self.http.post(f"{self.owner[topic]}/v1/topics/{topic}/messages", json=body)
        except httpx.HTTPError as exc:
            self.tally.error(due, type(exc).__name__)
            return
        done = time.monotonic()
        if r.history:  # redirected: the topic moved; ask again next time
            self.tally.redirects += 1
            with contextlib.suppress(httpx.HTTPError):
                await self.lookup(topic)
        if r.status_code != 200:
            self.tally.error(due, f"HTTP {r.status_code}")
            return
        minute = self.tally.minute(due)
        self.tally.latencies.setdefault(minute, []).append(done - due)
        self.tally.produced[minute] += BATCH

    async def send_loop(self) -> None:
        interval = BATCH / self.rate
        in_flight: set[asyncio.Task[None]] = set()
        start = self.tally.started  # minutes count from here
        n = 0
        batches = round(self.seconds / interval)
        while n < batches:
            due = start + n * interval
            delay = due - time.monotonic()
            if delay > 0:
                await asyncio.sleep(delay)
            while len(in_flight) >= MAX_IN_FLIGHT:
                await asyncio.wait(in_flight, return_when=asyncio.FIRST_COMPLETED)
            topic = self.topics[n % len(self.topics)]
            task = asyncio.create_task(self.produce(topic, due, n * BATCH))
            in_flight.add(task)
            task.add_done_callback(in_flight.discard)
            n += 1
        if in_flight:
            await asyncio.wait(in_flight, timeout=60)
        self.stop.set()

    async def consume_loop(self, topic: str) -> None:
        """Receive and ack until the load stops and a long poll comes back empty."""
        while True:
            url = f"{self.owner[topic]}/v1/topics/{topic}/subscriptions/{SUBSCRIPTION}"
            try:
                r = await self.http.get(f"{url}/messages", params={"max_messages": 1000, "wait_ms": 500})
                if r.status_code != 200:
                    self.tally.error(time.monotonic(), f"receive HTTP {r.status_code}")
                    await asyncio.sleep(0.2)
                    continue
                ids = [m["message_id"] for m in r.json()["messages"]]
                if not ids:
                    if self.stop.is_set():
                        return
                    continue
                ack = await self.http.post(f"{url}/ack", json={"message_ids": ids})
                if ack.status_code != 204:
                    self.tally.error(time.monotonic(), f"ack HTTP {ack.status_code}")
                    continue
                self.tally.consumed[self.tally.minute(time.monotonic())] += len(ids)
            except httpx.HTTPError as exc:
                self.tally.error(time.monotonic(), f"consumer {type(exc).__name__}")
                await asyncio.sleep(0.2)

    def take_rss(self, when: str) -> None:
        self.rss[when] = {name: rss_kib(pid) for name, pid in self.pids.items()}

    async def rss_after_a_minute(self) -> None:
        await asyncio.sleep(min(60.0, self.seconds / 2))
        self.take_rss("1 min")

    async def run(self) -> None:
        await self.prepare()
        self.take_rss("start")
        self.load_average["start"] = os.getloadavg()
        self.tally = Tally(time.monotonic(), self.seconds)
        consumers = [asyncio.create_task(self.consume_loop(t)) for t in self.topics]
        warm = asyncio.create_task(self.rss_after_a_minute())
        await self.send_loop()
        self.take_rss("end")
        self.load_average["end"] = os.getloadavg()
        warm.cancel()
        await asyncio.wait(consumers, timeout=60)
        for c in consumers:
            c.cancel()
        await self.http.aclose()


# --- report ----------------------------------------------------------------------------------------


def report(tally: Tally, rss: dict[str, dict[str, int | None]]) -> None:
    whens = list(rss)
    print("\nRSS (VmRSS of /proc/<pid>/status, MiB); start = before the load, end = when it stopped")
    print(f"{'process':<10} " + " ".join(f"{w:>8}" for w in whens) + f" {'end-start':>10}")
    for name in rss["start"]:
        values = [rss[w].get(name) for w in whens]
        cells = " ".join(f"{'gone':>8}" if v is None else f"{v / 1024:>8.1f}" for v in values)
        first, last = values[0], values[-1]
        change = (
            f"{(last - first) / 1024:>+10.1f}" if first is not None and last is not None else f"{'-':>10}"
        )
        print(f"{name:<10} {cells} {change}")
    print("\nProduce latency per minute (from when each batch was due; ms)")
    print(
        f"{'minute':>6} {'batches':>8} {'msgs/s':>8} {'p50':>8} {'p99':>8} {'max':>8} "
        f"{'consumed/s':>10} {'errors':>7}"
    )
    minutes = sorted(set(tally.latencies) | set(tally.errors))
    for m in minutes:
        lat = tally.latencies.get(m, [])
        span = max(1.0, min(60.0, tally.seconds - m * 60))  # the last minute may be short
        errors = sum(tally.errors.get(m, Counter()).values())
        if lat:
            p50, p99, top = (pct(lat, 50) * 1e3, pct(lat, 99) * 1e3, max(lat) * 1e3)
            row = f"{p50:>8.1f} {p99:>8.1f} {top:>8.1f}"
        else:
            row = f"{'-':>8} {'-':>8} {'-':>8}"
        print(
            f"{m + 1:>6} {len(lat):>8} {tally.produced[m] / span:>8.0f} {row} "
            f"{tally.consumed[m] / span:>10.0f} {errors:>7}"
        )
    full = [m for m in minutes if len(tally.latencies.get(m, [])) >= 100]
    if len(full) >= 2:
        p99_first, p99_last = (pct(tally.latencies[m], 99) for m in (full[0], full[-1]))
        which = f"minute {full[-1] + 1} / minute {full[0] + 1}"
        print(f"\np99 last minute / first minute: {p99_last / p99_first:.2f} ({which})")
        all_p99 = [pct(tally.latencies[m], 99) * 1e3 for m in full]
        print(f"p99 over the minutes: median {statistics.median(all_p99):.1f} ms, max {max(all_p99):.1f} ms")
    produced, consumed = sum(tally.produced.values()), sum(tally.consumed.values())
    print(f"messages acknowledged to producers: {produced}, acked by consumers: {consumed}")
    if tally.errors:
        total: Counter[str] = Counter()
        for c in tally.errors.values():
            total.update(c)
        print(f"errors: {dict(total)}")
    print(f"redirects followed: {tally.redirects}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=float(os.environ.get("SOAK_S", 600)))
    parser.add_argument("--rate", type=float, default=2000.0, help="messages per second")
    parser.add_argument("--bookies", type=int, default=3)
    parser.add_argument("--brokers", type=int, default=2)
    args = parser.parse_args()
    url, schema = create_schema(POSTGRES_URL, "soak")
    tmp = Path(tempfile.mkdtemp(prefix="quire-soak-"))
    cluster = f"{args.bookies} bookies, {args.brokers} brokers, PostgreSQL schema {schema}"
    print(
        f"soak: {args.seconds:g} s at {args.rate:g} msgs/s in batches of {BATCH}, {TOPICS} topics, {cluster}"
    )
    print(f"logs in {tmp}")
    try:
        with Stack(tmp, {"QUIRE_DATABASE_URL": url}) as stack:
            pids, urls = start_cluster(stack, args.bookies, args.brokers)
            load = Load(urls, args.rate, args.seconds, pids)
            asyncio.run(load.run())
        report(load.tally, load.rss)
        cores = os.cpu_count()
        for when, (one, five, fifteen) in load.load_average.items():
            print(f"machine load average at the {when}: {one:.1f} {five:.1f} {fifteen:.1f} ({cores} cores)")
    finally:
        drop_schema(POSTGRES_URL, schema)


if __name__ == "__main__":
    main()
