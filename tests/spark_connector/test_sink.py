"""The sink: a round trip through the REST reader, and a task killed mid-write stores each row once."""

from __future__ import annotations

import base64
import datetime
import os
import threading
import time
from typing import Any

import psutil
import pytest

from tests.kafka_clients.support import Standalone

pytestmark = pytest.mark.spark


def _topic(quire: Standalone, name: str, dedup: bool = True) -> str:
    topic = f"public/default/{name}"
    assert quire.rest("PUT", f"/admin/v2/persistent/{topic}").status_code == 204
    r = quire.rest("POST", f"/admin/v2/persistent/{topic}/deduplicationEnabled", json=dedup)
    assert r.status_code == 204, r.text
    return topic


def _rest(quire: Standalone, topic: str) -> list[dict[str, Any]]:
    return quire.rest_read(topic.split("/", 2)[2])


def _write(df: Any, quire: Standalone, **options: str) -> None:
    w = df.write.format("quire").mode("append").option("serviceUrl", quire.base_url)
    for k, v in options.items():
        w = w.option(k, v)
    w.save()


def test_sink_round_trip_through_rest(spark: Any, quire: Standalone) -> None:
    from pyspark.sql import Row

    topic = _topic(quire, "sink-round-trip")
    when = datetime.datetime(2026, 1, 2, 3, 4, 5, 678000, tzinfo=datetime.UTC)
    rows = [
        Row(key=f"k{i}" if i % 3 else None, value=f"v{i}".encode() if i != 7 else b"\xff\x00",
            properties={"i": str(i)}, eventTime=when)
        for i in range(40)
    ]  # fmt: skip
    df = spark.createDataFrame(
        rows, "key string, value binary, properties map<string,string>, eventTime timestamp"
    )
    _write(df.repartition(3), quire, topic=topic, producerName="round-trip", messagesPerRequest="7")
    got = _rest(quire, topic)
    assert sorted(
        (m["key"] or "", base64.b64decode(m["value"]), m["properties"], m["event_time"]) for m in got
    ) == sorted((r.key or "", r.value, r.properties, 1_767_323_045_678) for r in rows)
    assert {m["producer_name"] for m in got} <= {f"round-trip-{p}" for p in range(3)}
    # the same write again (a re-run of the job with the same producerName) stores nothing new
    _write(df.repartition(3), quire, topic=topic, producerName="round-trip", messagesPerRequest="7")
    assert len(_rest(quire, topic)) == 40


def _kill_a_writer(quire: Standalone, topic: str, stored: int, killed: list[int]) -> None:
    """Once `stored` messages are in the topic, SIGKILL a Spark Python worker that has a connection
    open to the broker (a sink task mid-write), as a lost executor would die."""
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        stats = quire.rest("GET", f"/admin/v2/persistent/{topic}/stats").json()
        if stats.get("msgInCounter", 0) >= stored:
            break
        time.sleep(0.01)
    for proc in psutil.process_iter(["pid", "cmdline"]):
        if proc.pid == os.getpid() or "pyspark" not in " ".join(proc.info["cmdline"] or []):
            continue
        try:
            connections = proc.net_connections(kind="tcp")
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            continue
        if any(c.raddr and c.raddr.port == quire.http_port for c in connections):
            proc.kill()
            killed.append(proc.pid)
            return


@pytest.mark.parametrize("exactly_once", [True, False])
def test_a_task_killed_mid_write_leaves_each_message_once(
    spark: Any, quire: Standalone, exactly_once: bool
) -> None:
    topic = _topic(quire, f"sink-killed-{exactly_once}".lower())
    df = spark.range(0, 600, 1, 2).selectExpr(
        "cast(id as string) as key", "cast(cast(id as string) as binary) as value"
    )
    killed: list[int] = []
    killer = threading.Thread(target=_kill_a_writer, args=(quire, topic, 100, killed))
    killer.start()
    try:
        _write(df, quire, topic=topic, exactlyOnce=str(exactly_once).lower(), messagesPerRequest="1")
    finally:
        killer.join(timeout=70)
    assert killed, "no sink task was killed"
    keys = sorted(int(m["key"]) for m in _rest(quire, topic))
    if exactly_once:
        assert keys == list(range(600))  # each once: the retry's repeats were dropped as duplicates
    else:
        assert len(keys) > 600 and set(keys) == set(range(600))  # at least once: the repeats stay
