"""Real Kafka clients against the listener with small fake handlers (Metadata, Produce,
InitProducerId; tests only): version negotiation and bootstrap, and produced batches of every
codec read back by the record codec. The synchronous clients run in a thread; every wait is
bounded."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import pytest
from confluent_kafka import Producer as ConfluentProducer
from confluent_kafka.admin import AdminClient

from app.kafka_listener.server import KafkaServer, RequestContext
from app.kafka_listener.versions import ADVERTISED, ApiKey
from common.kafka_records import HEADER_SIZE, parse_batches
from tests.kafka_listener.support import FakeProduce, init_producer_id_handler, metadata_handler

TOPIC = "quire-kafka"
CLIENT_S = 30.0


async def not_expected(ctx: RequestContext, request: Any) -> Any:
    raise AssertionError(f"API key {ctx.api_key} was not expected in this test")


@pytest.fixture
async def broker() -> AsyncIterator[tuple[KafkaServer, FakeProduce]]:
    """A listener advertising the whole table (so clients see what they will see in Quire);
    Metadata, Produce and InitProducerId answered by fakes, the rest never expected."""
    produce = FakeProduce()
    handlers: dict[int, Any] = {key: not_expected for key in ADVERTISED if key != ApiKey.API_VERSIONS}
    server: KafkaServer | None = None
    handlers[ApiKey.METADATA] = metadata_handler(lambda: server.port if server else 0, {TOPIC: 2})
    handlers[ApiKey.PRODUCE] = produce
    handlers[ApiKey.INIT_PRODUCER_ID] = init_producer_id_handler
    server = KafkaServer(handlers, port=0)
    await server.start()
    try:
        yield server, produce
    finally:
        await asyncio.wait_for(server.close(), 10)


def messages(n: int = 30) -> list[tuple[bytes, bytes]]:
    """Values that compress well even one by one: the clients send a batch uncompressed when
    compressing does not make it smaller, and how many records share a batch is up to timing."""
    return [(b"key-%d" % i, b"value-%d-" % i * (i % 4 + 20)) for i in range(n)]


def produced(produce: FakeProduce) -> list[tuple[bytes | None, bytes | None]]:
    records = []
    for partition in (0, 1):
        records += [(r.key, r.value) for r in produce.records.get((TOPIC, partition), [])]
    return records


async def test_kafka_python_infers_broker_2_3_and_produces_idempotently(
    broker: tuple[KafkaServer, FakeProduce],
) -> None:
    server, produce = broker

    def run() -> Any:
        from kafka import KafkaProducer
        from kafka.net.compat import KafkaNetClient

        client = KafkaNetClient(bootstrap_servers=f"127.0.0.1:{server.port}")
        try:
            version = client.check_version()
        finally:
            client.close()
        producer = KafkaProducer(bootstrap_servers=f"127.0.0.1:{server.port}", compression_type="gzip")
        try:
            for i, (key, value) in enumerate(messages()):
                producer.send(TOPIC, key=key, value=value, partition=i % 2)
            producer.flush(CLIENT_S)
        finally:
            producer.close(5)
        return version

    assert await asyncio.wait_for(asyncio.to_thread(run), CLIENT_S) == (2, 3)
    assert sorted(produced(produce)) == sorted(messages())
    assert produce.batches, "no batch produced"
    first = parse_batches(produce.batches[0][2])[0]
    assert (first.producer_id, first.producer_epoch, first.base_sequence, first.codec) == (4242, 0, 0, 1)


@pytest.mark.parametrize("codec", ["gzip", "snappy", "lz4", "zstd"])
async def test_aiokafka_produces_every_codec(broker: tuple[KafkaServer, FakeProduce], codec: str) -> None:
    from aiokafka import AIOKafkaProducer

    server, produce = broker
    producer = AIOKafkaProducer(
        bootstrap_servers=f"127.0.0.1:{server.port}", compression_type=codec, linger_ms=20
    )
    await asyncio.wait_for(producer.start(), CLIENT_S)
    try:
        sent = [producer.send(TOPIC, key=k, value=v, partition=i % 2) for i, (k, v) in enumerate(messages())]
        results = await asyncio.wait_for(asyncio.gather(*[await s for s in sent]), CLIENT_S)
    finally:
        await asyncio.wait_for(producer.stop(), CLIENT_S)
    assert sorted(produced(produce)) == sorted(messages())
    assert sorted(r.offset for r in results if r.partition == 0) == list(range(15))
    assert {parse_batches(raw)[0].codec for _, _, raw in produce.batches} == {
        ["gzip", "snappy", "lz4", "zstd"].index(codec) + 1
    }


@pytest.mark.parametrize("codec", ["none", "gzip", "snappy", "lz4", "zstd"])
async def test_confluent_kafka_produces_every_codec(
    broker: tuple[KafkaServer, FakeProduce], codec: str
) -> None:
    server, produce = broker

    def run() -> list[Any]:
        errors: list[Any] = []
        producer = ConfluentProducer(
            {"bootstrap.servers": f"127.0.0.1:{server.port}", "compression.type": codec, "linger.ms": 20}
        )
        for i, (key, value) in enumerate(messages()):
            producer.produce(
                TOPIC,
                key=key,
                value=value,
                partition=i % 2,
                on_delivery=lambda err, msg: errors.append(err) if err else None,
            )
        left = producer.flush(CLIENT_S)
        assert left == 0, f"{left} messages not delivered"
        return errors

    assert await asyncio.wait_for(asyncio.to_thread(run), CLIENT_S + 5) == []
    assert sorted(produced(produce)) == sorted(messages())
    codecs = {parse_batches(raw)[0].codec for _, _, raw in produce.batches}
    assert codecs == {["none", "gzip", "snappy", "lz4", "zstd"].index(codec)}
    if codec == "snappy":  # librdkafka writes raw snappy, the Java client and Python ones xerial's framing
        assert all(not raw[HEADER_SIZE:].startswith(b"\x82SNAPPY") for _, _, raw in produce.batches)


async def test_confluent_admin_client_lists_topics(broker: tuple[KafkaServer, FakeProduce]) -> None:
    server, _ = broker

    def run() -> Any:
        admin = AdminClient({"bootstrap.servers": f"127.0.0.1:{server.port}"})
        return admin.list_topics(timeout=10)

    metadata = await asyncio.wait_for(asyncio.to_thread(run), CLIENT_S)
    assert set(metadata.topics) == {TOPIC}
    assert sorted(metadata.topics[TOPIC].partitions) == [0, 1]
    assert metadata.brokers[1].port == server.port
