"""The four Kafka clients behind one small interface, so that each scenario is written once and
run with every client: kcat (a subprocess, librdkafka 2.0.2), confluent-kafka (librdkafka 2.x),
kafka-python 3 and aiokafka 0.14 (run on an event loop of its own). Producers are idempotent
with acks=all; readers assign and seek (no group); admin calls use each client's own admin
client, kcat's go over REST. Every call is bounded by CLIENT_S."""

from __future__ import annotations

import asyncio
import os
import re
import subprocess
import tempfile
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any, Literal, TypeVar

CLIENT_S = 30.0
CLIENTS = ("kcat", "confluent", "kafka-python", "aiokafka")
ADMIN_CLIENTS = ("confluent", "kafka-python", "aiokafka")  # kcat has no admin: REST stands in

# kcat's output per message: a text line (partition, offset, timestamp, key length, value
# length, headers), then the key and value bytes as they are and a newline: binary-safe.
KCAT_FORMAT = "%p %o %T %K %S %h\\n%k%s\\n"

Start = int | Literal["beginning"]
T = TypeVar("T")


@dataclass(frozen=True)
class Out:
    """A record to produce: partition None lets the client's partitioner choose; timestamp None
    is the client's clock (CreateTime)."""

    key: bytes | None
    value: bytes | None
    headers: tuple[tuple[str, bytes], ...] = ()
    partition: int | None = None
    timestamp: int | None = None


@dataclass(frozen=True)
class Record:
    """A record as a consumer got it."""

    partition: int
    offset: int
    key: bytes | None
    value: bytes | None
    headers: tuple[tuple[str, bytes], ...]
    timestamp: int


def run_async(make: Callable[[], Awaitable[T]], timeout_s: float = CLIENT_S) -> T:
    """Run an aiokafka coroutine on a loop of its own, bounded."""

    async def bounded() -> T:
        return await asyncio.wait_for(make(), timeout_s)

    return asyncio.run(bounded())


# --- kcat ---------------------------------------------------------------------------------------


def kcat(bootstrap: str, *args: str, stdin: bytes = b"", timeout_s: float = CLIENT_S) -> bytes:
    """kcat's stdout; AssertionError (with its stderr) when it fails."""
    cmd = ["kcat", "-b", bootstrap, "-m", "15", *args]
    done = subprocess.run(cmd, input=stdin, capture_output=True, timeout=timeout_s, check=False)
    assert done.returncode == 0, f"{cmd} exited {done.returncode}: {done.stderr.decode(errors='replace')}"
    return done.stdout


KCAT_PRODUCER = ("-P", "-X", "enable.idempotence=true", "-X", "request.required.acks=-1")


def parse_kcat(out: bytes) -> list[Record]:
    records: list[Record] = []
    at = 0
    while at < len(out):
        end = out.index(b"\n", at)
        fields = out[at:end].decode().split(" ", 5)
        partition, offset, timestamp, key_size, value_size = (int(f) for f in fields[:5])
        headers = tuple(
            (name, value.encode()) for name, _, value in (h.partition("=") for h in fields[5].split(",") if h)
        )
        at = end + 1
        key = None if key_size < 0 else out[at : at + key_size]
        at += max(0, key_size)
        value = None if value_size < 0 else out[at : at + value_size]
        at += max(0, value_size)
        assert out[at : at + 1] == b"\n", f"kcat output out of step at byte {at}"
        at += 1
        records.append(Record(partition, offset, key, value, headers, timestamp))
    return records


def _kcat_produce(bootstrap: str, topic: str, messages: Sequence[Out]) -> None:
    """Runs of messages with the same headers and partition go in one kcat over stdin (key TAB
    value, one a line) when their bytes allow it; any other message goes alone, from a file."""
    run: list[Out] = []
    for m in [*messages, None]:
        if run and (m is None or (m.headers, m.partition) != (run[0].headers, run[0].partition)):
            _kcat_run(bootstrap, topic, run)
            run = []
        if m is None:
            break
        assert m.timestamp is None, "kcat cannot set a record's timestamp"
        if m.key is None or any(b in part for part in (m.key, m.value or b"") for b in (b"\t", b"\n")):
            _kcat_file(bootstrap, topic, m)
        else:
            run.append(m)


def _kcat_options(m: Out) -> list[str]:
    options = [] if m.partition is None else ["-p", str(m.partition)]
    for name, value in m.headers:
        options += ["-H", f"{name}={value.decode()}"]
    return options


def _kcat_run(bootstrap: str, topic: str, run: list[Out]) -> None:
    lines = b"".join(m.key + b"\t" + (m.value or b"") + b"\n" for m in run if m.key is not None)
    kcat(bootstrap, *KCAT_PRODUCER, "-t", topic, "-K", "\\t", *_kcat_options(run[0]), stdin=lines)


def _kcat_file(bootstrap: str, topic: str, m: Out) -> None:
    with tempfile.NamedTemporaryFile(prefix="kcat-") as f:
        f.write(m.value or b"")
        f.flush()
        key = [] if m.key is None else ["-k", m.key.decode()]
        kcat(bootstrap, *KCAT_PRODUCER, "-t", topic, *key, *_kcat_options(m), f.name)


# --- produce ------------------------------------------------------------------------------------


def produce(client: str, bootstrap: str, topic: str, messages: Sequence[Out]) -> None:
    """Send every message with an idempotent producer, acks=all, and wait for each ack."""
    if client == "kcat":
        _kcat_produce(bootstrap, topic, messages)
    elif client == "confluent":
        _confluent_produce(bootstrap, topic, messages)
    elif client == "kafka-python":
        _kafka_python_produce(bootstrap, topic, messages)
    else:
        run_async(lambda: _aiokafka_produce(bootstrap, topic, messages))


def _confluent_produce(bootstrap: str, topic: str, messages: Sequence[Out], **config: Any) -> None:
    from confluent_kafka import Producer

    errors: list[Any] = []
    producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True, "acks": "all", **config})
    for m in messages:
        producer.produce(
            topic,
            key=m.key,
            value=m.value,
            headers=list(m.headers),
            partition=-1 if m.partition is None else m.partition,
            timestamp=m.timestamp or 0,
            on_delivery=lambda err, _msg: errors.append(err) if err is not None else None,
        )
        producer.poll(0)
    assert producer.flush(CLIENT_S) == 0, "confluent-kafka: messages left unsent"
    assert not errors, errors


def _kafka_python_produce(bootstrap: str, topic: str, messages: Sequence[Out], **config: Any) -> None:
    from kafka import KafkaProducer

    producer = KafkaProducer(bootstrap_servers=bootstrap, acks="all", enable_idempotence=True, **config)
    try:
        futures = [
            producer.send(
                topic,
                key=m.key,
                value=m.value,
                headers=list(m.headers),
                partition=m.partition,
                timestamp_ms=m.timestamp,
            )
            for m in messages
        ]
        producer.flush(CLIENT_S)
        for future in futures:
            future.get(CLIENT_S)
    finally:
        producer.close(5)


async def _aiokafka_produce(bootstrap: str, topic: str, messages: Sequence[Out]) -> None:
    from aiokafka import AIOKafkaProducer

    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, acks="all", enable_idempotence=True)
    await producer.start()
    try:
        futures = [
            await producer.send(
                topic,
                key=m.key,
                value=m.value,
                headers=list(m.headers),
                partition=m.partition,
                timestamp_ms=m.timestamp,
            )
            for m in messages
        ]
        await asyncio.gather(*futures)
    finally:
        await producer.stop()


# --- read by offset (assign and seek, no group) -----------------------------------------------------


def read(client: str, bootstrap: str, topic: str, partition: int, start: Start = "beginning") -> list[Record]:
    """Every record of the partition from `start` to the end offset as the read begins."""
    if client == "kcat":
        return parse_kcat(
            kcat(
                bootstrap, "-C", "-t", topic, "-p", str(partition), "-o", str(start), "-e", "-f", KCAT_FORMAT
            )
        )
    if client == "confluent":
        return _confluent_read(bootstrap, topic, partition, start)
    if client == "kafka-python":
        return _kafka_python_read(bootstrap, topic, partition, start)
    return run_async(lambda: _aiokafka_read(bootstrap, topic, partition, start))


def confluent_record(m: Any) -> Record:
    return Record(m.partition(), m.offset(), m.key(), m.value(), tuple(m.headers() or ()), m.timestamp()[1])


def python_record(m: Any) -> Record:
    """A kafka-python or aiokafka ConsumerRecord."""
    return Record(m.partition, m.offset, m.key, m.value, tuple(m.headers or ()), m.timestamp)


def _confluent_read(bootstrap: str, topic: str, partition: int, start: Start) -> list[Record]:
    from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition

    consumer = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": f"reader-{os.getpid()}", "enable.auto.commit": False}
    )
    out: list[Record] = []
    try:
        low, end = consumer.get_watermark_offsets(TopicPartition(topic, partition), timeout=CLIENT_S)
        if (low if start == "beginning" else start) >= end:
            return out
        offset = OFFSET_BEGINNING if start == "beginning" else start
        consumer.assign([TopicPartition(topic, partition, offset)])
        deadline = time.monotonic() + CLIENT_S
        while consumer.position([TopicPartition(topic, partition)])[0].offset < end:
            assert time.monotonic() < deadline, f"confluent-kafka read {out} of {topic}[{partition}] to {end}"
            m = consumer.poll(0.2)
            if m is not None:
                assert m.error() is None, m.error()
                out.append(confluent_record(m))
    finally:
        consumer.close()
    return out


def _kafka_python_read(bootstrap: str, topic: str, partition: int, start: Start) -> list[Record]:
    from kafka import KafkaConsumer, TopicPartition

    consumer = KafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False)
    tp = TopicPartition(topic, partition)
    out: list[Record] = []
    try:
        end = consumer.end_offsets([tp])[tp]
        consumer.assign([tp])
        if start == "beginning":
            consumer.seek_to_beginning(tp)
        else:
            consumer.seek(tp, start)
        deadline = time.monotonic() + CLIENT_S
        while consumer.position(tp) < end:
            assert time.monotonic() < deadline, f"kafka-python read {out} of {topic}[{partition}] to {end}"
            for records in consumer.poll(200).values():
                out += [python_record(m) for m in records]
    finally:
        consumer.close()
    return out


async def _aiokafka_read(bootstrap: str, topic: str, partition: int, start: Start) -> list[Record]:
    from aiokafka import AIOKafkaConsumer, TopicPartition

    consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False)
    await consumer.start()
    tp = TopicPartition(topic, partition)
    out: list[Record] = []
    try:
        end = (await consumer.end_offsets([tp]))[tp]
        consumer.assign([tp])
        if start == "beginning":
            await consumer.seek_to_beginning(tp)
        else:
            consumer.seek(tp, start)
        while await consumer.position(tp) < end:
            for records in (await consumer.getmany(tp, timeout_ms=200)).values():
                out += [python_record(m) for m in records]
    finally:
        await consumer.stop()
    return out


# --- offsets -------------------------------------------------------------------------------------


def offset_for_time(client: str, bootstrap: str, topic: str, partition: int, timestamp: int) -> int | None:
    """The first offset at or after the time (None: none), by the client's offsetsForTimes
    (kcat: the first record read from `-o s@<time>`)."""
    if client == "kcat":
        args = ["-C", "-t", topic, "-p", str(partition), "-o", f"s@{timestamp}", "-c", "1", "-e"]
        records = parse_kcat(kcat(bootstrap, *args, "-f", KCAT_FORMAT))
        return records[0].offset if records else None
    if client == "confluent":
        from confluent_kafka import Consumer, TopicPartition

        consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "times"})
        try:
            found = consumer.offsets_for_times([TopicPartition(topic, partition, timestamp)], CLIENT_S)[0]
        finally:
            consumer.close()
        assert found.error is None, found.error
        return None if found.offset < 0 else int(found.offset)
    if client == "kafka-python":
        from kafka import KafkaConsumer
        from kafka import TopicPartition as KafkaPythonTP

        kp_consumer = KafkaConsumer(bootstrap_servers=bootstrap)
        tp = KafkaPythonTP(topic, partition)
        try:
            hit = kp_consumer.offsets_for_times({tp: timestamp})[tp]
        finally:
            kp_consumer.close()
        return None if hit is None else int(hit.offset)
    return run_async(lambda: _aiokafka_offset_for_time(bootstrap, topic, partition, timestamp))


async def _aiokafka_offset_for_time(bootstrap: str, topic: str, partition: int, timestamp: int) -> int | None:
    from aiokafka import AIOKafkaConsumer, TopicPartition

    consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap)
    await consumer.start()
    tp = TopicPartition(topic, partition)
    try:
        hit = (await consumer.offsets_for_times({tp: timestamp}))[tp]
    finally:
        await consumer.stop()
    return None if hit is None else int(hit.offset)


def bounds(client: str, bootstrap: str, topic: str, partition: int) -> tuple[int, int]:
    """(beginning, end) offsets of the partition as the client sees them (kcat: ListOffsets by
    -o beginning's first record, and the query mode's latest)."""
    if client == "kcat":
        first = parse_kcat(
            kcat(
                bootstrap,
                "-C",
                "-t",
                topic,
                "-p",
                str(partition),
                "-o",
                "beginning",
                "-c",
                "1",
                "-e",
                "-f",
                KCAT_FORMAT,
            )
        )
        latest = kcat(bootstrap, "-Q", "-t", f"{topic}:{partition}:-1").decode()
        end = int(re.findall(r"offset (-?\d+)", latest)[0])
        return (first[0].offset if first else end), end
    if client == "confluent":
        from confluent_kafka import Consumer, TopicPartition

        consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "bounds"})
        try:
            low, high = consumer.get_watermark_offsets(TopicPartition(topic, partition), timeout=CLIENT_S)
        finally:
            consumer.close()
        return int(low), int(high)
    if client == "kafka-python":
        from kafka import KafkaConsumer
        from kafka import TopicPartition as KafkaPythonTP

        kp_consumer = KafkaConsumer(bootstrap_servers=bootstrap)
        tp = KafkaPythonTP(topic, partition)
        try:
            return kp_consumer.beginning_offsets([tp])[tp], kp_consumer.end_offsets([tp])[tp]
        finally:
            kp_consumer.close()
    return run_async(lambda: _aiokafka_bounds(bootstrap, topic, partition))


async def _aiokafka_bounds(bootstrap: str, topic: str, partition: int) -> tuple[int, int]:
    from aiokafka import AIOKafkaConsumer, TopicPartition

    consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap)
    await consumer.start()
    tp = TopicPartition(topic, partition)
    try:
        return (await consumer.beginning_offsets([tp]))[tp], (await consumer.end_offsets([tp]))[tp]
    finally:
        await consumer.stop()
