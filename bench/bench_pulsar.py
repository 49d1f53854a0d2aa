"""`make bench-pulsar`: the real `pulsar-client` (Python over the C++ core) against Quire's Pulsar
listener and against pulsar-lite (PyPI; a Rust broker that speaks the protocol) in the same run,
with Quire's Kafka listener under confluent-kafka as a second row for Quire.

Quire runs as bench_api's stack (a real bookie process and a real broker process on SQLite) with
the Pulsar and Kafka listeners on free ports. pulsar-lite is its packaged binary on a free port
and a file in a temporary directory. Quire's bookie fsyncs every group of adds before the broker
acknowledges; pulsar-lite does not fsync before it acknowledges (it writes to its local store and
answers), so its rows are an upper bound of a broker that skips durability.

Each round, per broker, on a new topic:
- produce: one producer, batching on (up to 1,000 messages or 128 KiB per batch, 5 ms delay),
  `send_async` of N messages of 100 B with a callback that counts the receipts, then `flush()`;
- consume: a Shared subscription from the earliest message, `receive()` and `acknowledge()` of
  each message until the N-th (the row fails on a missing or different message);
- send latency: batching off, one synchronous `send()` at a time, paced at 1,000 messages a
  second for --latency-s seconds: p50 and p99 of each call's time.
Kafka rows (Quire only): bench_kafka's confluent-kafka produce (acks=all, linger 5 ms) and
consume of the same N messages.

Every row is the median of R rounds (--rounds, default 3) of N messages (--messages, default
1,000,000); each row also counts the CPU time (user + system) of the broker, the bookie and this
process (the clients and their C++ threads) per message. The table is printed as markdown with
the issue's bars; rounds are written as JSON (--json).
"""

from __future__ import annotations

import argparse
import contextlib
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import orjson
import psutil

from bench.bench_api import HOST, PHASE_TIMEOUT_S, child, progress, quire_stack
from bench.bench_kafka import kafka_consume, kafka_produce
from bench.common import REPO, pct

MESSAGE = b"x" * 100
Row = dict[str, float]
BROKERS = ("quire", "lite")
ROWS = (
    ("quire_produce", "Quire, Pulsar produce (send_async, batching)"),
    ("lite_produce", "pulsar-lite, Pulsar produce (send_async, batching)"),
    ("quire_kafka_produce", "Quire, Kafka produce (confluent-kafka, acks=all)"),
    ("quire_consume", "Quire, Pulsar consume (shared, receive + ack)"),
    ("lite_consume", "pulsar-lite, Pulsar consume (shared, receive + ack)"),
    ("quire_kafka_consume", "Quire, Kafka consume (confluent-kafka)"),
)
CPU_OF = ("broker", "bookie", "client")


# --- the Pulsar rows -----------------------------------------------------------------------------
def pulsar_produce(url: str, topic: str, n: int) -> Row:
    import pulsar

    done = threading.Event()
    acked, failed = 0, []

    def receipt(result: Any, _msg_id: Any) -> None:
        nonlocal acked
        if result == pulsar.Result.Ok:
            acked += 1
        else:
            failed.append(result)
        if acked + len(failed) == n:
            done.set()

    client = _client(url, 60)
    try:
        producer = client.create_producer(
            topic,
            batching_enabled=True,
            batching_max_messages=1_000,
            batching_max_allowed_size_in_bytes=128 * 1024,
            batching_max_publish_delay_ms=5,
            max_pending_messages=50_000,
            block_if_queue_full=True,
            send_timeout_millis=120_000,
        )
        send = producer.send_async
        started = time.perf_counter()
        for _ in range(n):
            send(MESSAGE, receipt)
        producer.flush()
        done.wait(PHASE_TIMEOUT_S)
        seconds = time.perf_counter() - started
        producer.close()
    finally:
        client.close()
    if acked != n or failed:
        raise RuntimeError(f"pulsar produce to {url}: {acked} of {n} acknowledged, errors {failed[:3]}")
    return {"messages": n, "seconds": seconds}


def pulsar_consume(url: str, topic: str, n: int) -> Row:
    import pulsar

    client = _client(url, 60)
    try:
        consumer = client.subscribe(
            topic,
            "bench",
            consumer_type=pulsar.ConsumerType.Shared,
            initial_position=pulsar.InitialPosition.Earliest,
            receiver_queue_size=10_000,
        )
        receive, ack = consumer.receive, consumer.acknowledge
        got, started = 0, time.perf_counter()
        deadline = started + PHASE_TIMEOUT_S
        while got < n and time.perf_counter() < deadline:
            try:
                msg = receive(10_000)
            except pulsar.Timeout:
                raise RuntimeError(
                    f"pulsar consume from {url}: nothing for 10 s after {got} of {n}"
                ) from None
            if msg.data() != MESSAGE:
                raise RuntimeError(f"pulsar consume from {url}: message {got} is not what was produced")
            ack(msg)
            got += 1
        seconds = time.perf_counter() - started
        consumer.close()
    finally:
        client.close()
    if got != n:
        raise RuntimeError(f"pulsar consume from {url}: {got} of {n} messages")
    return {"messages": n, "seconds": seconds}


def send_latency(url: str, topic: str, rate: int, seconds: float) -> list[float]:
    """Each synchronous `send()`'s time in ms, one at a time, paced at `rate` a second."""

    client = _client(url, 30)
    try:
        producer = client.create_producer(topic, batching_enabled=False, send_timeout_millis=30_000)
        producer.send(MESSAGE)  # the connection and the topic are warm before the clock starts
        out: list[float] = []
        interval, start = 1.0 / rate, time.perf_counter()
        for i in range(int(rate * seconds)):
            pause = start + i * interval - time.perf_counter()
            if pause > 0:
                time.sleep(pause)
            t0 = time.perf_counter()
            producer.send(MESSAGE)
            out.append((time.perf_counter() - t0) * 1000)
        producer.close()
    finally:
        client.close()
    return out


def _client(url: str, timeout_s: int) -> Any:
    import pulsar

    logger = pulsar.ConsoleLogger(pulsar.LoggerLevel.Warn)
    return pulsar.Client(url, operation_timeout_seconds=timeout_s, io_threads=1, logger=logger)


# --- processes and CPU ---------------------------------------------------------------------------
def processes() -> dict[str, dict[str, psutil.Process]]:
    """Per broker under test, the processes whose CPU each row counts: Quire's broker and
    bookie (children of this process started by quire_stack), pulsar-lite's server, and this
    process (the clients, the C++ core's threads included) for both."""
    me = psutil.Process()
    quire: dict[str, psutil.Process] = {"client": me}
    lite: dict[str, psutil.Process] = {"client": me}
    for proc in me.children(recursive=True):
        cmdline = proc.cmdline()
        if cmdline and cmdline[0].endswith("pulsar-lite"):
            lite["broker"] = proc
        role = next((r for r in ("bookie", "broker") if r in cmdline), None)
        if role is not None:
            quire.setdefault(role, proc)
    return {"quire": quire, "lite": lite}


def cpu_seconds(procs: dict[str, psutil.Process]) -> dict[str, float]:
    return {name: sum(proc.cpu_times()[:2]) for name, proc in procs.items()}


def one_round(urls: dict[str, str], bootstrap: str, n: int, i: int, only: set[str]) -> dict[str, Row]:
    out: dict[str, Row] = {}
    procs = processes()

    def run(key: str, broker: str, measure: Callable[[], Row]) -> None:
        if key not in only:
            return
        progress(f"round {i + 1}: {key}")
        before = cpu_seconds(procs[broker])
        out[key] = measure()
        after = cpu_seconds(procs[broker])
        out[key].update({f"{name}_cpu_s": after[name] - before[name] for name in procs[broker]})

    for broker in BROKERS:
        topic = f"persistent://public/default/pbench-{broker}-r{i}"
        run(f"{broker}_produce", broker, lambda b=broker, t=topic: pulsar_produce(urls[b], t, n))
        run(f"{broker}_consume", broker, lambda b=broker, t=topic: pulsar_consume(urls[b], t, n))
    ktopic = f"pbench-kafka-r{i}"
    run("quire_kafka_produce", "quire", lambda: kafka_produce(bootstrap, ktopic, n, idempotent=False))
    run("quire_kafka_consume", "quire", lambda: kafka_consume(bootstrap, ktopic, n))
    return out


def medians(rounds: list[dict[str, Row]]) -> dict[str, Row]:
    out: dict[str, Row] = {}
    for key, _ in ROWS:
        rows = [r[key] for r in rounds if key in r]
        if not rows:
            continue
        out[key] = {
            "messages": rows[0]["messages"],
            "rate": statistics.median(r["messages"] / r["seconds"] for r in rows),
        }
        for name in CPU_OF:
            if f"{name}_cpu_s" in rows[0]:
                out[key][f"{name}_us"] = statistics.median(
                    r[f"{name}_cpu_s"] / r["messages"] * 1e6 for r in rows
                )
    return out


def table(med: dict[str, Row], latency: dict[str, list[float]], rounds: int) -> str:
    lines = [
        "| row | messages | msgs/s | vs pulsar-lite | CPU µs/msg: broker | bookie | client |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    for key, label in ROWS:
        if key not in med:
            continue
        m, side = med[key], key.rsplit("_", 1)[1]
        peer = med.get(f"lite_{side}")
        vs = f"{m['rate'] / peer['rate']:.2f}x" if peer is not None and key.startswith("quire_") else "-"
        cpu = " | ".join(f"{m[f'{c}_us']:.1f}" if f"{c}_us" in m else "-" for c in CPU_OF)
        lines.append(f"| {label} | {m['messages']:,.0f} | {m['rate']:,.0f} | {vs} | {cpu} |")
    if latency:
        lines += [
            "",
            "| send() one at a time at 1,000 msg/s | sends | p50 ms | p99 ms |",
            "|---|---:|---:|---:|",
        ]
        for broker, samples in latency.items():
            lines.append(f"| {broker} | {len(samples):,} | {pct(samples, 50):.2f} | {pct(samples, 99):.2f} |")
    lines.append(
        f"\nmedian of {rounds} rounds; 100 B messages; pulsar-client {_client_version()} with batching on"
        " for the throughput rows. Quire's bookie fsyncs before every acknowledgement; pulsar-lite"
        " does NOT fsync before it acknowledges. CPU µs/msg: CPU time (user + system) during the row"
        " per message; pulsar-lite's server is in the broker column and has no bookie."
    )
    return "\n".join(lines)


def verdicts(med: dict[str, Row], latency: dict[str, list[float]]) -> list[str]:
    out = []

    def bar(what: str, ok: bool, detail: str) -> None:
        out.append(f"{what}: {detail} -> {'met' if ok else 'MISSED'}")

    for side in ("produce", "consume"):
        q, lite = med.get(f"quire_{side}"), med.get(f"lite_{side}")
        if q is not None and side == "produce":
            bar("produce >= 500,000 msgs/s", q["rate"] >= 500_000, f"{q['rate']:,.0f} msgs/s")
        if q is not None and lite is not None:
            ratio = q["rate"] / lite["rate"]
            bar(f"{side} >= 1x pulsar-lite", ratio >= 1.0, f"{ratio:.2f}x")
    if "quire" in latency:
        p99 = pct(latency["quire"], 99)
        bar("send p99 <= 2 ms", p99 <= 2.0, f"{p99:.2f} ms")
    return out


def _client_version() -> str:
    from importlib.metadata import version

    return version("pulsar-client")


@contextlib.contextmanager
def pulsar_lite(tmp: Path, port: int) -> Iterator[str]:
    """pulsar-lite's server (its packaged binary) on `port`, stopped by process group on exit."""
    from pulsar_lite.binary_finder import find_pulsar_lite_binary

    args = [find_pulsar_lite_binary(), "--addr", f"{HOST}:{port}", "--db-path", str(tmp / "lite.db")]
    with child(args, port, "pulsar-lite", tmp / "lite.log"):
        yield f"pulsar://{HOST}:{port}"


def main() -> None:
    keys = [k for k, _ in ROWS]
    parser = argparse.ArgumentParser(description="make bench-pulsar: pulsar-client vs Quire and pulsar-lite")
    parser.add_argument("--messages", type=int, default=1_000_000, help="messages per row and round")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--latency-s", type=float, default=10.0, help="seconds of paced send() per broker")
    parser.add_argument("--rows", type=lambda s: s.split(","), default=keys, help=f"only: {','.join(keys)}")
    parser.add_argument("--json", type=Path, default=REPO / "bench" / "results" / "bench_pulsar.json")
    args = parser.parse_args()
    if not set(args.rows) <= set(keys):
        parser.error(f"unknown rows in {','.join(args.rows)}; known: {','.join(keys)}")
    from bench.common import free_port

    pulsar_port, kafka_port, lite_port = free_port(), free_port(), free_port()
    bootstrap = f"{HOST}:{kafka_port}"
    env = {
        "QUIRE_PULSAR_PORT": str(pulsar_port),
        "QUIRE_PULSAR_ADVERTISED_ADDRESS": f"{HOST}:{pulsar_port}",
        "QUIRE_KAFKA_PORT": str(kafka_port),
        "QUIRE_KAFKA_ADVERTISED_ADDRESS": bootstrap,
    }
    rounds: list[dict[str, Row]] = []
    latency: dict[str, list[float]] = {}
    with (
        tempfile.TemporaryDirectory(prefix="quire-pbench-", ignore_cleanup_errors=True) as tmp,
        quire_stack(Path(tmp), env) as http_port,
        pulsar_lite(Path(tmp), lite_port) as lite_url,
    ):
        urls = {"quire": f"pulsar://{HOST}:{pulsar_port}", "lite": lite_url}
        progress(
            f"Quire: HTTP {HOST}:{http_port}, Pulsar {urls['quire']}, Kafka {bootstrap}; lite {lite_url}"
        )
        for i in range(args.rounds):
            rounds.append(one_round(urls, bootstrap, args.messages, i, set(args.rows)))
            done = ", ".join(f"{k} {v['messages'] / v['seconds']:,.0f}/s" for k, v in rounds[-1].items())
            print(f"round {i + 1}: {done}", file=sys.stderr, flush=True)
        if args.latency_s > 0:
            for broker in BROKERS:
                progress(f"send latency: {broker}")
                topic = f"persistent://public/default/pbench-latency-{broker}"
                latency[broker] = send_latency(urls[broker], topic, 1_000, args.latency_s)
    med = medians(rounds)
    print(table(med, latency, args.rounds))
    print("\n".join(verdicts(med, latency)))
    args.json.parent.mkdir(parents=True, exist_ok=True)
    payload = {"rounds": rounds, "median": med, "latency_ms": latency}
    args.json.write_bytes(orjson.dumps(payload, option=orjson.OPT_INDENT_2))
    print(f"rounds written to {args.json}", file=sys.stderr)


if __name__ == "__main__":
    main()
