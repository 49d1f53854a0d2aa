"""`make bench`: Quire's REST API next to NATS JetStream, Redis Streams and the HTTP ceiling of an
empty FastAPI endpoint, all measured in one run on this machine, printed as one table of ratios.

Quire runs as a real standalone stack (bookie + broker processes, SQLite) on free ports. Redis
runs as a server of the bench's own with appendonly yes + appendfsync always (the system one at
6379 keeps nothing on disk). JetStream is the server at 127.0.0.1:4222 with a file-storage stream
(its default sync: fsync every 2 minutes, not per message). Messages are 100 B.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path

import orjson
from fastapi import FastAPI, Request
from starlette.responses import Response

from bench.http_load import Connection, Job, run_closed_loop

DURATION_S = float(os.environ.get("QUIRE_BENCH_DURATION_S", "3"))
CONSUME_MESSAGES = int(os.environ.get("QUIRE_BENCH_CONSUME_MESSAGES", "200000"))
RATE = 1_000  # msgs/s for the latency rows
VALUE = "x" * 100
HOST = "127.0.0.1"
TOPIC = "/v1/topics/public/default"
REPO = Path(__file__).resolve().parent.parent


def free_port() -> int:
    with socket.socket() as s:
        s.bind((HOST, 0))
        return int(s.getsockname()[1])


def wait_port(port: int, proc: subprocess.Popen[bytes], what: str, timeout_s: float = 90) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"{what} exited with {proc.returncode}")
        with contextlib.suppress(OSError), socket.create_connection((HOST, port), timeout=0.2):
            return
        time.sleep(0.1)
    raise TimeoutError(f"{what} did not listen on {port}")


@contextlib.contextmanager
def child(args: list[str], port: int, what: str, log: Path) -> Iterator[None]:
    with open(log, "ab") as out:
        proc = subprocess.Popen(args, cwd=REPO, stdout=out, stderr=subprocess.STDOUT)
        try:
            wait_port(port, proc, what)
            yield
        finally:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


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


# --- closed-loop produce over HTTP -------------------------------------------------------------
def http_rate(port: int, path: str, body: bytes, connections: int, processes: int) -> float:
    rate, errors = run_closed_loop(Job(HOST, port, "POST", path, body, connections, DURATION_S), processes)
    if errors:
        print(f"  warning: {errors} error responses on {path}", file=sys.stderr)
    return rate


# --- latency at a fixed rate -------------------------------------------------------------------
async def paced(
    send: Callable[[bytes], Awaitable[None]], recv: Callable[[], Awaitable[list[bytes]]]
) -> dict[str, float]:
    """Send RATE msgs/s for DURATION_S (each value carries its send time); measure the produce
    call's latency and the end-to-end latency (send to receive)."""
    produce_ms: list[float] = []
    e2e_ms: list[float] = []
    total = int(RATE * DURATION_S)
    done = asyncio.Event()

    async def one(i: int) -> None:
        started = time.perf_counter()
        await send(f"{time.perf_counter_ns():020d}".encode().ljust(100, b"."))
        produce_ms.append((time.perf_counter() - started) * 1000)

    async def consumer() -> None:
        while len(e2e_ms) < total and not done.is_set():
            for value in await recv():
                e2e_ms.append((time.perf_counter_ns() - int(value[:20])) / 1e6)

    consuming = asyncio.create_task(consumer())
    start = time.perf_counter()
    tasks = []
    for i in range(total):
        await asyncio.sleep(max(0.0, start + i / RATE - time.perf_counter()))
        tasks.append(asyncio.create_task(one(i)))
    await asyncio.gather(*tasks)
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(asyncio.shield(consuming), 10)
    done.set()
    consuming.cancel()

    def pct(xs: list[float], q: float) -> float:
        return statistics.quantiles(xs, n=100)[q - 1] if len(xs) > 2 else float("nan")  # type: ignore[index]

    return {
        "p50": pct(produce_ms, 50),
        "p99": pct(produce_ms, 99),
        "e2e50": pct(e2e_ms, 50),
        "e2e99": pct(e2e_ms, 99),
    }


async def quire_latency(port: int) -> dict[str, float]:
    topic = f"{TOPIC}/lat"
    conns = [await Connection.open(HOST, port) for _ in range(16)]
    free: asyncio.Queue[Connection] = asyncio.Queue()
    for c in conns:
        free.put_nowait(c)
    sub_conn = await Connection.open(HOST, port)
    await sub_conn.request("PUT", f"{topic}/subscriptions/lat", b'{"initial_position":"latest"}')

    async def send(value: bytes) -> None:
        c = await free.get()
        await c.request("POST", f"{topic}/messages", orjson.dumps({"messages": [{"value": value.decode()}]}))
        free.put_nowait(c)

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


# --- Quire consume: pull batches of 1,000 + ack --------------------------------------------------
async def quire_consume(port: int) -> float:
    topic = f"{TOPIC}/drain"
    c = await Connection.open(HOST, port)
    await c.request("PUT", f"{topic}/subscriptions/d", b'{"initial_position":"earliest"}')
    body = batch_body(1000)
    producers = [await Connection.open(HOST, port) for _ in range(4)]

    async def fill(p: Connection, n: int) -> None:
        for _ in range(n):
            await p.request("POST", f"{topic}/messages", body)

    await asyncio.gather(*(fill(p, CONSUME_MESSAGES // 4000) for p in producers))
    # A fresh connection: uvicorn closes one idle past its keep-alive timeout during the fill.
    c.close()
    c = await Connection.open(HOST, port)
    got = 0
    started = time.perf_counter()
    while got < CONSUME_MESSAGES:
        _, raw = await c.request("GET", f"{topic}/subscriptions/d/messages?max_messages=1000&wait_ms=1000")
        msgs = orjson.loads(raw)["messages"]
        if not msgs:
            break
        got += len(msgs)
        await c.request(
            "POST",
            f"{topic}/subscriptions/d/ack",
            orjson.dumps({"message_ids": [m["message_id"] for m in msgs]}),
        )
    return got / (time.perf_counter() - started)


# --- NATS JetStream ------------------------------------------------------------------------------
async def jetstream() -> dict[str, float]:
    import nats
    from nats.js.api import StorageType

    nc = await nats.connect(f"nats://{HOST}:4222")
    js = nc.jetstream()
    with contextlib.suppress(Exception):
        await js.delete_stream("QUIREBENCH")
    await js.add_stream(name="QUIREBENCH", subjects=["quirebench.>"], storage=StorageType.FILE)
    payload = VALUE.encode()
    out: dict[str, float] = {}
    try:
        n, deadline = 0, time.perf_counter() + DURATION_S
        while time.perf_counter() < deadline:
            await js.publish("quirebench.one", payload)
            n += 1
        out["single"] = n / DURATION_S
        for window in (100, 1000):
            n, started = 0, time.perf_counter()
            while time.perf_counter() - started < DURATION_S:
                await asyncio.gather(*[js.publish("quirebench.win", payload) for _ in range(window)])
                n += window
            out[f"batch{window}"] = n / (time.perf_counter() - started)
        out.update(await jetstream_consume(js))
        out.update(await jetstream_latency(js))
    finally:
        with contextlib.suppress(Exception):
            await js.delete_stream("QUIREBENCH")
        await nc.close()
    return out


async def jetstream_consume(js: object) -> dict[str, float]:
    payload = VALUE.encode()
    for _ in range(CONSUME_MESSAGES // 1000):
        await asyncio.gather(*[js.publish("quirebench.drain", payload) for _ in range(1000)])  # type: ignore[attr-defined]
    sub = await js.pull_subscribe("quirebench.drain", durable="drain")  # type: ignore[attr-defined]
    got, started = 0, time.perf_counter()
    while got < CONSUME_MESSAGES:
        msgs = await sub.fetch(1000, timeout=5)
        for m in msgs:
            await m.ack()
        got += len(msgs)
    return {"consume": got / (time.perf_counter() - started)}


async def jetstream_latency(js: object) -> dict[str, float]:
    sub = await js.pull_subscribe("quirebench.lat", durable="lat")  # type: ignore[attr-defined]

    async def send(value: bytes) -> None:
        await js.publish("quirebench.lat", value)  # type: ignore[attr-defined]

    async def recv() -> list[bytes]:
        try:
            msgs = await sub.fetch(1000, timeout=0.2)
        except Exception:  # nats raises TimeoutError subclasses of its own on an empty fetch
            return []
        for m in msgs:
            await m.ack()
        return [m.data for m in msgs]

    r = await paced(send, recv)
    return {f"lat_{k}": v for k, v in r.items()}


# --- Redis Streams (a server of our own, appendfsync always) ---------------------------------------
async def redis_streams(port: int) -> dict[str, float]:
    import redis.asyncio as aioredis

    r = aioredis.Redis(host=HOST, port=port)
    payload = VALUE.encode()
    out: dict[str, float] = {}
    n, deadline = 0, time.perf_counter() + DURATION_S
    while time.perf_counter() < deadline:
        await r.xadd("one", {"v": payload})
        n += 1
    out["single"] = n / DURATION_S
    for size in (100, 1000):
        n, started = 0, time.perf_counter()
        while time.perf_counter() - started < DURATION_S:
            pipe = r.pipeline(transaction=False)
            for _ in range(size):
                pipe.xadd(f"b{size}", {"v": payload})
            await pipe.execute()
            n += size
        out[f"batch{size}"] = n / (time.perf_counter() - started)
    for _ in range(CONSUME_MESSAGES // 1000):
        pipe = r.pipeline(transaction=False)
        for _ in range(1000):
            pipe.xadd("drain", {"v": payload})
        await pipe.execute()
    await r.xgroup_create("drain", "g", id="0")
    got, started = 0, time.perf_counter()
    while got < CONSUME_MESSAGES:
        res = await r.xreadgroup("g", "c", {"drain": ">"}, count=1000)
        ids = [i for _, entries in res for i, _ in entries]
        await r.xack("drain", "g", *ids)
        got += len(ids)
    out["consume"] = got / (time.perf_counter() - started)
    await r.xgroup_create("lat", "g", id="$", mkstream=True)

    async def send(value: bytes) -> None:
        await r.xadd("lat", {"v": value})

    rr = aioredis.Redis(host=HOST, port=port)

    async def recv() -> list[bytes]:
        res = await rr.xreadgroup("g", "c", {"lat": ">"}, count=1000, block=200)
        entries = [(i, f[b"v"]) for _, es in res for i, f in es]
        if entries:
            await rr.xack("lat", "g", *[i for i, _ in entries])
        return [v for _, v in entries]

    out.update({f"lat_{k}": v for k, v in (await paced(send, recv)).items()})
    await r.aclose()
    await rr.aclose()
    return out


# --- the run -------------------------------------------------------------------------------------
def measure_quire(port: int) -> dict[str, float]:
    out = {
        "single": http_rate(port, f"{TOPIC}/single/messages", batch_body(1), 32, 2),
        "batch100": 100 * http_rate(port, f"{TOPIC}/b100/messages", batch_body(100), 4, 2),
        "batch1000": 1000 * http_rate(port, f"{TOPIC}/b1000/messages", batch_body(1000), 2, 2),
    }
    lat = asyncio.run(quire_latency(port))
    out.update({f"lat_{k}": v for k, v in lat.items()})
    out["consume"] = asyncio.run(quire_consume(port))
    return out


def measure_ceiling(port: int) -> dict[str, float]:
    return {
        "single": http_rate(port, "/empty", batch_body(1), 32, 2),
        "batch1000": 1000 * http_rate(port, "/empty", batch_body(1000), 2, 2),
    }


def main() -> None:
    tmp = Path(tempfile.mkdtemp(prefix="quire-bench-"))
    py = sys.executable
    q_port, b_port, c_port, r_port = free_port(), free_port(), free_port(), free_port()
    quire_args = [py, "-m", "app.cli", "standalone", "--data-dir", str(tmp / "quire"), "--port", str(q_port),
                  "--bookie-port", str(b_port)]  # fmt: skip
    redis_args = ["redis-server", "--port", str(r_port), "--bind", HOST, "--dir", str(tmp), "--save", "",
                  "--appendonly", "yes", "--appendfsync", "always"]  # fmt: skip
    try:
        with child(
            [py, "-m", "bench.bench_api", "--ceiling", str(c_port)], c_port, "ceiling", tmp / "ceiling.log"
        ):
            ceiling = measure_ceiling(c_port)
        with child(quire_args, q_port, "quire standalone", tmp / "quire.log"):
            wait_ready(q_port)
            quire = measure_quire(q_port)
        with child(redis_args, r_port, "redis-server", tmp / "redis.log"):
            redis = asyncio.run(redis_streams(r_port))
        nats = asyncio.run(jetstream())
        print_table(quire, nats, redis, ceiling)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def wait_ready(port: int) -> None:
    import httpx

    deadline = time.monotonic() + 90
    while time.monotonic() < deadline:
        with contextlib.suppress(httpx.HTTPError):
            if httpx.get(f"http://{HOST}:{port}/readyz").status_code == 200:
                return
        time.sleep(0.2)
    raise TimeoutError("quire not ready")


def print_table(q: dict[str, float], n: dict[str, float], r: dict[str, float], c: dict[str, float]) -> None:
    def ratio(a: float, b: float) -> str:
        return f"{a / b:.2f}x" if b else "-"

    print(f"\nQuire REST API vs peers ({DURATION_S:.0f} s per row, 100 B messages, one run, this machine)")
    print("  JetStream: file storage, default sync (fsync every 2 min)")
    print("  Redis: own server, appendonly yes, appendfsync always")
    print("  Quire: bookie fsyncs every group of adds before the ack")
    print("  ceiling: empty FastAPI endpoint, 1 uvicorn worker, same load generator\n")
    head = f"{'row':<38}{'Quire':>12}{'JetStream':>12}{'Redis':>12}{'ceiling':>12}"
    head += f"{'vs JS':>8}{'vs Redis':>9}{'vs ceil':>8}"
    print(head)
    print("-" * len(head))
    rows = [
        ("produce 1 msg/req, 64 clients (msg/s)", "single", True),
        ("produce batches of 100 (msg/s)", "batch100", False),
        ("produce batches of 1,000 (msg/s)", "batch1000", True),
        ("consume pull 1,000 + ack (msg/s)", "consume", False),
    ]
    for label, key, has_ceiling in rows:
        cv = c.get(key, 0.0) if has_ceiling else 0.0
        print(
            f"{label:<38}{q[key]:>12,.0f}{n[key]:>12,.0f}{r[key]:>12,.0f}{(f'{cv:,.0f}' if cv else '-'):>12}"
            f"{ratio(q[key], n[key]):>8}{ratio(q[key], r[key]):>9}{(ratio(q[key], cv) if cv else '-'):>8}"
        )
    latency_rows = (
        ("produce latency p50 @1k msg/s (ms)", "lat_p50"),
        ("produce latency p99 @1k msg/s (ms)", "lat_p99"),
        ("end-to-end p50 @1k msg/s (ms)", "lat_e2e50"),
        ("end-to-end p99 @1k msg/s (ms)", "lat_e2e99"),
    )
    for label, key in latency_rows:
        print(f"{label:<38}{q[key]:>12.2f}{n[key]:>12.2f}{r[key]:>12.2f}{'-':>12}")
    print(
        "\nbars (issue 4): batched produce >= 4x JetStream windowed and >= 2x Redis pipelined; consume >= 3x"
        " JetStream and >= 1.5x Redis; 1 msg/req >= 0.5x ceiling; p99 produce < 10 ms at 1k msg/s"
    )
    single = f"{n['single']:,.0f} / {r['single']:,.0f}"
    print(f"row 1 peers: one publish per round trip from 1 client (JetStream / Redis): {single} msg/s")


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "--ceiling":
        ceiling_server(int(sys.argv[2]))
    else:
        main()
