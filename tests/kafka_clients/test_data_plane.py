"""The four Kafka clients against a real `quire standalone`, without groups: offsets by time,
DeleteRecords, REST and Kafka on the same topic byte for byte, idempotent producers with five
requests in flight, a corrupt batch over a raw socket to the full listener, and compacted topics.

Compaction: a topic per client created with cleanup.policy=compact (the client's admin client;
kcat's over REST's compactionPolicy), several values per key and a tombstone produced over
Kafka, one compaction run per topic asked for over REST, then a tail. A reader from the
beginning gets the latest value of each live key at its original offset, then the tail. The
compactor uses Spark, whose session takes 10-30 s to warm up (minutes on a loaded machine): the
topics are written and their runs asked for before any other test (an autouse fixture), so the
warm-up overlaps the other tests, and the compaction tests come last."""

from __future__ import annotations

import base64
import datetime
import random
import time
from collections.abc import Iterator
from dataclasses import dataclass, field

import pytest
from kio.schema.fetch.v11.request import FetchPartition, FetchRequest, FetchTopic
from kio.schema.metadata.v5.request import MetadataRequest, MetadataRequestTopic
from kio.schema.produce.v7.request import PartitionProduceData, ProduceRequest, TopicProduceData

from app.kafka_listener.errors import ErrorCode
from tests.kafka_clients.admin import create_topic, delete_records
from tests.kafka_clients.clients import (
    ADMIN_CLIENTS,
    CLIENTS,
    Out,
    _confluent_produce,
    _kafka_python_produce,
    bounds,
    offset_for_time,
    produce,
    read,
)
from tests.kafka_clients.support import Standalone, rest_value
from tests.kafka_listener.support import RawClient

T0 = 1_700_000_000_000


def now_ms() -> int:
    return int(time.time() * 1000)


def keyed(prefix: str, count: int, start: int = 0) -> list[Out]:
    return [
        Out(b"key-%d" % i, f"{prefix}-{i}".encode(), (("n", b"%d" % i),)) for i in range(start, start + count)
    ]


@pytest.mark.parametrize("client", CLIENTS)
def test_offsets_for_times_find_the_first_offset_after_the_time(quire: Standalone, client: str) -> None:
    topic = f"times-{client}"
    produce(client, quire.bootstrap, topic, keyed("before", 3))
    time.sleep(0.05)
    mark = now_ms()
    time.sleep(0.05)
    produce(client, quire.bootstrap, topic, keyed("after", 4, 3))
    assert offset_for_time(client, quire.bootstrap, topic, 0, mark) == 3
    assert offset_for_time(client, quire.bootstrap, topic, 0, 0) == 0
    assert offset_for_time(client, quire.bootstrap, topic, 0, now_ms() + 60_000) is None
    got = read(client, quire.bootstrap, topic, 0, 3)
    assert [(r.offset, r.value) for r in got] == [(i, b"after-%d" % i) for i in range(3, 7)]


def test_offsets_for_times_answer_the_time_of_the_entry_found(quire: Standalone) -> None:
    """Kafka answers the found record's time, not the time asked for: Quire the entry's publish
    time, the key it searched by (REST shows it as publish_time)."""
    from kafka import KafkaConsumer, TopicPartition

    topic = "times-answered"
    produce("kafka-python", quire.bootstrap, topic, keyed("before", 2))
    time.sleep(0.05)
    mark = now_ms()
    time.sleep(0.05)
    produce("kafka-python", quire.bootstrap, topic, keyed("after", 2, 2))
    consumer = KafkaConsumer(bootstrap_servers=quire.bootstrap)
    tp = TopicPartition(topic, 0)
    try:
        found = consumer.offsets_for_times({tp: mark})[tp]
    finally:
        consumer.close()
    published = quire.rest_read(topic)[2]["publish_time"]
    assert (found.offset, found.timestamp) == (2, published)
    assert found.timestamp > mark


@pytest.mark.parametrize("client", ADMIN_CLIENTS)
def test_delete_records_moves_the_beginning_for_every_reader(quire: Standalone, client: str) -> None:
    topic = f"delete-{client}"
    produce(client, quire.bootstrap, topic, keyed("v", 10))
    assert delete_records(client, quire.bootstrap, topic, 0, 4) == 4
    assert bounds(client, quire.bootstrap, topic, 0) == (4, 10)
    expected = [(i, b"v-%d" % i) for i in range(4, 10)]
    for reader in CLIENTS:  # a consumer from the beginning starts at 4, whichever client
        assert [(r.offset, r.value) for r in read(reader, quire.bootstrap, topic, 0)] == expected, reader
    assert [rest_value(m) for m in quire.rest_read(topic)] == [value for _, value in expected]
    assert delete_records(client, quire.bootstrap, topic, 0, 2) == 4  # not back before the start


def binary_values(count: int) -> list[bytes]:
    """Values no text encoding would carry: every byte value, NULs, newlines, tabs, colons."""
    rng = random.Random(7)
    return [bytes(range(256)), b"\x00\n\t:\r\xff"] + [
        rng.randbytes(rng.randrange(1, 300)) for _ in range(count - 2)
    ]


@pytest.mark.parametrize("client", CLIENTS)
def test_rest_in_kafka_out_byte_for_byte(quire: Standalone, client: str) -> None:
    topic = f"rest-in-{client}"
    values = binary_values(6)
    quire.rest_produce(
        topic,
        [
            {
                "key": f"key-{i}",
                "value": base64.b64encode(v).decode(),
                "value_encoding": "base64",
                "properties": {"source": "rest", "i": str(i)},
                "event_time": T0 + i,
            }
            for i, v in enumerate(values)
        ],
    )
    got = read(client, quire.bootstrap, topic, 0)
    assert [(r.offset, r.key, r.value, dict(r.headers), r.timestamp) for r in got] == [
        (i, b"key-%d" % i, v, {"source": b"rest", "i": b"%d" % i}, T0 + i) for i, v in enumerate(values)
    ]


@pytest.mark.parametrize("client", CLIENTS)
def test_kafka_in_rest_out_byte_for_byte(quire: Standalone, client: str) -> None:
    topic = f"kafka-in-{client}"
    values = binary_values(6)
    stamped = client != "kcat"  # kcat cannot set a record's time: its producer's clock is checked
    sent = [
        Out(b"key-%d" % i, v, (("source", b"kafka"), ("i", b"%d" % i)), timestamp=T0 + i if stamped else None)
        for i, v in enumerate(values)
    ]
    produce(client, quire.bootstrap, topic, sent)
    times = [T0 + i for i in range(len(values))]
    if not stamped:
        times = [r.timestamp for r in read(client, quire.bootstrap, topic, 0)]
        assert all(abs(t - now_ms()) < 120_000 for t in times), times
    rows = quire.rest_read(topic)
    assert [(m["key"], rest_value(m), m["properties"], m["event_time"]) for m in rows] == [
        (f"key-{i}", v, {"source": "kafka", "i": str(i)}, times[i]) for i, v in enumerate(values)
    ]


@pytest.mark.parametrize("client", ["kafka-python", "confluent"])
def test_idempotent_producer_with_five_in_flight_writes_each_record_once(
    quire: Standalone, client: str
) -> None:
    topic = f"idempotent-{client}"
    count = 3000
    sent = [Out(b"k%d" % (i % 17), b"value-%06d" % i) for i in range(count)]
    if client == "kafka-python":
        config = {"max_in_flight_requests_per_connection": 5, "batch_size": 512, "linger_ms": 2}
        _kafka_python_produce(quire.bootstrap, topic, sent, **config)
    else:
        config = {"max.in.flight": 5, "batch.num.messages": 10, "linger.ms": 2}
        _confluent_produce(quire.bootstrap, topic, sent, **config)
    assert bounds(client, quire.bootstrap, topic, 0) == (0, count)
    got = read(client, quire.bootstrap, topic, 0)
    assert [r.offset for r in got] == list(range(count))
    assert [r.value for r in got] == [m.value for m in sent]
    stats = quire.admin("GET", topic, "internalStats").json()
    assert stats["numberOfEntries"] > 20, "the records went in many batches"


def kafka_python_batch(values: list[bytes]) -> bytes:
    from kafka.record.default_records import DefaultRecordBatchBuilder

    builder = DefaultRecordBatchBuilder(
        magic=2,
        compression_type=0,
        is_transactional=False,
        producer_id=-1,
        producer_epoch=-1,
        base_sequence=-1,
        batch_size=2**20,
    )
    for i, value in enumerate(values):
        builder.append(i, timestamp=now_ms(), key=b"k", value=value, headers=[])
    return bytes(builder.build())


def produce_request(topic: str, batch: bytes, partition: int = 0) -> ProduceRequest:
    data = PartitionProduceData(index=partition, records=batch)
    return ProduceRequest(
        transactional_id=None,
        acks=-1,
        timeout=datetime.timedelta(seconds=10),
        topic_data=(TopicProduceData(name=topic, partition_data=(data,)),),
    )


def partition_results(response: ProduceRequest) -> list[tuple[int, int]]:
    return [(p.error_code, p.base_offset) for t in response.responses for p in t.partition_responses]  # type: ignore[attr-defined]


async def test_a_corrupt_batch_gets_corrupt_message_and_the_listener_goes_on(quire: Standalone) -> None:
    topic = "corrupt"
    assert quire.admin("PUT", topic).status_code == 204
    good = kafka_python_batch([b"one", b"two"])
    bad = bytearray(good)
    bad[-2] ^= 0xFF  # a byte of the last record: the CRC-32C no longer matches
    first, second = await RawClient.connect(quire.kafka_port), await RawClient.connect(quire.kafka_port)
    try:
        assert partition_results(await first.call(produce_request(topic, bytes(bad)), 1)) == [
            (ErrorCode.CORRUPT_MESSAGE, -1)
        ]
        assert partition_results(await second.call(produce_request(topic, good), 1)) == [(ErrorCode.NONE, 0)]
        metadata = await first.call(
            MetadataRequest(topics=(MetadataRequestTopic(name=topic),), allow_auto_topic_creation=False), 2
        )
        assert [(t.name, t.error_code) for t in metadata.topics] == [(topic, ErrorCode.NONE)]
        assert partition_results(await first.call(produce_request(topic, good), 3)) == [(ErrorCode.NONE, 2)]
    finally:
        await first.close()
        await second.close()
    assert [r.value for r in read("kafka-python", quire.bootstrap, topic, 0)] == [b"one", b"two"] * 2
    assert len(quire.rest_read(topic)) == 4


async def test_a_fetch_over_its_max_bytes_gives_data_of_the_first_partition_only(quire: Standalone) -> None:
    """Kafka's rule: only the first partition with data may exceed the request's max_bytes."""
    topic = "fetch-budget"
    create_topic("kafka-python", quire, topic, partitions=2)
    big = kafka_python_batch([b"x" * 1_000])
    client = await RawClient.connect(quire.kafka_port)
    try:
        for partition in (0, 1):
            produced = await client.call(produce_request(topic, big, partition), 1 + partition)
            assert partition_results(produced) == [(ErrorCode.NONE, 0)]
        partitions = tuple(
            FetchPartition(partition=p, fetch_offset=0, log_start_offset=-1, partition_max_bytes=1 << 20)
            for p in (0, 1)
        )
        fetch = FetchRequest(
            replica_id=-1, max_wait=datetime.timedelta(milliseconds=0), min_bytes=1,
            max_bytes=len(big) + 500, isolation_level=0, session_id=0, session_epoch=-1,
            topics=(FetchTopic(topic=topic, partitions=partitions),), forgotten_topics_data=(), rack_id="",
        )  # fmt: skip
        answer = await client.call(fetch, 3)
        got = {
            p.partition_index: (p.error_code, p.high_watermark, len(p.records or b""))
            for t in answer.responses  # type: ignore[attr-defined]
            for p in t.partitions
        }
        assert got[0][:2] == got[1][:2] == (ErrorCode.NONE, 1)
        assert got[0][2] >= len(big) and got[1][2] == 0, got
    finally:
        await client.close()


async def test_a_fetch_with_min_bytes_0_is_answered_at_once(quire: Standalone) -> None:
    """Kafka: min_bytes 0 means answer now, data or not (no long poll up to max_wait)."""
    topic = "fetch-now"
    create_topic("kafka-python", quire, topic)
    client = await RawClient.connect(quire.kafka_port)
    try:
        fetch = FetchRequest(
            replica_id=-1, max_wait=datetime.timedelta(seconds=600), min_bytes=0, max_bytes=1 << 20,
            isolation_level=0, session_id=0, session_epoch=-1, forgotten_topics_data=(), rack_id="",
            topics=(FetchTopic(topic=topic, partitions=(FetchPartition(
                partition=0, fetch_offset=0, log_start_offset=-1, partition_max_bytes=1 << 20),)),),
        )  # fmt: skip
        answer = await client.call(fetch, 1)  # the raw client waits WAIT_S at most, far below 600 s
        (partition,) = answer.responses[0].partitions
        assert (partition.error_code, partition.high_watermark) == (ErrorCode.NONE, 0)
    finally:
        await client.close()


# --- compacted topics (last: their runs were asked for first) -----------------------------------

KEYS = [b"apple", b"pear", b"plum"]
ROUNDS = 3
GONE = b"gone"  # written, then a tombstone: compaction drops the key


def history() -> list[Out]:
    """Offsets 0..8: three rounds over the keys; 9, 10: a value of GONE, then its tombstone."""
    out = [
        Out(key, b"%s-round-%d" % (key, r), (("round", b"%d" % r),)) for r in range(ROUNDS) for key in KEYS
    ]
    return [*out, Out(GONE, b"soon gone"), Out(GONE, None)]


# Keys and a header value that are not UTF-8 (an Avro or Protobuf key often is not): two keys
# that differ in their first byte.
BINARY_KEYS = "compacted-binary-keys"
BINARY = [Out(b"\xff\x01", b"A", (("h", b"\xff\xfe"),)), Out(b"\xfe\x01", b"B"), Out(b"text", b"C")]

TAIL = [Out(b"late-%d" % i, b"after compaction %d" % i, (("tail", b"yes"),)) for i in range(2)]


@dataclass
class Prepared:
    errors: dict[str, BaseException] = field(default_factory=dict)
    accepted: set[str] = field(default_factory=set)  # topics whose run was asked for already


def topic_of(client: str) -> str:
    return f"compacted-{client}"


@pytest.fixture(scope="module", autouse=True)
def compaction_asked(quire: Standalone) -> Prepared:
    """Before any other test: every client's compacted topic written and its run asked for."""
    state = Prepared()
    for client in CLIENTS:
        try:
            create_topic(client, quire, topic_of(client), configs={"cleanup.policy": "compact"})
            produce(client, quire.bootstrap, topic_of(client), history())
        except Exception as exc:
            state.errors[client] = exc
    try:
        create_topic("confluent", quire, BINARY_KEYS, configs={"cleanup.policy": "compact"})
        produce("confluent", quire.bootstrap, BINARY_KEYS, BINARY)
    except Exception as exc:
        state.errors[BINARY_KEYS] = exc
    state.accepted = quire.request_compaction(t for t in compacted_topics() if t not in state.errors)
    return state


def compacted_topics() -> list[str]:
    return [*(topic_of(c) for c in CLIENTS), BINARY_KEYS]


@pytest.fixture(scope="module")
def prepared(quire: Standalone, compaction_asked: Prepared) -> Iterator[Prepared]:
    """The runs waited for, then every topic given its tail; a client whose setup failed has its
    error kept for its own test."""
    state = compaction_asked
    ready = [c for c in CLIENTS if c not in state.errors]
    binary = [] if BINARY_KEYS in state.errors else [BINARY_KEYS]
    quire.compact([*(topic_of(c) for c in ready), *binary], state.accepted)
    for client in ready:
        try:
            produce(client, quire.bootstrap, topic_of(client), TAIL)
        except Exception as exc:
            state.errors[client] = exc
    yield state


# The compactor's Spark session can take minutes to warm up on a loaded machine.
@pytest.mark.timeout(600)
@pytest.mark.parametrize("client", CLIENTS)
def test_a_reader_gets_the_latest_value_per_key_at_its_offset_then_the_tail(
    quire: Standalone, prepared: Prepared, client: str
) -> None:
    if client in prepared.errors:
        raise AssertionError(f"{client}: setting up its compacted topic failed") from prepared.errors[client]
    got = read(client, quire.bootstrap, topic_of(client), 0)
    last_round = ROUNDS - 1
    expected = [
        (last_round * len(KEYS) + i, key, b"%s-round-%d" % (key, last_round), {"round": b"%d" % last_round})
        for i, key in enumerate(KEYS)
    ]
    expected += [(11 + i, m.key, m.value, {"tail": b"yes"}) for i, m in enumerate(TAIL)]
    assert [(r.offset, r.key, r.value, dict(r.headers)) for r in got] == expected


@pytest.mark.timeout(600)
def test_the_compacted_view_is_what_rest_reads_compacted(quire: Standalone, prepared: Prepared) -> None:
    """REST's read_compacted view of a Kafka-written topic agrees with what Kafka readers get."""
    client = next(c for c in CLIENTS if c not in prepared.errors)
    rows = quire.rest_read(topic_of(client), read_compacted="true")
    assert [(m["key"], m["properties"]) for m in rows] == [
        *[(key.decode(), {"round": str(ROUNDS - 1)}) for key in KEYS],
        *[(m.key.decode(), {"tail": "yes"}) for m in TAIL if m.key is not None],
    ]


@pytest.mark.timeout(600)
def test_binary_keys_stay_distinct_and_intact_through_compaction(
    quire: Standalone, prepared: Prepared
) -> None:
    if BINARY_KEYS in prepared.errors:
        pytest.fail(f"setting up the topic failed: {prepared.errors[BINARY_KEYS]!r}")
    got = read("confluent", quire.bootstrap, BINARY_KEYS, 0)
    assert [(r.offset, r.key, r.value, r.headers) for r in got] == [
        (i, m.key, m.value, m.headers) for i, m in enumerate(BINARY)
    ]
