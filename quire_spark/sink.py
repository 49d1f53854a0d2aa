"""The sink: rows with `value` (and optional `key`, `properties`, `eventTime`, `topic`) produced
to topics through `POST /messages`, exactly once across task retries and query restarts.

Exactly once rests on the broker's producer deduplication (the topic's `deduplicationEnabled`):
each Spark task produces as one producer whose name is stable for the write and the task's
partition (`{producerName}-{partition}`), numbering its rows' sequence ids from a base that only
depends on the micro-batch (`batch_id << 32`; 0 for a batch write) plus the row's place in the
partition. A retried task, or the same micro-batch run again after a restart from the checkpoint,
produces the same names and numbers, and the broker drops what it already stored. That holds
when a retried task sees its partition's rows in the same order: true of a partition read from a
source, of a sorted one, and of Spark's own retries of the same stage output; a partition whose
order depends on a non-deterministic shuffle may be numbered differently on retry.
"""

from __future__ import annotations

import base64
import hashlib
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
from pyspark.sql.datasource import (
    DataSourceArrowWriter,
    DataSourceStreamArrowWriter,
    WriterCommitMessage,
)
from pyspark.sql.types import BinaryType, LongType, MapType, StringType, StructType, TimestampType

from quire_spark.errors import QuireOptionError, QuireServiceError
from quire_spark.options import WriteOptions, topic_name
from quire_spark.service import Service

SEQUENCE_BITS = 32  # rows per partition and micro-batch, at most 2**32
RETRY_S = 60.0
_COLUMNS = {
    "value": (BinaryType, StringType),
    "key": (StringType,),
    "properties": (MapType,),
    "eventTime": (TimestampType, LongType),
    "topic": (StringType,),
}


@dataclass
class QuireCommitMessage(WriterCommitMessage):  # type: ignore[misc]
    partition: int
    written: int
    duplicates: int


def check_schema(schema: StructType, options: WriteOptions) -> None:
    names = {f.name: f for f in schema.fields}
    if "value" not in names:
        raise QuireOptionError("the DataFrame needs a `value` column (binary or string)")
    for name, field in names.items():
        kinds = _COLUMNS.get(name)
        if kinds is None:
            raise QuireOptionError(f"column {name!r} is not one the sink writes: {sorted(_COLUMNS)}")
        if not isinstance(field.dataType, kinds):
            wanted = " or ".join(k.__name__ for k in kinds)
            raise QuireOptionError(f"column {name!r} is {field.dataType.simpleString()}, not {wanted}")
    if options.topic is None and "topic" not in names:
        raise QuireOptionError("name the topic: the `topic` option or a `topic` column")


def check_dedup(service: Service, topic: str) -> None:
    enabled = service.call("GET", f"/admin/v2/persistent/{topic}/deduplicationEnabled", ok=(200, 404))
    if enabled.status_code == 404 or enabled.json() is not True:
        raise QuireOptionError(
            f"exactlyOnce needs deduplication on topic {topic!r} (POST .../deduplicationEnabled true); "
            "or set exactlyOnce=false"
        )


def _message(row: dict[str, Any], seq: int | None) -> dict[str, Any]:
    value = row.get("value")
    m: dict[str, Any] = {}
    if isinstance(value, str):
        m["value"], m["value_encoding"] = value, "text"
    else:
        m["value"], m["value_encoding"] = base64.b64encode(value or b"").decode("ascii"), "base64"
    if row.get("key") is not None:
        m["key"] = row["key"]
    props = row.get("properties")
    if props:
        m["properties"] = dict(props)
    event_time = row.get("eventTime")
    if event_time is not None:
        m["event_time"] = (
            int(event_time.timestamp() * 1000) if hasattr(event_time, "timestamp") else int(event_time)
        )
    if seq is not None:
        m["sequence_id"] = seq
    return m


class _Producer:
    """One task's producer: sequence ids per topic from `base`, requests of `n` messages."""

    def __init__(self, options: WriteOptions, name: str | None, base: int) -> None:
        self.options = options
        self.name = name
        self.base = base
        self.next_seq: dict[str, int] = {}
        self.pending: dict[str, list[dict[str, Any]]] = {}
        self.written = self.duplicates = 0
        self.service = Service(options.service_url, options.token)
        self.checked: set[str] = set()

    def add(self, row: dict[str, Any]) -> None:
        topic = row.get("topic") or self.options.topic
        if topic is None:
            raise QuireOptionError("a row has no topic (null `topic` and no `topic` option)")
        if topic not in self.checked:
            topic_name(topic, "topic column")
            if self.name is not None:
                check_dedup(self.service, topic)
            self.checked.add(topic)
        seq = None
        if self.name is not None:
            seq = self.base + self.next_seq.get(topic, 0)
            self.next_seq[topic] = self.next_seq.get(topic, 0) + 1
        batch = self.pending.setdefault(topic, [])
        batch.append(_message(row, seq))
        if len(batch) >= self.options.messages_per_request:
            self.flush(topic)

    def flush(self, topic: str) -> None:
        messages = self.pending.pop(topic, [])
        if not messages:
            return
        body: dict[str, Any] = {"messages": messages}
        if self.name is not None:
            body["producer_name"] = self.name
        deadline = time.monotonic() + RETRY_S
        while True:
            try:
                results = self.service.produce(topic, body)
                break
            except QuireServiceError as exc:
                # 503: the broker cannot tell yet whether an earlier write of these ids is stored
                if time.monotonic() > deadline or not any(
                    f": {c} " in str(exc) for c in (429, 502, 503, 504)
                ):
                    raise
                time.sleep(0.2)
        dup = sum(1 for r in results if r["duplicate"])
        self.duplicates += dup
        self.written += len(results) - dup

    def finish(self) -> None:
        for topic in list(self.pending):
            self.flush(topic)
        self.service.close()


def _partition_id() -> int:
    from pyspark import TaskContext

    ctx = TaskContext.get()
    return ctx.partitionId() if ctx is not None else 0


def _write(
    options: WriteOptions, prefix: str | None, base: int, batches: Iterator[pa.RecordBatch]
) -> QuireCommitMessage:
    partition = _partition_id()
    name = f"{prefix}-{partition}" if prefix is not None and options.exactly_once else None
    producer = _Producer(options, name, base)
    try:
        for batch in batches:
            for row in batch.to_pylist():
                producer.add(row)
        producer.finish()
    finally:
        producer.service.close()
    return QuireCommitMessage(partition, producer.written, producer.duplicates)


class QuireBatchWriter(DataSourceArrowWriter):  # type: ignore[misc]
    """A batch write: one producer name per write (the `producerName` option, or a fresh one, so
    a task retry within this write is deduplicated; give producerName to make a re-run of the
    same job a no-op too)."""

    def __init__(self, options: WriteOptions, schema: StructType) -> None:
        check_schema(schema, options)
        self.options = options
        self.prefix = options.producer_name or f"spark-{uuid.uuid4().hex[:12]}"
        if options.topic is not None and options.exactly_once:
            with Service(options.service_url, options.token) as service:
                check_dedup(service, options.topic)
        self.results: list[QuireCommitMessage] = []

    def write(self, iterator: Iterator[pa.RecordBatch]) -> QuireCommitMessage:
        return _write(self.options, self.prefix, 0, iterator)

    def commit(self, messages: list[WriterCommitMessage | None]) -> None:
        """The messages are stored already (each as its request returned): nothing to publish."""

    def abort(self, messages: list[WriterCommitMessage | None]) -> None:
        """What the failed write's tasks produced stays: a re-run with the same producerName
        completes it without duplicates."""


def stream_producer_name(options: WriteOptions, raw: dict[str, str]) -> str:
    """The stable producer name of a streaming query: producerName, else one derived from the
    checkpoint location (the query's identity across restarts)."""
    if options.producer_name is not None:
        return options.producer_name
    checkpoint = {k.lower(): v for k, v in raw.items()}.get("checkpointlocation")
    if checkpoint is None:
        if options.exactly_once:
            raise QuireOptionError(
                "a streaming write needs a stable producerName (or a checkpointLocation option to derive "
                "it from) for exactly once; or set exactlyOnce=false"
            )
        return "unused"
    return "spark-" + hashlib.sha256(checkpoint.encode()).hexdigest()[:16]


class QuireStreamWriter(DataSourceStreamArrowWriter):  # type: ignore[misc]
    """A streaming write: micro-batch b's rows carry sequence ids from b << 32 (Spark names the
    batch in the task's local property `streaming.sql.batchId`); commit receives the batch id."""

    def __init__(self, options: WriteOptions, schema: StructType, raw: dict[str, str]) -> None:
        check_schema(schema, options)
        self.options = options
        self.prefix = stream_producer_name(options, raw)
        if options.topic is not None and options.exactly_once:
            with Service(options.service_url, options.token) as service:
                check_dedup(service, options.topic)
        self.committed: list[int] = []

    def write(self, iterator: Iterator[pa.RecordBatch]) -> QuireCommitMessage:
        from pyspark import TaskContext

        ctx = TaskContext.get()
        batch_id = ctx.getLocalProperty("streaming.sql.batchId") if ctx is not None else None
        if batch_id is None:
            raise QuireServiceError("no micro-batch id in the task (streaming.sql.batchId)")
        return _write(self.options, self.prefix, int(batch_id) << SEQUENCE_BITS, iterator)

    def commit(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        self.committed.append(batchId)

    def abort(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        """Produced rows stay; the batch run again after a restart is deduplicated."""
