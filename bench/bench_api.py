"""`make bench`: Quire's REST API next to NATS JetStream, Redis Streams and the HTTP ceiling of an
empty FastAPI endpoint, all measured in one run on this machine, printed as one table of ratios.

Quire runs as a real bookie process and a real broker process (one uvicorn worker, SQLite
metadata) on free ports; the compactor is not started (its Spark JVM would take CPU from the
rows). Redis runs as a server of the bench's own with appendonly yes + appendfsync always (the
system one at 6379 keeps nothing on disk). JetStream is the server at 127.0.0.1:4222 with a
file-storage stream (its default sync: fsync every 2 minutes, not per message). Messages are
100 B.

Load generators: HTTP throughput rows (Quire and the ceiling) use wrk (required; `apt-get install
wrk`), one thread, closed loop. The latency rows are open loop: one message per request/publish
at fixed send times, RATE per second; latency counts from the scheduled send time, so a client
that falls behind shows up in the figures instead of hiding (no coordinated omission). The peers
are driven by their Python clients (nats-py, redis-py), as the issue asks.

`python -m bench.bench_api --rows consume,consume_ks --rounds 5` runs only the Quire rows named,
without the peers, rounds in one stack: on a noisy machine compare the ratio of two rows of one
round (printed per round, and their median), never absolute rates of different runs.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable, Collection, Iterator
from pathlib import Path
from typing import Any, TypeVar

import orjson
from fastapi import FastAPI, Request
from starlette.responses import Response

from bench.common import free_port, pct, scraping
from bench.http_load import Connection, run_wrk, wrk_path
from devtools.cluster import LocalCluster
from devtools.procs import Proc, running

DURATION_S = float(os.environ.get("QUIRE_BENCH_DURATION_S", "5"))
CONSUME_MESSAGES = int(os.environ.get("QUIRE_BENCH_CONSUME_MESSAGES", "200000"))
CONNECTIONS = 64  # concurrent clients of the single-message rows
BATCH_CONNECTIONS = 8  # concurrent clients of the batch rows (each with one batch in flight)
RATE = 1_000  # msgs/s for the latency rows
VALUE = "x" * 100
HOST = "127.0.0.1"
TOPIC = "/v1/topics/public/default"

Row = dict[str, float]
T = TypeVar("T")
PHASE_TIMEOUT_S = 300.0


@contextlib.contextmanager
def child(
    args: list[str], port: int, what: str, log: Path, env: dict[str, str] | None = None
) -> Iterator[None]:
    """A process of the bench's own (a peer's server): started in a session of its own, waited
    for on `port`, stopped by process group on the way out."""
    with running(Proc(args, env or {}, log)) as proc:
        proc.wait_port(port, what)
        yield


def batch_body(n: int) -> bytes:
    return orjson.dumps({"messages": [{"value": VALUE}] * n})


# --- the HTTP ceiling: an empty FastAPI endpoint on one uvicorn worker ----------------------------
def ceiling_server(port: int) -> None:
    import uvicorn

    app = FastAPI()

    @app.post("/empty")
    async def empty(request: Request) -> Response:
        await request.body()
        return Response(b'{"results":[]}', media_type="application/json")

    uvicorn.run(app, host=HOST, port=port, loop="uvloop", access_log=False, log_level="warning")


def bounded(coro: Awaitable[T], timeout_s: float, what: str) -> T:
    """Run one phase on uvloop (every client in the bench gets the same loop), bounded in time so
    a stuck peer or server fails the bench with its name instead of hanging it."""
    import uvloop

    async def phase() -> T:
        try:
            return await asyncio.wait_for(coro, timeout_s)
        except TimeoutError:
            raise TimeoutError(f"bench phase {what!r} took over {timeout_s:g} s") from None

    return uvloop.run(phase())


def progress(what: str) -> None:
    print(f"  [{time.strftime('%H:%M:%S')}] {what}", file=sys.stderr, flush=True)


def wrk_rate(port: int, path: str, body: bytes, connections: int) -> float:
    progress(f"wrk {connections} connections, POST {path}")
    r = run_wrk(f"http://{HOST}:{port}{path}", "POST", body, connections, DURATION_S)
    if r.non_2xx or r.socket_errors:
        print(
            f"  warning: {r.non_2xx} error answers, {r.socket_errors} socket errors on {path}",
            file=sys.stderr,
        )
    return r.requests_per_s


# --- latency at a fixed rate (open loop) ---------------------------------------------------------
async def paced(send: Callable[[bytes], Awaitable[None]], recv: Callable[[], Awaitable[list[bytes]]]) -> Row:
    """Send RATE msgs/s, one per call, at fixed times for DURATION_S. Each value carries its
    scheduled send time; the produce latency and the end-to-end latency (to the consumer having
    it in hand) both count from that time."""
    total = int(RATE * DURATION_S)
    produce_ms: list[float] = []
    e2e_ms: list[float] = []
    clock = time.perf_counter

    async def one(due: float) -> None:
        await send(f"{round(due * 1e9):020d}".encode().ljust(100, b"."))
        produce_ms.append((clock() - due) * 1000)

    async def consumer(stop: asyncio.Event) -> None:
        while len(e2e_ms) < total and not stop.is_set():
            for value in await recv():
                e2e_ms.append((clock() - int(value[:20]) / 1e9) * 1000)

    stop = asyncio.Event()
    consuming = asyncio.create_task(consumer(stop))
    start = clock() + 0.05
    tasks, lag_ms = [], 0.0
    for i in range(total):
        due = start + i / RATE
        delay = due - clock()
        if delay > 0:
            await asyncio.sleep(delay)
        lag_ms = max(lag_ms, (clock() - due) * 1000)
        tasks.append(asyncio.create_task(one(due)))
    await asyncio.gather(*tasks)
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(asyncio.shield(consuming), 10)
    stop.set()
    consuming.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await consuming
    return {
        "lat_p50": pct(produce_ms, 50),
        "lat_p99": pct(produce_ms, 99),
        "lat_e2e50": pct(e2e_ms, 50),
        "lat_e2e99": pct(e2e_ms, 99),
        "lat_lost": float(total - len(e2e_ms)),
        "lat_lag": lag_ms,
    }


async def quire_latency(port: int) -> Row:
    topic = f"{TOPIC}/lat"
    free: list[Connection] = []
    sub_conn = await Connection.open(HOST, port)
    await sub_conn.request("PUT", f"{topic}/subscriptions/lat", b'{"initial_position":"latest"}')

    async def send(value: bytes) -> None:
        # Open loop: a new connection when every open one is busy, never a queue in the client.
        c = free.pop() if free else await Connection.open(HOST, port)
        status, _ = await c.request("POST", f"{topic}/messages", b'{"messages":[{"value":"%s"}]}' % value)
        assert status == 200, status
        free.append(c)

    async def recv() -> list[bytes]:
        _, body = await sub_conn.request(
            "GET", f"{topic}/subscriptions/lat/messages?max_messages=1000&wait_ms=200"
        )
        msgs = orjson.loads(body)["messages"]
        if msgs:
            ids = orjson.dumps({"message_ids": [m["message_id"] for m in msgs]})
            await sub_conn.request("POST", f"{topic}/subscriptions/lat/ack", ids)
        return [m["value"].encode() for m in msgs]

    return await paced(send, recv)


# --- Quire consume: pull batches of 1,000 + ack (shared, 1 consumer; key_shared, 4) ---------------
async def quire_consume(port: int, name: str = "drain", kind: str = "shared", consumers: int = 1) -> float:
    """Fill a topic with CONSUME_MESSAGES, then drain it through `consumers` consumers of one
    subscription of type `kind`, each pulling 1,000 on its own connection and acking on another;
    msg/s over all of them. The ack of a batch overlaps the pull of the next, as a JetStream pull
    consumer's acks do (publishes it does not wait on): at most one ack in flight per consumer.
    key_shared: messages carry 64 keys, and every consumer joins before the first message."""
    topic = f"{TOPIC}/{name}"
    setup = await Connection.open(HOST, port)
    await setup.request(
        "PUT", f"{topic}/subscriptions/d", orjson.dumps({"initial_position": "earliest", "type": kind})
    )
    ids = [f"c{i}" for i in range(consumers)]
    for consumer_id in ids:
        status, _ = await setup.request("GET", f"{topic}/subscriptions/d/messages?consumer_id={consumer_id}")
        assert status == 200, status
    keyed = kind == "key_shared"
    body = orjson.dumps(
        {"messages": [{"key": f"key-{i % 64}" if keyed else None, "value": VALUE} for i in range(1000)]}
    )
    producers = [await Connection.open(HOST, port) for _ in range(4)]

    async def fill(p: Connection, n: int) -> None:
        for _ in range(n):
            await p.request("POST", f"{topic}/messages", body)

    await asyncio.gather(*(fill(p, CONSUME_MESSAGES // 4000) for p in producers))
    setup.close()  # fresh connections below: uvicorn closes one idle past its keep-alive timeout
    got = 0
    progress_at = time.perf_counter()
    done = asyncio.Event()

    async def consume(consumer_id: str) -> None:
        nonlocal got, progress_at
        c, acker = await Connection.open(HOST, port), await Connection.open(HOST, port)
        acking: asyncio.Task[tuple[int, bytes]] | None = None
        path = f"{topic}/subscriptions/d/messages?max_messages=1000&wait_ms=200&consumer_id={consumer_id}"
        while not done.is_set():
            _, raw = await c.request("GET", path)
            msgs = orjson.loads(raw)["messages"]
            got += len(msgs)
            now = time.perf_counter()
            if msgs:
                progress_at = now
            if got >= CONSUME_MESSAGES or now - progress_at > 2.0:  # all, or nothing more comes
                done.set()
            if acking is not None:
                status, _ = await acking
                assert status == 204, status
                acking = None
            if msgs:
                ack = orjson.dumps({"message_ids": [m["message_id"] for m in msgs]})
                acking = asyncio.create_task(acker.request("POST", f"{topic}/subscriptions/d/ack", ack))
        if acking is not None:
            status, _ = await acking
            assert status == 204, status

    started = time.perf_counter()
    await asyncio.gather(*(consume(consumer_id) for consumer_id in ids))
    return got / (time.perf_counter() - started)


def quire_rows(port: int, tag: str = "") -> dict[str, Callable[[], Row]]:
    """Quire's rows by name, each measured when called; `tag` names the topics of one round."""

    def rate(topic: str, batch: int, connections: int) -> float:
        return batch * wrk_rate(port, f"{TOPIC}/{topic}{tag}/messages", batch_body(batch), connections)

    def consume(name: str, kind: str = "shared", consumers: int = 1) -> float:
        return bounded(quire_consume(port, name + tag, kind, consumers), PHASE_TIMEOUT_S, f"quire {name}")

    return {
        "single": lambda: {"single": rate("single", 1, CONNECTIONS)},
        "batch100": lambda: {"batch100": rate("b100", 100, BATCH_CONNECTIONS)},
        "batch1000": lambda: {"batch1000": rate("b1000", 1000, BATCH_CONNECTIONS)},
        "latency": lambda: bounded(quire_latency(port), PHASE_TIMEOUT_S, "quire latency"),
        "consume": lambda: {"consume": consume("drain")},
        "consume_ks": lambda: {"consume_ks": consume("drain-ks", "key_shared", consumers=4)},
    }


def measure_quire(port: int, tag: str = "", rows: Collection[str] | None = None) -> Row:
    out: Row = {}
    for name, measure in quire_rows(port, tag).items():
        if rows is None or name in rows:
            progress(f"quire {name}{tag}")
            out.update(measure())
    return out


def measure_ceiling(port: int) -> Row:
    return {"single": wrk_rate(port, "/empty", batch_body(1), CONNECTIONS)}


# --- NATS JetStream (the server at 4222, file storage, default sync) ----------------------------
async def jetstream() -> Row:
    import nats
    from nats.js.api import StorageType

    nc = await nats.connect(f"nats://{HOST}:4222")
    js = nc.jetstream()
    stream = f"QUIREBENCH{os.getpid()}"
    subject = f"quirebench{os.getpid()}"
    with contextlib.suppress(Exception):
        await js.delete_stream(stream)
    await js.add_stream(name=stream, subjects=[f"{subject}.>"], storage=StorageType.FILE)
    payload = VALUE.encode()
    out: Row = {}
    try:
        out["single"] = await _concurrent(CONNECTIONS, lambda: js.publish(f"{subject}.one", payload))
        for window in (100, 1000):
            n, started = 0, time.perf_counter()
            while time.perf_counter() - started < DURATION_S:
                await asyncio.gather(*[js.publish(f"{subject}.win", payload) for _ in range(window)])
                n += window
            out[f"batch{window}"] = n / (time.perf_counter() - started)
        out["consume"] = await _jetstream_consume(js, subject)
        out.update(await _jetstream_latency(js, subject))
    finally:
        with contextlib.suppress(Exception):
            await js.delete_stream(stream)
        await nc.close()
    return out


async def _concurrent(clients: int, call: Callable[[], Awaitable[object]]) -> float:
    """Closed loop: `clients` coroutines, each awaiting one call's answer before the next."""
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


async def _jetstream_consume(js: object, subject: str) -> float:
    payload = VALUE.encode()
    for _ in range(CONSUME_MESSAGES // 1000):
        await asyncio.gather(*[js.publish(f"{subject}.drain", payload) for _ in range(1000)])  # type: ignore[attr-defined]
    sub = await js.pull_subscribe(f"{subject}.drain", durable="drain")  # type: ignore[attr-defined]
    got, started = 0, time.perf_counter()
    while got < CONSUME_MESSAGES:
        msgs = await sub.fetch(1000, timeout=5)
        for m in msgs:
            await m.ack()
        got += len(msgs)
    return got / (time.perf_counter() - started)


async def _jetstream_latency(js: object, subject: str) -> Row:
    sub = await js.pull_subscribe(f"{subject}.lat", durable="lat")  # type: ignore[attr-defined]

    async def send(value: bytes) -> None:
        await js.publish(f"{subject}.lat", value)  # type: ignore[attr-defined]

    async def recv() -> list[bytes]:
        try:
            msgs = await sub.fetch(1000, timeout=0.2)
        except Exception:  # nats raises TimeoutError subclasses of its own on an empty fetch
            return []
        for m in msgs:
            await m.ack()
        return [m.data for m in msgs]

    return await paced(send, recv)


# --- Redis Streams (a server of our own, appendfsync always) ---------------------------------------
async def redis_streams(port: int) -> Row:
    import redis.asyncio as aioredis

    # A blocking pool: a burst of paced sends waits for a free connection (redis-py 6+ raises
    # MaxConnectionsError from a plain pool instead), so the row measures Redis, not the pool size.
    pool = aioredis.BlockingConnectionPool(
        host=HOST, port=port, max_connections=CONNECTIONS + 8, timeout=None
    )
    r = aioredis.Redis(connection_pool=pool)
    payload = VALUE.encode()
    out: Row = {"single": await _concurrent(CONNECTIONS, lambda: r.xadd("one", {"v": payload}))}
    for size in (100, 1000):
        n, started = 0, time.perf_counter()
        while time.perf_counter() - started < DURATION_S:
            pipe = r.pipeline(transaction=False)
            for _ in range(size):
                pipe.xadd(f"b{size}", {"v": payload})
            await pipe.execute()
            n += size
        out[f"batch{size}"] = n / (time.perf_counter() - started)
    out["consume"] = await _redis_consume(r)
    await r.xgroup_create("lat", "g", id="$", mkstream=True)
    rr = aioredis.Redis(host=HOST, port=port)

    async def send(value: bytes) -> None:
        await r.xadd("lat", {"v": value})

    async def recv() -> list[bytes]:
        res: Any = await rr.xreadgroup("g", "c", {"lat": ">"}, count=1000, block=200)
        entries = [(i, f[b"v"]) for _, es in res for i, f in es]
        if entries:
            await rr.xack("lat", "g", *[i for i, _ in entries])
        return [v for _, v in entries]

    out.update(await paced(send, recv))
    await r.aclose()
    await rr.aclose()
    return out


async def _redis_consume(r: object) -> float:
    payload = VALUE.encode()
    for _ in range(CONSUME_MESSAGES // 1000):
        pipe = r.pipeline(transaction=False)  # type: ignore[attr-defined]
        for _ in range(1000):
            pipe.xadd("drain", {"v": payload})
        await pipe.execute()
    await r.xgroup_create("drain", "g", id="0")  # type: ignore[attr-defined]
    got, started = 0, time.perf_counter()
    while got < CONSUME_MESSAGES:
        res = await r.xreadgroup("g", "c", {"drain": ">"}, count=1000, block=1000)  # type: ignore[attr-defined]
        ids = [i for _, entries in res for i, _ in entries]
        if not ids:
            break
        await r.xack("drain", "g", *ids)  # type: ignore[attr-defined]
        got += len(ids)
    return got / (time.perf_counter() - started)


# --- the run -------------------------------------------------------------------------------------
@contextlib.contextmanager
def quire_stack(tmp: Path, extra_env: dict[str, str] | None = None) -> Iterator[int]:
    """A bookie and a broker process on free ports over one SQLite store (a local cluster,
    stopped on exit); yields the HTTP port. `extra_env` goes to both (bench_auth runs two stacks
    at once, so neither has a Kafka listener unless `extra_env` gives it a port)."""
    with LocalCluster(
        tmp / "quire", env={"QUIRE_KAFKA_PORT": "0", "QUIRE_PULSAR_PORT": "0", **(extra_env or {})}
    ) as cluster:
        cluster.bookie()
        broker = cluster.broker()
        with scraping(f"{broker.url}/metrics", SCRAPE_INTERVAL_S, SCRAPES):
            yield broker.port


SCRAPE_INTERVAL_S = 1.0
SCRAPES: dict[str, int] = {"count": 0, "series": 0}


def main() -> None:
    if wrk_path() is None:
        sys.exit("make bench needs wrk (the HTTP load generator): apt-get install wrk")
    tmp = Path(tempfile.mkdtemp(prefix="quire-bench-"))
    py = sys.executable
    c_port, r_port = free_port(), free_port()
    redis_args = ["redis-server", "--port", str(r_port), "--bind", HOST, "--dir", str(tmp), "--save", "",
                  "--appendonly", "yes", "--appendfsync", "always"]  # fmt: skip
    try:
        with child(
            [py, "-m", "bench.bench_api", "--ceiling", str(c_port)], c_port, "ceiling", tmp / "ceil.log"
        ):
            ceiling = measure_ceiling(c_port)
        with quire_stack(tmp) as port:
            quire = measure_quire(port)
        with child(redis_args, r_port, "redis-server", tmp / "redis.log"):
            progress("redis streams")
            redis = bounded(redis_streams(r_port), PHASE_TIMEOUT_S, "redis streams")
        progress("jetstream")
        nats = bounded(jetstream(), PHASE_TIMEOUT_S, "jetstream")
        print_table(quire, nats, redis, ceiling)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def print_table(q: Row, n: Row, r: Row, c: Row) -> None:
    def ratio(a: float, b: float) -> str:
        return f"{a / b:.2f}x" if b else "-"

    print(f"\nQuire REST API vs peers ({DURATION_S:g} s per row, 100 B messages, one run, this machine)")
    print("  Quire: bookie fsyncs every group of adds before the ack (1 bookie, 1 broker worker)")
    print("  JetStream: file storage, default sync (fsync every 2 min, NOT per message)")
    print("  Redis: own server, appendonly yes, appendfsync always (fsync per event-loop write)")
    print("  ceiling: empty FastAPI endpoint, 1 uvicorn worker")
    print(
        f"  Quire's /metrics scraped every {SCRAPE_INTERVAL_S:g} s during its rows:"
        f" {SCRAPES['count']} scrapes, {SCRAPES['series']} topic-labelled samples in the last"
    )
    print(
        f"  HTTP rows (Quire, ceiling): wrk, 1 thread, closed loop; batches: {BATCH_CONNECTIONS} connections"
    )
    print(f"  peers: their Python clients; single row {CONNECTIONS} concurrent publishers awaiting each ack")
    print("    (JetStream: 64 coroutines on one NATS connection; Redis: 64 connections)")
    print("  JetStream batch rows: windows of 100 / 1,000 async publishes; Redis: pipelines of 100 / 1,000")
    print("  consume: Quire acks batch N (own connection) while pulling N+1; JetStream acks without waiting;")
    print("    Redis: XREADGROUP then XACK, one after the other\n")
    head = f"{'row':<40}{'Quire':>11}{'JetStream':>11}{'Redis':>11}{'ceiling':>11}"
    head += f"{'vs JS':>8}{'vs Redis':>9}{'vs ceil':>8}"
    print(head)
    print("-" * len(head))
    rows = [
        (f"produce 1 msg/req, {CONNECTIONS} clients (msg/s)", "single"),
        ("produce batches of 100 (msg/s)", "batch100"),
        ("produce batches of 1,000 (msg/s)", "batch1000"),
        ("consume pull 1,000 + ack (msg/s)", "consume"),
    ]
    for label, key in rows:
        cv = c.get(key, 0.0)
        print(
            f"{label:<40}{q[key]:>11,.0f}{n[key]:>11,.0f}{r[key]:>11,.0f}{(f'{cv:,.0f}' if cv else '-'):>11}"
            f"{ratio(q[key], n[key]):>8}{ratio(q[key], r[key]):>9}{(ratio(q[key], cv) if cv else '-'):>8}"
        )
    ks, shared = q.get("consume_ks", 0.0), q["consume"]
    print(
        f"{'consume key_shared, 4 consumers (msg/s)':<40}{ks:>11,.0f}{'-':>11}{'-':>11}{'-':>11}"
        f"{ratio(ks, n['consume']):>8}{ratio(ks, r['consume']):>9}{'-':>8}"
        f"   {ratio(ks, shared)} the consume row"
    )
    latency_rows = (
        (f"produce latency p50 @{RATE:,}/s (ms)", "lat_p50"),
        (f"produce latency p99 @{RATE:,}/s (ms)", "lat_p99"),
        (f"end-to-end p50 @{RATE:,}/s (ms)", "lat_e2e50"),
        (f"end-to-end p99 @{RATE:,}/s (ms)", "lat_e2e99"),
        ("  latency rows: sender lag max (ms)", "lat_lag"),
        ("  latency rows: messages not received", "lat_lost"),
    )
    for label, key in latency_rows:
        print(f"{label:<40}{q[key]:>11.2f}{n[key]:>11.2f}{r[key]:>11.2f}{'-':>11}")
    print(
        "\nbars (issue 4): batched produce >= 4x JetStream windowed and >= 2x Redis pipelined; consume >= 3x"
        " JetStream and >= 1.5x Redis; 1 msg/req >= 0.5x ceiling; p99 produce < 10 ms at 1k msg/s;"
        " key_shared (4 consumers) >= 0.7x the consume row (issue 14)"
    )


def main_rows(rows: list[str], rounds: int) -> None:
    """`--rows`: these Quire rows, `rounds` times in one stack; key_shared/shared per round."""
    ratios = []
    with (
        tempfile.TemporaryDirectory(prefix="quire-bench-", ignore_cleanup_errors=True) as tmp,
        quire_stack(Path(tmp)) as port,
    ):
        for i in range(rounds):
            row = measure_quire(port, f"-r{i}", rows)
            print(f"round {i + 1}: " + ", ".join(f"{k} {v:,.2f}" for k, v in row.items()), flush=True)
            if "consume" in row and "consume_ks" in row:
                ratios.append(row["consume_ks"] / row["consume"])
    if ratios:
        print("key_shared / shared consume per round:", *(f"{x:.2f}" for x in ratios), end="; ")
        print(f"median {statistics.median(ratios):.2f}")


def parse_args() -> argparse.Namespace:
    rows = tuple(quire_rows(0))  # the names only: nothing is measured until a row is called
    parser = argparse.ArgumentParser(description="make bench: Quire's REST API next to its peers")
    parser.add_argument("--ceiling", type=int, help=argparse.SUPPRESS)  # the ceiling's own process
    parser.add_argument("--rows", type=lambda text: text.split(","), help=f"only: {','.join(rows)}")
    parser.add_argument("--rounds", type=int, default=1, help="with --rows: rounds in one stack")
    args = parser.parse_args()
    if args.rows and not set(args.rows) <= set(rows):
        parser.error(f"unknown rows in {','.join(args.rows)}; known: {','.join(rows)}")
    return args


if __name__ == "__main__":
    cli = parse_args()
    if cli.ceiling is not None:
        ceiling_server(cli.ceiling)
    elif cli.rows is not None:
        main_rows(cli.rows, cli.rounds)
    else:
        main()
