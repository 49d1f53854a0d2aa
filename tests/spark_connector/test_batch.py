"""Batch reads against the REST reader, and options refused before any job runs."""

from __future__ import annotations

import base64
import time
from typing import Any

import pytest

from tests.kafka_clients.support import Standalone

pytestmark = pytest.mark.spark


def _produce(quire: Standalone, topic: str, batches: list[list[dict[str, Any]]]) -> None:
    for batch in batches:
        r = quire.rest("POST", f"/v1/topics/{topic}/messages", json={"producer_name": "p", "messages": batch})
        assert r.status_code == 200, r.text


def _rest_rows(quire: Standalone, topic: str, **params: Any) -> set[tuple[Any, ...]]:
    rows = set()
    start = params.pop("start", "earliest")
    while True:
        query = {"start": start, "max_messages": 1000, "value_encoding": "base64", **params}
        body = quire.rest("GET", f"/v1/topics/{topic}/messages", params=query).json()
        for m in body["messages"]:
            props = tuple(sorted((m["properties"] or {}).items()))
            value = base64.b64decode(m["value"])
            rows.add((m["message_id"], m["key"], value, props, m["event_time"], m["publish_time"],
                      m["producer_name"], m["sequence_id"]))  # fmt: skip
        if not body["messages"] or body["next"] is None:
            return rows
        start = body["next"]


def _spark_rows(df: Any) -> set[tuple[Any, ...]]:
    out = set()
    for r in df.collect():
        event = None if r.eventTime is None else int(r.eventTime.timestamp() * 1000)
        out.add((r.messageId, r.key, bytes(r.value), tuple(sorted(r.properties.items())), event,
                 round(r.publishTime.timestamp() * 1000), r.producerName, r.sequenceId))  # fmt: skip
        assert r.valueString == (bytes(r.value).decode() if bytes(r.value) != b"\xff\xfe" else None)
    return out


def _read(spark: Any, quire: Standalone, **options: str) -> Any:
    reader = spark.read.format("quire").option("serviceUrl", quire.base_url)
    for k, v in options.items():
        reader = reader.option(k, v)
    return reader.load()


def test_batch_read_equals_the_rest_reader(spark: Any, quire: Standalone) -> None:
    topic = "public/default/events"
    batches = [
        [{"key": f"k{i}", "value": f"v{i}-{j}", "properties": {"n": str(j)},
          "event_time": 1_700_000_000_000 + i, "sequence_id": i * 10 + j} for j in range(5)]
        for i in range(12)
    ]  # fmt: skip
    batches.append([{"value": base64.b64encode(b"\xff\xfe").decode(), "value_encoding": "base64"}])
    _produce(quire, topic, batches[:6])
    assert quire.rest("PUT", f"/admin/v2/persistent/{topic}/unload").status_code == 204  # a second ledger
    middle = int(time.time() * 1000)
    time.sleep(0.05)
    _produce(quire, topic, batches[6:])
    expected = _rest_rows(quire, topic)
    assert len(expected) == 61

    df = _read(spark, quire, topic=topic, maxEntriesPerPartition="4")
    assert df.rdd.getNumPartitions() >= 4  # one Spark partition per ledger range of <= 4 entries
    assert _spark_rows(df) == expected

    # startingTime: the same messages as the REST reader's time: start
    assert _spark_rows(_read(spark, quire, topic=topic, startingTime=str(middle))) == _rest_rows(
        quire, topic, start=f"time:{middle}"
    )
    # an id range: start inclusive, end exclusive, ids mid-entry
    ids = sorted(expected, key=lambda r: tuple(int(x) for x in r[0].split(":")))
    lo, hi = ids[7][0], ids[40][0]
    part = _read(spark, quire, topic=topic, startingOffsets=f'{{"{topic}": "{lo}"}}',
                 endingOffsets=f'{{"{topic}": "{hi}"}}')  # fmt: skip
    assert _spark_rows(part) == set(ids[7:40])


def test_partitioned_topic_and_pattern(spark: Any, quire: Standalone) -> None:
    assert (
        quire.rest("PUT", "/admin/v2/persistent/public/default/orders/partitions", json=3).status_code == 204
    )
    _produce(quire, "public/default/orders", [[{"key": f"o{i}", "value": str(i)}] for i in range(30)])
    expected = _rest_rows(quire, "public/default/orders")
    df = _read(spark, quire, topicsPattern="public/default/ord.*")
    assert _spark_rows(df) == expected
    assert {r.partition for r in df.select("partition").distinct().collect()} == {0, 1, 2}


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"topic": "public/default/events"}, "serviceUrl"),
        ({"serviceUrl": "http://x", "topic": "a/b/c", "topics": "a/b/d"}, "exactly one of topic"),
        ({"topic": "no-namespace"}, "is not a topic name"),
        ({"topic": "public/default/events", "startingOffset": "earliest"}, "unknown read option"),
        ({"topic": "public/default/events", "startingOffsets": "{bad"}, "startingOffsets"),
        (
            {"topic": "public/default/events", "startingOffsets": '{"public/default/events": "1:x"}'},
            "message id",
        ),
        ({"topic": "public/default/events", "endingOffsets": "earliest"}, "endingOffsets"),
        ({"topic": "public/default/events", "maxMessagesPerTrigger": "5"}, "only a streaming query"),
        ({"topic": "public/default/events", "readCompacted": "yes"}, "not true or false"),
        ({"topicsPattern": "public/default/(["}, "bad regex"),
        ({"topic": "public/default/never-made"}, "does not exist"),
        (
            {"topic": "public/default/events", "startingOffsets": '{"public/default/other": "1:0:0"}'},
            "not among",
        ),
    ],
)
def test_bad_options_are_refused_before_any_job(
    spark: Any, quire: Standalone, options: dict[str, str], message: str
) -> None:
    from pyspark.errors import PySparkException

    spark.sparkContext.setJobGroup("bad-options", "bad options")
    reader = spark.read.format("quire")
    options = (
        {"serviceUrl": quire.base_url, **options}
        if "serviceUrl" not in options and message != "serviceUrl"
        else options
    )
    for k, v in options.items():
        reader = reader.option(k, v)
    with pytest.raises(PySparkException, match=message):
        reader.load().collect()  # load() checks the options; planning asks the broker
    assert spark.sparkContext.statusTracker().getJobIdsForGroup("bad-options") == []


def test_read_compacted_equals_the_compacted_view(spark: Any, quire: Standalone) -> None:
    topic = "public/default/prices"
    _produce(quire, topic, [[{"key": f"k{i % 7}", "value": f"v{i}"}] for i in range(40)])
    _produce(quire, topic, [[{"key": "k3", "value": ""}]])  # a tombstone
    quire.compact(["prices"])
    _produce(quire, topic, [[{"key": "k1", "value": "after"}]])  # the tail, after the horizon
    horizon = quire.rest("GET", f"/admin/v2/persistent/{topic}/internalStats").json()["compactionHorizon"]
    assert horizon is not None
    expected = _rest_rows(quire, topic, read_compacted="true")
    df = _read(spark, quire, topic=topic, readCompacted="true")
    assert _spark_rows(df) == expected
    assert len(expected) < 42  # the view dropped the overwritten ones
    flags = {r.messageId: r.fromCompactedView for r in df.select("messageId", "fromCompactedView").collect()}
    last = max(flags, key=lambda m: tuple(int(x) for x in m.split(":")))
    assert not flags[last] and all(v for m, v in flags.items() if m != last)
