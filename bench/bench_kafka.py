"""`make bench-kafka`: Quire's Kafka listener driven by confluent-kafka (librdkafka), the same
messages through Quire's REST batches, and NATS JetStream as the peer, all in one run.

Quire runs as bench_api's stack (a real bookie process and a real broker process, one uvicorn
worker, SQLite metadata, /metrics scraped every second) with the Kafka listener on a free port.
JetStream is the server at 127.0.0.1:4222, a file-storage stream (its default sync: fsync every
2 minutes, not per message; Quire's bookie fsyncs before every ack). Messages are 100 B.

Each round writes N messages to new topics and reads them back, row by row:

- kafka produce: confluent_kafka.Producer, acks=all, linger.ms=5, batch.size 1 MB, no
  compression, idempotence off (and a second row with it on); every message's delivery report
  is counted, flush() ends the row;
- kafka consume: confluent_kafka.Consumer assigned partition 0 from offset 0 (no group join, no
  commits), fetch.min.bytes 1 MB, fetch.max.bytes 64 MB; the row ends at the N-th message;
- REST produce: batches of 1,000 (bench_api's batch body) on 8 connections, each awaiting its
  answer before sending the next;
- REST consume: a shared subscription from the earliest message, pulls of 1,000 on one
  connection, each batch acked on a second connection while the next is pulled (bench_api's
  consume loop);
- JetStream publish: windows of 1,000 async publishes (bench_api's windowed rows);
- JetStream consume: a pull consumer, fetches of 1,000, ack policy none (as the Kafka consumer
  commits nothing);
- client ceiling: the two Kafka rows again against bench.kafka_ceiling, the listener's wire
  server with handlers that store nothing: what the clients themselves reach on this machine.

Each row also counts the CPU time (user + system) of the broker, the bookie and this process
(the clients, librdkafka's threads included) per message: on a machine shared with other work
the rates move with its load, the CPU per message much less.

Every row is the median of R rounds (--rounds, default 3) of N messages (--messages, default
1,000,000: JetStream's Python client publishes only some thousands a second here, so its rows
take minutes); ratios are of those medians. The table is printed as markdown, and the rows of
every round are written as JSON (--json, bench/results/bench_kafka.json).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import orjson
import psutil

from bench.bench_api import (
    BATCH_CONNECTIONS,
    HOST,
    PHASE_TIMEOUT_S,
    TOPIC,
    VALUE,
    batch_body,
    bounded,
    child,
    progress,
    quire_stack,
)
from bench.common import REPO, free_port
from bench.http_load import Connection

MESSAGE = VALUE.encode()
assert len(MESSAGE) == 100
REST_BATCH = 1_000
JS_WINDOW = 1_000

Row = dict[str, float]  # "messages", "seconds"


# --- Kafka (confluent-kafka) ------------------------------------------------------------------------
def kafka_produce(bootstrap: str, topic: str, n: int, idempotent: bool) -> Row:
    from confluent_kafka import KafkaException, Producer

    failed: list[Any] = []
    delivered = 0

    def report(err: Any, _msg: Any) -> None:
        nonlocal delivered
        if err is None:
            delivered += 1
        else:
            failed.append(err)

    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            "acks": "all",
            "linger.ms": 5,
            "batch.size": 1_000_000,
            "batch.num.messages": 1_000_000,
            "compression.type": "none",
            "enable.idempotence": idempotent,
            "queue.buffering.max.messages": 2_000_000,
            "queue.buffering.max.kbytes": 1_048_576,
            "on_delivery": report,
        }
    )
    produce, poll = producer.produce, producer.poll
    started = time.perf_counter()
    for _ in range(n):
        try:
            produce(topic, MESSAGE, partition=0)
        except BufferError:  # the local queue is full: serve delivery reports, then once more
            poll(0.01)
            produce(topic, MESSAGE, partition=0)
    queued = time.perf_counter() - started
    left = producer.flush(120)
    seconds = time.perf_counter() - started
    if left or failed or delivered != n:
        raise KafkaException(f"kafka produce: {delivered} of {n} delivered, {left} left, errors {failed[:3]}")
    # The produce() loop's own time: the client's ceiling, which the server cannot beat.
    return {"messages": n, "seconds": seconds, "queued_s": queued}


def kafka_consume(bootstrap: str, topic: str, n: int) -> Row:
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"bench-{topic}",  # required by the client; assign() joins no group
            "enable.auto.commit": False,
            "fetch.min.bytes": 1_000_000,
            "fetch.wait.max.ms": 100,
            "fetch.max.bytes": 64 * 1024 * 1024,
            "max.partition.fetch.bytes": 16 * 1024 * 1024,
            # Fetch again as soon as an answer is in: by default librdkafka stops fetching while
            # 100,000 messages are queued and then backs off for a second.
            "queued.min.messages": 10_000_000,
            "queued.max.messages.kbytes": 2_097_151,
        }
    )
    try:
        started = time.perf_counter()
        consumer.assign([TopicPartition(topic, 0, 0)])
        got, last, deadline = 0, None, started + PHASE_TIMEOUT_S
        while got < n and time.perf_counter() < deadline:
            msgs = consumer.consume(10_000, 1.0)
            if msgs:
                got += len(msgs)
                last = msgs[-1]
        seconds = time.perf_counter() - started
    finally:
        consumer.close()
    # An error in the stream would count as a message: the last offset proves every one is real.
    if got != n or last is None or last.error() is not None or last.offset() != n - 1:
        raise RuntimeError(f"kafka consume: {got} of {n} messages, last {last and last.offset()}")
    if last.value() != MESSAGE:
        raise RuntimeError("kafka consume: the last message is not what was produced")
    return {"messages": n, "seconds": seconds}


# --- Quire REST --------------------------------------------------------------------------------------
async def rest_produce(port: int, topic: str, n: int) -> Row:
    body = batch_body(REST_BATCH)
    batches = n // REST_BATCH
    conns = [await Connection.open(HOST, port) for _ in range(BATCH_CONNECTIONS)]
    sent = 0

    async def one(c: Connection) -> None:
        nonlocal sent
        while sent < batches:
            sent += 1
            status, raw = await c.request("POST", f"{TOPIC}/{topic}/messages", body)
            if status != 200:
                raise RuntimeError(f"REST produce: {status} {raw[:200]!r}")

    started = time.perf_counter()
    await asyncio.gather(*(one(c) for c in conns))
    seconds = time.perf_counter() - started
    for c in conns:
        c.close()
    return {"messages": batches * REST_BATCH, "seconds": seconds}


async def rest_consume(port: int, topic: str, n: int) -> Row:
    sub = f"{TOPIC}/{topic}/subscriptions/bench"
    c, acker = await Connection.open(HOST, port), await Connection.open(HOST, port)
    status, _ = await c.request("PUT", sub, orjson.dumps({"initial_position": "earliest", "type": "shared"}))
    assert status in (200, 201, 204), status
    path = f"{sub}/messages?max_messages={REST_BATCH}&wait_ms=200"
    acking: asyncio.Task[tuple[int, bytes]] | None = None
    got, started = 0, time.perf_counter()
    idle_since = started
    while got < n and time.perf_counter() - idle_since < 5.0:
        _, raw = await c.request("GET", path)
        msgs = orjson.loads(raw)["messages"]
        if not msgs:
            continue
        got += len(msgs)
        idle_since = time.perf_counter()
        if acking is not None:
            await acking
        ids = orjson.dumps({"message_ids": [m["message_id"] for m in msgs]})
        acking = asyncio.create_task(acker.request("POST", f"{sub}/ack", ids))
    if acking is not None:
        await acking
    seconds = time.perf_counter() - started
    c.close()
    acker.close()
    if got != n:
        raise RuntimeError(f"REST consume: {got} of {n} messages")
    return {"messages": got, "seconds": seconds}


# --- NATS JetStream ----------------------------------------------------------------------------------
async def jetstream(n: int, tag: str) -> tuple[Row, Row]:
    import nats
    from nats.js.api import AckPolicy, ConsumerConfig, StorageType

    nc = await nats.connect(f"nats://{HOST}:4222")
    js = nc.jetstream()
    stream, subject = f"QUIREKBENCH{os.getpid()}{tag}", f"quirekbench{os.getpid()}{tag}"
    with contextlib.suppress(Exception):
        await js.delete_stream(stream)
    await js.add_stream(name=stream, subjects=[subject], storage=StorageType.FILE)
    try:
        started = time.perf_counter()
        for _ in range(n // JS_WINDOW):
            await asyncio.gather(*[js.publish(subject, MESSAGE) for _ in range(JS_WINDOW)])
        publish = {"messages": n // JS_WINDOW * JS_WINDOW, "seconds": time.perf_counter() - started}
        started = time.perf_counter()
        sub = await js.pull_subscribe(
            subject, durable="drain", config=ConsumerConfig(ack_policy=AckPolicy.NONE)
        )
        got = 0
        while got < publish["messages"]:
            msgs = await sub.fetch(1_000, timeout=5)
            got += len(msgs)
        consume = {"messages": got, "seconds": time.perf_counter() - started}
    finally:
        with contextlib.suppress(Exception):
            await js.delete_stream(stream)
        await nc.close()
    return publish, consume


# --- the run -----------------------------------------------------------------------------------------
ROWS = (
    ("kafka_produce", "Kafka produce (acks=all, linger 5 ms)"),
    ("kafka_produce_idem", "Kafka produce, idempotent"),
    ("kafka_consume", "Kafka consume (assign, from 0)"),
    ("rest_produce", f"REST produce (batches of {REST_BATCH:,})"),
    ("rest_consume", f"REST consume (pull {REST_BATCH:,} + ack)"),
    ("ceiling_produce", "client ceiling: produce, storage-free listener"),
    ("ceiling_consume", "client ceiling: consume, storage-free listener"),
    ("js_publish", f"JetStream publish (window {JS_WINDOW:,})"),
    ("js_consume", "JetStream pull consume (1,000)"),
)
CPU_OF = ("broker", "bookie", "client")
PEER = {"produce": "js_publish", "consume": "js_consume"}


def processes() -> dict[str, psutil.Process]:
    """This process (the clients, librdkafka's threads included), quire_stack's bookie and
    broker and the ceiling's listener, whose CPU time each row counts: on a shared machine, CPU
    per message is the figure that other tenants' load does not move."""
    me = psutil.Process()
    out = {"client": me}
    for proc in me.children():
        cmdline = proc.cmdline()
        role = next((r for r in ("bookie", "broker") if r in cmdline), None)
        role = "ceiling" if "bench.kafka_ceiling" in cmdline else role
        if role is not None:
            out[role] = proc
    return out


def cpu_seconds(procs: dict[str, psutil.Process]) -> dict[str, float]:
    return {name: sum(proc.cpu_times()[:2]) for name, proc in procs.items()}


def one_round(http_port: int, bootstrap: str, ceiling: str, n: int, i: int, only: set[str]) -> dict[str, Row]:
    out: dict[str, Row] = {}
    procs = processes()

    def run(key: str, measure: Callable[[], Row]) -> None:
        if key in only:
            progress(f"round {i + 1}: {key}")
            before = cpu_seconds(procs)
            out[key] = measure()
            after = cpu_seconds(procs)
            out[key].update({f"{name}_cpu_s": after[name] - before[name] for name in procs})
            if key.startswith("ceiling"):  # the ceiling's listener stands in for broker and bookie
                out[key].update(broker_cpu_s=out[key].pop("ceiling_cpu_s", 0.0), bookie_cpu_s=0.0)

    topic = f"kbench-r{i}"
    run("kafka_produce", lambda: kafka_produce(bootstrap, topic, n, idempotent=False))
    run("kafka_consume", lambda: kafka_consume(bootstrap, topic, n))
    run("kafka_produce_idem", lambda: kafka_produce(bootstrap, f"{topic}-idem", n, idempotent=True))
    run(
        "rest_produce",
        lambda: bounded(rest_produce(http_port, f"rest-r{i}", n), PHASE_TIMEOUT_S, "REST produce"),
    )
    run(
        "rest_consume",
        lambda: bounded(rest_consume(http_port, f"rest-r{i}", n), PHASE_TIMEOUT_S, "REST consume"),
    )
    run("ceiling_produce", lambda: kafka_produce(ceiling, topic, n, idempotent=False))
    run("ceiling_consume", lambda: kafka_consume(ceiling, topic, n))
    if only & {"js_publish", "js_consume"}:
        progress(f"round {i + 1}: jetstream")
        # nats-py publishes some thousands a second here: 2 ms a message bounds both rows
        bound = max(PHASE_TIMEOUT_S, n / 500)
        out["js_publish"], out["js_consume"] = bounded(jetstream(n, f"r{i}"), bound, "jetstream")
    return out


def rate(row: Row) -> float:
    return row["messages"] / row["seconds"]


def medians(rounds: list[dict[str, Row]]) -> dict[str, Row]:
    out: dict[str, Row] = {}
    for key, _ in ROWS:
        rows = [r[key] for r in rounds if key in r]
        if rows:
            out[key] = {
                "messages": rows[0]["messages"],
                "seconds": statistics.median(r["seconds"] for r in rows),
                "rate": statistics.median(rate(r) for r in rows),
            }
            for name in CPU_OF:
                if f"{name}_cpu_s" in rows[0]:
                    per = (r[f"{name}_cpu_s"] / r["messages"] * 1e6 for r in rows)
                    out[key][f"{name}_us"] = statistics.median(per)
    return out


def table(med: dict[str, Row], rounds: int) -> str:
    def ratio(key: str, other: str) -> str:
        return f"{med[key]['rate'] / med[other]['rate']:.1f}x" if key in med and other in med else "-"

    lines = [
        "| row | messages | seconds | msgs/s | MB/s | vs JetStream | Kafka vs REST | of client ceiling"
        " | CPU µs/msg: broker | bookie | client |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for key, label in ROWS:
        if key not in med:
            continue
        m, side = med[key], "consume" if key.endswith("consume") else "produce"
        kafka = key.startswith("kafka")
        vs_js = (
            "-"
            if key.startswith("ceiling")
            else ratio(key, PEER[side])
            if not key.startswith("js")
            else "1.0x"
        )
        vs_rest = ratio(key, f"rest_{side}") if kafka else "-"
        of_ceiling = ratio(key, f"ceiling_{side}") if kafka else "-"
        lines.append(
            f"| {label} | {m['messages']:,.0f} | {m['seconds']:.2f} | {m['rate']:,.0f}"
            f" | {m['rate'] * len(MESSAGE) / 1e6:.1f} | {vs_js} | {vs_rest} | {of_ceiling} | "
            + " | ".join(f"{m[f'{name}_us']:.2f}" if f"{name}_us" in m else "-" for name in CPU_OF)
            + " |"
        )
    lines.append(
        f"\nmedian of {rounds} rounds; 100 B messages; ratios are of the medians; CPU µs/msg: CPU time"
        " (user + system) of the broker, the bookie and the bench process (the clients) during the row,"
        " per message (JetStream's server is not counted; in the ceiling rows the broker column is the"
        " storage-free listener); client ceiling: the same clients against the listener's wire server"
        " with handlers that store nothing (bench.kafka_ceiling), the most any broker could show here"
    )
    return "\n".join(lines)


def verdicts(med: dict[str, Row]) -> list[str]:
    out = []
    for key, bar in (("kafka_produce", 500_000), ("kafka_consume", 1_000_000)):
        if key not in med:
            continue
        got, peer = med[key]["rate"], med.get(PEER["consume" if key.endswith("consume") else "produce"])
        line = f"{key}: {got:,.0f} msgs/s vs bar {bar:,} -> {'met' if got >= bar else 'MISSED'}"
        if peer is not None:
            vs = got / peer["rate"]
            line += f"; {vs:.1f}x JetStream vs bar 10x -> {'met' if vs >= 10 else 'MISSED'}"
        out.append(line)
    return out


def main() -> None:
    keys = [k for k, _ in ROWS]
    parser = argparse.ArgumentParser(description="make bench-kafka: Kafka listener vs REST vs JetStream")
    parser.add_argument("--messages", type=int, default=1_000_000, help="messages per row and round")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--rows", type=lambda s: s.split(","), default=keys, help=f"only: {','.join(keys)}")
    parser.add_argument("--json", type=Path, default=REPO / "bench" / "results" / "bench_kafka.json")
    args = parser.parse_args()
    if not set(args.rows) <= set(keys):
        parser.error(f"unknown rows in {','.join(args.rows)}; known: {','.join(keys)}")
    kafka_port, ceiling_port = free_port(), free_port()
    bootstrap, ceiling = f"{HOST}:{kafka_port}", f"{HOST}:{ceiling_port}"
    ceiling_args = [sys.executable, "-m", "bench.kafka_ceiling", str(ceiling_port), str(args.messages)]
    env = {
        "QUIRE_KAFKA_PORT": str(kafka_port),
        "QUIRE_KAFKA_ADVERTISED_ADDRESS": bootstrap,
        "QUIRE_PULSAR_PORT": "0",
    }
    rounds: list[dict[str, Row]] = []
    with (
        tempfile.TemporaryDirectory(prefix="quire-kbench-", ignore_cleanup_errors=True) as tmp,
        quire_stack(Path(tmp), env) as http_port,
        child(ceiling_args, ceiling_port, "kafka ceiling", Path(tmp) / "ceiling.log"),
    ):
        progress(f"broker: HTTP {HOST}:{http_port}, Kafka {bootstrap}")
        for i in range(args.rounds):
            rounds.append(one_round(http_port, bootstrap, ceiling, args.messages, i, set(args.rows)))
            done = ", ".join(f"{k} {rate(v):,.0f}/s" for k, v in rounds[-1].items())
            print(f"round {i + 1}: {done}", file=sys.stderr, flush=True)
    med = medians(rounds)
    print(table(med, args.rounds))
    print("\n".join(verdicts(med)))
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_bytes(orjson.dumps({"rounds": rounds, "median": med}, option=orjson.OPT_INDENT_2))
    print(f"rounds written to {args.json}", file=sys.stderr)


if __name__ == "__main__":
    main()
