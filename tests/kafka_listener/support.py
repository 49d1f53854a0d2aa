"""Helpers of the Kafka listener's tests: a raw TCP client speaking frames, request encoding, and
small fake handlers (Metadata, Produce, InitProducerId) enough for real clients to bootstrap
and produce. Every wait is bounded."""

from __future__ import annotations

import asyncio
import dataclasses
import datetime
import struct
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager, suppress
from typing import Any

from kio.index import load_payload_module, load_response_schema
from kio.serial import entity_reader
from kio.static.constants import EntityType

from app.kafka_listener import wire
from app.kafka_listener.errors import ErrorCode
from app.kafka_listener.server import Handler, KafkaServer, RequestContext
from app.kafka_listener.versions import ApiKey
from common.kafka_records import RecordBatchError, decode_records, parse_produced_batch

WAIT_S = 5.0


def encode_request(request: Any, correlation_id: int, client_id: str | None = "test") -> bytes:
    """A whole request frame (size prefix included) for a kio request object."""
    return wire.encode_request(request, correlation_id, client_id)


def raw_frame(api_key: int, api_version: int, correlation_id: int, rest: bytes = b"\x00\x04test") -> bytes:
    """A frame with a v1 header (client id "test" unless `rest` says otherwise) and `rest`."""
    body = struct.pack(">hhi", api_key, api_version, correlation_id) + rest
    return struct.pack(">i", len(body)) + body


def make(cls: type, **values: Any) -> Any:
    """An instance of a kio class of any version: values for fields it lacks are dropped."""
    names = {field.name for field in dataclasses.fields(cls)}
    return cls(**{name: value for name, value in values.items() if name in names})


def decode_response(api_key: int, api_version: int, body: bytes) -> Any:
    """A response frame's body (after the correlation id) read with kio, its header skipped."""
    response_cls = load_response_schema(api_key, api_version)
    offset = 1 if response_cls.__header_schema__.__version__ == 1 else 0  # empty tagged fields
    response, size = entity_reader(response_cls)(body, offset)
    assert offset + size == len(body)
    return response


class RawClient:
    """A TCP connection speaking frames: send bytes, read (correlation_id, body) responses."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader = reader
        self.writer = writer

    @classmethod
    async def connect(cls, port: int) -> RawClient:
        reader, writer = await asyncio.wait_for(asyncio.open_connection("127.0.0.1", port), WAIT_S)
        return cls(reader, writer)

    async def send(self, data: bytes) -> None:
        self.writer.write(data)
        await self.writer.drain()

    async def read(self) -> tuple[int, bytes]:
        size = struct.unpack(">i", await asyncio.wait_for(self.reader.readexactly(4), WAIT_S))[0]
        frame = await asyncio.wait_for(self.reader.readexactly(size), WAIT_S)
        return struct.unpack_from(">i", frame)[0], frame[4:]

    async def call(self, request: Any, correlation_id: int = 1) -> Any:
        await self.send(encode_request(request, correlation_id))
        got, body = await self.read()
        assert got == correlation_id
        return decode_response(type(request).__api_key__, type(request).__version__, body)

    async def assert_closed(self) -> None:
        """The server closes the connection (with no further response)."""
        data = await asyncio.wait_for(self.reader.read(1), WAIT_S)
        assert data == b"", f"expected the connection closed, got {data!r}"

    async def close(self) -> None:
        self.writer.close()
        with suppress(OSError, TimeoutError):
            await asyncio.wait_for(self.writer.wait_closed(), WAIT_S)


@asynccontextmanager
async def running(
    handlers: Mapping[int, Handler] | None = None, **options: Any
) -> AsyncIterator[KafkaServer]:
    server = KafkaServer(handlers or {}, host="127.0.0.1", port=0, **options)
    await server.start()
    try:
        yield server
    finally:
        await asyncio.wait_for(server.close(), WAIT_S * 2)


# -- fake handlers, enough for real clients ------------------------------------------------------


def metadata_handler(port_of: Any, topics: Mapping[str, int], node_id: int = 1) -> Handler:
    """Metadata v0-5: one broker (this server: `port_of()` gives its port), `topics` with their
    partition counts, every partition led by the broker."""

    async def handle(ctx: RequestContext, request: Any) -> Any:
        module = load_payload_module(ApiKey.METADATA, ctx.api_version, EntityType.response)
        wanted = list(topics) if request.topics is None else [t.name for t in request.topics]
        return make(
            module.MetadataResponse,
            throttle_time=datetime.timedelta(0),
            brokers=(
                make(
                    module.MetadataResponseBroker,
                    node_id=node_id,
                    host="127.0.0.1",
                    port=port_of(),
                    rack=None,
                ),
            ),
            cluster_id="quire-test",
            controller_id=node_id,
            topics=tuple(_metadata_topic(module, name, topics.get(name), node_id) for name in wanted),
        )

    return handle


def _metadata_topic(module: Any, name: str, partitions: int | None, node_id: int) -> Any:
    if partitions is None:
        return make(
            module.MetadataResponseTopic,
            error_code=ErrorCode.UNKNOWN_TOPIC_OR_PARTITION.kio,
            name=name,
            partitions=(),
        )
    return make(
        module.MetadataResponseTopic,
        error_code=ErrorCode.NONE.kio,
        name=name,
        is_internal=False,
        partitions=tuple(
            make(
                module.MetadataResponsePartition,
                error_code=ErrorCode.NONE.kio,
                partition_index=index,
                leader_id=node_id,
                replica_nodes=(node_id,),
                isr_nodes=(node_id,),
                offline_replicas=(),
            )
            for index in range(partitions)
        ),
    )


class FakeProduce:
    """A Produce v3-7 handler that validates and decodes each batch and keeps it in memory, with
    offsets per partition: what the storage will do, minus the storage."""

    def __init__(self) -> None:
        self.batches: list[tuple[str, int, bytes]] = []
        self.records: dict[tuple[str, int], list[Any]] = {}
        self.next_offset: dict[tuple[str, int], int] = {}

    async def __call__(self, ctx: RequestContext, request: Any) -> Any:
        module = load_payload_module(ApiKey.PRODUCE, ctx.api_version, EntityType.response)
        topics = []
        for topic in request.topic_data:
            answers = [
                self._append(module, topic.name, data.index, data.records) for data in topic.partition_data
            ]
            topics.append(module.TopicProduceResponse(name=topic.name, partition_responses=tuple(answers)))
        if request.acks == 0:
            return None
        return make(module.ProduceResponse, responses=tuple(topics), throttle_time=datetime.timedelta(0))

    def _append(self, module: Any, topic: str, partition: int, records: bytes | None) -> Any:
        try:
            header = parse_produced_batch(records)
            decoded = decode_records(records or b"")
        except RecordBatchError as exc:
            return make(
                module.PartitionProduceResponse, index=partition, error_code=exc.code.kio, base_offset=-1
            )
        key = (topic, partition)
        base = self.next_offset.get(key, 0)
        self.next_offset[key] = base + header.records_count
        self.batches.append((topic, partition, records or b""))
        self.records.setdefault(key, []).extend(decoded)
        return make(
            module.PartitionProduceResponse,
            index=partition,
            error_code=ErrorCode.NONE.kio,
            base_offset=base,
            log_start_offset=0,
        )


async def init_producer_id_handler(ctx: RequestContext, request: Any) -> Any:
    module = load_payload_module(ApiKey.INIT_PRODUCER_ID, ctx.api_version, EntityType.response)
    return module.InitProducerIdResponse(
        throttle_time=datetime.timedelta(0), error_code=ErrorCode.NONE.kio, producer_id=4242, producer_epoch=0
    )
