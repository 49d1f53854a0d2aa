"""`make bench-spark`: the Spark connector (quire_spark) against the REST reader and a Kafka consumer.

Starts bench_api's stack (a real bookie and broker process, SQLite metadata) with the Kafka
listener, writes N messages of 100 B (--messages, default 500,000) in REST batches of 1,000 to
a 1-partition topic and to a 6-partition topic, then measures in this process, each row once:

- spark count / parquet: `spark.read.format("quire")` on `local[*]` into `count()` and into a
  Parquet file, after one warm-up read (the Python workers started); tasks read ledger ranges
  straight from the bookie;
- REST reader: `GET /messages` pages of 1,000 from the earliest message on one connection;
- kafka consume: confluent_kafka.Consumer on the 1-partition topic (bench_kafka's row);
- stream: a streaming query from the earliest message into the `noop` sink, until it has read
  all N (processAllAvailable);
- sink: `df.write.format("quire")` of N/5 rows, exactly once on (dedup on the topic, producer
  names and sequence ids) and off.

Not a test: nothing asserts; it prints one markdown table. The standalone-cluster rows of issue
27 are not measured here.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx

from bench.bench_api import HOST, batch_body, quire_stack
from bench.bench_kafka import kafka_consume
from bench.common import REPO, free_port

BATCH = 1_000


def produce(url: str, topic: str, n: int) -> None:
    body = batch_body(BATCH)

    def send(_: int) -> None:
        headers = {"content-type": "application/json"}
        with httpx.Client(base_url=url, timeout=60) as c:
            for _attempt in range(50):  # 503 is retriable (a ledger rolling over, a partition opening)
                r = c.post(f"/v1/topics/{topic}/messages", content=body, headers=headers)
                if r.status_code != 503:
                    break
                time.sleep(0.2)
            r.raise_for_status()

    with ThreadPoolExecutor(8) as pool:
        list(pool.map(send, range(n // BATCH)))


def rest_read(url: str, topic: str, n: int) -> int:
    got, start = 0, "earliest"
    with httpx.Client(base_url=url, timeout=60) as c:
        while got < n:
            body = c.get(
                f"/v1/topics/{topic}/messages", params={"start": start, "max_messages": BATCH}
            ).json()
            if not body["messages"]:
                break
            got += len(body["messages"])
            start = body["next"]
    if got != n:
        raise RuntimeError(f"REST reader: {got} of {n} messages")
    return got


def timed(name: str, n: int, fn: Callable[[], Any], rows: list[tuple[str, int, float]]) -> None:
    started = time.perf_counter()
    fn()
    seconds = time.perf_counter() - started
    rows.append((name, n, seconds))
    print(f"{name}: {n / seconds:,.0f} msg/s ({seconds:.2f} s)", file=sys.stderr, flush=True)


def session() -> Any:
    from pyspark.sql import SparkSession

    from quire_spark import QuireDataSource

    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO), os.environ.get("PYTHONPATH", "")) if p)
    spark = (
        SparkSession.builder.master("local[*]")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.driver.host", HOST)
        .config("spark.python.authenticate.socketTimeout", "120s")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    spark.dataSource.register(QuireDataSource)
    return spark


def spark_rows(spark: Any, url: str, n: int, tmp: Path, rows: list[tuple[str, int, float]]) -> None:
    def read(topic: str) -> Any:
        return spark.read.format("quire").option("serviceUrl", url).option("topic", topic).load()

    def count(topic: str) -> None:
        got = read(topic).count()
        if got != n:
            raise RuntimeError(f"spark count() of {topic}: {got} of {n} messages")

    read("public/default/one").count()  # warm-up: Python workers started
    for topic, label in (("public/default/one", "1 partition"), ("public/default/six", "6 partitions")):
        timed(f"spark count(), {label}", n, lambda t=topic: count(t), rows)
        out = tmp / f"parquet-{topic.rsplit('/', 1)[1]}"
        timed(f"spark to Parquet, {label}", n, lambda t=topic, o=out: read(t).write.parquet(str(o)), rows)
        if spark.read.parquet(str(out)).count() != n:
            raise RuntimeError(f"spark to Parquet of {topic}: not {n} rows")

    def stream() -> None:
        s = spark.readStream.format("quire").option("serviceUrl", url).option("topic", "public/default/one")
        q = s.option("startingOffsets", "earliest").load().writeStream.format("noop").start()
        q.processAllAvailable()
        q.stop()

    timed("spark stream (noop sink), 1 partition", n, stream, rows)


def sink_rows(spark: Any, url: str, n: int, rows: list[tuple[str, int, float]]) -> None:
    m = max(BATCH, n // 5)
    df = spark.range(0, m, 1, 4).selectExpr("cast(repeat('x', 100) as binary) as value")
    df.cache().count()
    for exactly_once in (True, False):
        topic = f"public/default/sink-{str(exactly_once).lower()}"
        httpx.put(f"{url}/admin/v2/persistent/{topic}").raise_for_status()
        httpx.post(
            f"{url}/admin/v2/persistent/{topic}/deduplicationEnabled", json=exactly_once
        ).raise_for_status()
        w = df.write.format("quire").mode("append").option("serviceUrl", url).option("topic", topic)
        w = w.option("exactlyOnce", str(exactly_once).lower()).option("messagesPerRequest", "1000")
        timed(f"sink, exactly once {'on' if exactly_once else 'off'}", m, w.save, rows)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--messages", type=int, default=500_000)
    args = parser.parse_args()
    n = args.messages // BATCH * BATCH
    kafka_port = free_port()
    bootstrap = f"{HOST}:{kafka_port}"
    env = {"QUIRE_KAFKA_PORT": str(kafka_port), "QUIRE_KAFKA_ADVERTISED_ADDRESS": bootstrap}
    rows: list[tuple[str, int, float]] = []
    with tempfile.TemporaryDirectory(prefix="quire-bench-spark-") as tmp, quire_stack(Path(tmp), env) as port:
        url = f"http://{HOST}:{port}"
        httpx.put(f"{url}/admin/v2/persistent/public/default/six/partitions", json=6).raise_for_status()
        produce(url, "public/default/one", n)
        produce(url, "public/default/six", n)
        spark = session()
        spark_rows(spark, url, n, Path(tmp), rows)
        timed(
            "REST reader (pages of 1,000), 1 partition",
            n,
            lambda: rest_read(url, "public/default/one", n),
            rows,
        )
        timed(
            "kafka consumer (confluent-kafka), 1 partition",
            n,
            lambda: kafka_consume(bootstrap, "one", n),
            rows,
        )
        sink_rows(spark, url, n, rows)
        spark.stop()
    print(f"\n{n:,} messages of 100 B, {os.cpu_count()} cores\n")
    print("| row | messages | seconds | msg/s |\n|---|---:|---:|---:|")
    for name, count, seconds in rows:
        print(f"| {name} | {count:,} | {seconds:.2f} | {count / seconds:,.0f} |")


if __name__ == "__main__":
    main()
