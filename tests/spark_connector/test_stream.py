"""Streaming: a query to Parquet and one to another topic, stopped and restarted from their
checkpoints while a producer keeps writing, end with exactly the produced messages."""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any

import pytest

from tests.kafka_clients.support import Standalone, rest_value

pytestmark = pytest.mark.spark
PRODUCED = 600
PER_TRIGGER = 70


def _producer(quire: Standalone, topic: str, ids: list[str]) -> None:
    for i in range(0, PRODUCED, 10):
        batch = [{"key": f"k{i + j}", "value": f"v{i + j}"} for j in range(10)]
        r = quire.rest("POST", f"/v1/topics/{topic}/messages", json={"messages": batch})
        assert r.status_code == 200, r.text
        ids.extend(x["message_id"] for x in r.json()["results"])
        time.sleep(0.02)


def _start(spark: Any, quire: Standalone, src: str, dst: str, root: Path) -> list[Any]:
    stream = (
        spark.readStream.format("quire")
        .option("serviceUrl", quire.base_url)
        .option("topic", src)
        .option("startingOffsets", "earliest")
        .option("maxMessagesPerTrigger", str(PER_TRIGGER))
        .load()
    )
    to_parquet = (
        stream.writeStream.format("parquet")
        .option("path", str(root / "out"))
        .option("checkpointLocation", str(root / "cp-parquet"))
        .trigger(processingTime="200 milliseconds")
        .start()
    )
    to_topic = (
        stream.select("key", "value")
        .writeStream.format("quire")
        .option("serviceUrl", quire.base_url)
        .option("topic", dst)
        .option("checkpointLocation", str(root / "cp-topic"))
        .trigger(processingTime="200 milliseconds")
        .start()
    )
    return [to_parquet, to_topic]


def _healthy(spark: Any, quire: Standalone, src: str, dst: str, root: Path, queries: list[Any]) -> list[Any]:
    """The queries, restarted from their checkpoints when Spark could not start a Python worker in
    its fixed 10 s (a loaded 2-core machine); any other failure fails the test."""
    errors = [str(q.exception()) for q in queries if q.exception() is not None]
    if not errors:
        return queries
    assert all("Python worker failed to connect back" in e for e in errors), errors
    for q in queries:
        q.stop()
    return _start(spark, quire, src, dst, root)


def _caught_up(spark: Any, quire: Standalone, root: Path, dst: str) -> bool:
    parquet = spark.read.parquet(str(root / "out")).count() if (root / "out").exists() else 0
    stats = quire.rest("GET", f"/admin/v2/persistent/{dst}/stats").json()
    return parquet >= PRODUCED and stats.get("msgInCounter", 0) >= PRODUCED


def test_stream_stopped_and_restarted_ends_with_exactly_the_produced(
    spark: Any, quire: Standalone, tmp_path: Path
) -> None:
    src, dst = "public/default/clicks", "public/default/clicks-copy"
    assert quire.rest("PUT", f"/admin/v2/persistent/{src}/partitions", json=2).status_code == 204
    assert quire.rest("PUT", f"/admin/v2/persistent/{dst}").status_code == 204
    r = quire.rest("POST", f"/admin/v2/persistent/{dst}/deduplicationEnabled", json=True)
    assert r.status_code == 204, r.text
    ids: list[str] = []
    producer = threading.Thread(target=_producer, args=(quire, src, ids))
    producer.start()
    try:
        queries = _start(spark, quire, src, dst, tmp_path)
        deadline = time.monotonic() + 120
        while len([p for p in queries[0].recentProgress if p["numInputRows"]]) < 2:
            assert time.monotonic() < deadline, "the first query made no progress"
            queries = _healthy(spark, quire, src, dst, tmp_path, queries)
            time.sleep(0.1)
        for q in queries:
            q.stop()  # mid-stream, while the producer writes
        queries = _start(spark, quire, src, dst, tmp_path)
        producer.join(timeout=120)
        deadline = time.monotonic() + 300
        while not _caught_up(spark, quire, tmp_path, dst):
            assert time.monotonic() < deadline, "the restarted queries did not catch up"
            queries = _healthy(spark, quire, src, dst, tmp_path, queries)
            time.sleep(0.5)
        for q in queries:
            q.processAllAvailable()
            assert all(p["numInputRows"] <= PER_TRIGGER for p in q.recentProgress)
            q.stop()
    finally:
        producer.join(timeout=120)
    got = [r.messageId for r in spark.read.parquet(str(tmp_path / "out")).select("messageId").collect()]
    assert sorted(got) == sorted(ids) and len(ids) == PRODUCED  # each message once: none lost, none repeated
    copied = [rest_value(m) for m in quire.rest_read(dst.split("/", 2)[2])]
    assert sorted(copied) == sorted(f"v{i}".encode() for i in range(PRODUCED))
