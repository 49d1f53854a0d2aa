"""A stand-in Kafka server for testing the group APIs with real clients before the listener's
wire layer is wired to them: kio frames (request header v1/v2, response header v0/v1),
ApiVersions, a Metadata naming one topic led by this node, ListOffsets answering 0 and an
empty long-polling Fetch, and the group handlers of app/kafka_listener. Test code only."""

from __future__ import annotations

import asyncio
import contextlib
import datetime
import importlib
import io
import struct
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from types import ModuleType
from typing import Any

from kio.index import load_request_schema
from kio.schema.errors import ErrorCode
from kio.schema.response_header.v0.header import ResponseHeader as ResponseHeaderV0
from kio.serial import entity_reader, entity_writer
from kio.static.primitive import i32Timedelta

from app.kafka_listener import group_handlers as gh
from app.kafka_listener.cluster import KafkaNode

ZERO = i32Timedelta.parse(datetime.timedelta(0))
API_VERSIONS = 18
VERSIONS = {API_VERSIONS: (0, 3), 3: (0, 5), 2: (1, 3), 1: (4, 11), **gh.GROUP_API_VERSIONS}
FETCH_WAIT_CAP_S = 0.2


@dataclass(frozen=True)
class Ctx:
    api_version: int
    client_id: str | None


def _response(api: str, version: int) -> ModuleType:
    return importlib.import_module(f"kio.schema.{api}.v{version}.response")


class StandIn:
    """Serves one Kafka topic `topic` of `partitions` on 127.0.0.1, groups by `handlers`."""

    def __init__(self, topic: str, partitions: int) -> None:
        self.topic = topic
        self.partitions = partitions
        self.handlers: dict[int, Callable[[Any, Any], Awaitable[Any]]] = {
            API_VERSIONS: self._api_versions,
            3: self._metadata,
            2: self._list_offsets,
            1: self._fetch,
        }
        self.node = KafkaNode(1, "127.0.0.1", 0)
        self._connections: set[asyncio.Task[None]] = set()

    @contextlib.asynccontextmanager
    async def serving(self) -> AsyncIterator[StandIn]:
        server = await asyncio.start_server(self._connection, "127.0.0.1", 0)
        self.node = KafkaNode(1, "127.0.0.1", server.sockets[0].getsockname()[1])
        try:
            yield self
        finally:
            server.close()
            for task in list(self._connections):
                task.cancel()
            await asyncio.gather(*self._connections, return_exceptions=True)
            await server.wait_closed()

    async def _connection(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._connections.add(task)
        try:
            while True:
                size = struct.unpack(">i", await reader.readexactly(4))[0]
                writer.write(await self._answer(await reader.readexactly(size)))
                await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError, asyncio.CancelledError):
            pass
        finally:
            self._connections.discard(task)
            writer.close()

    async def _answer(self, data: bytes) -> bytes:
        key, version = struct.unpack(">hh", data[:4])
        request_class = load_request_schema(key, version)
        header, offset = entity_reader(request_class.__header_schema__)(data, 0)
        request, _ = entity_reader(request_class)(data, offset)
        response = await self.handlers[key](Ctx(version, header.client_id), request)
        header_class = ResponseHeaderV0 if key == API_VERSIONS else type(response).__header_schema__
        out = io.BytesIO()
        entity_writer(header_class)(out, header_class(correlation_id=header.correlation_id))
        entity_writer(type(response))(out, response)
        return struct.pack(">i", out.tell()) + out.getvalue()

    async def _api_versions(self, ctx: Ctx, _: Any) -> Any:
        m = _response("api_versions", ctx.api_version)
        keys = tuple(
            gh._build(m.ApiVersion, api_key=k, min_version=low, max_version=high)
            for k, (low, high) in VERSIONS.items()
        )
        return gh._build(m.ApiVersionsResponse, error_code=ErrorCode.none, api_keys=keys, throttle_time=ZERO)

    async def _metadata(self, ctx: Ctx, _: Any) -> Any:
        m, me = _response("metadata", ctx.api_version), self.node.node_id
        partitions = tuple(
            gh._build(
                m.MetadataResponsePartition,
                error_code=ErrorCode.none,
                partition_index=p,
                leader_id=me,
                replica_nodes=(me,),
                isr_nodes=(me,),
            )
            for p in range(self.partitions)
        )
        topic = gh._build(
            m.MetadataResponseTopic, error_code=ErrorCode.none, name=self.topic, partitions=partitions
        )
        broker = gh._build(m.MetadataResponseBroker, node_id=me, host=self.node.host, port=self.node.port)
        return gh._build(
            m.MetadataResponse,
            throttle_time=ZERO,
            brokers=(broker,),
            cluster_id="q",
            controller_id=me,
            topics=(topic,),
        )

    async def _list_offsets(self, ctx: Ctx, req: Any) -> Any:
        m = _response("list_offsets", ctx.api_version)
        topics = tuple(
            gh._build(
                m.ListOffsetsTopicResponse,
                name=t.name,
                partitions=tuple(
                    gh._build(
                        m.ListOffsetsPartitionResponse,
                        partition_index=p.partition_index,
                        error_code=ErrorCode.none,
                        offset=0,
                    )
                    for p in t.partitions
                ),
            )
            for t in req.topics
        )
        return gh._build(m.ListOffsetsResponse, throttle_time=ZERO, topics=topics)

    async def _fetch(self, ctx: Ctx, req: Any) -> Any:
        await asyncio.sleep(min(req.max_wait.total_seconds(), FETCH_WAIT_CAP_S))
        m = _response("fetch", ctx.api_version)
        empty = {
            "error_code": ErrorCode.none,
            "high_watermark": 0,
            "last_stable_offset": 0,
            "log_start_offset": 0,
        }
        topics = tuple(
            gh._build(
                m.FetchableTopicResponse,
                topic=t.topic,
                partitions=tuple(
                    gh._build(
                        m.PartitionData,
                        partition_index=p.partition,
                        aborted_transactions=(),
                        records=b"",
                        **empty,
                    )
                    for p in t.partitions
                ),
            )
            for t in req.topics
        )
        return gh._build(
            m.FetchResponse, throttle_time=ZERO, error_code=ErrorCode.none, session_id=0, responses=topics
        )
