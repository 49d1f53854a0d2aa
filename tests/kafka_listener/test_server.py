"""The Kafka listener's server over a real TCP socket: ApiVersions from raw bytes, pipelining
with responses in request order, backpressure, and bad input that gets the right Kafka error or a
closed connection while other connections keep being served."""

from __future__ import annotations

import asyncio
import datetime
import struct
from typing import Any

import pytest
from kio.schema.api_versions.v3.request import ApiVersionsRequest as ApiVersionsV3
from kio.schema.join_group.v6.request import JoinGroupRequest as JoinGroupV6
from kio.schema.metadata.v5.request import MetadataRequest as MetadataV5
from kio.schema.metadata.v5.response import MetadataResponse as MetadataResponseV5
from kio.schema.offset_commit.v3.request import OffsetCommitRequest
from kio.schema.offset_commit.v3.response import OffsetCommitResponse
from kio.schema.produce.v3.request import PartitionProduceData, TopicProduceData
from kio.schema.produce.v3.request import ProduceRequest as ProduceV3

from app.kafka_listener.errors import ErrorCode
from app.kafka_listener.server import RequestContext
from app.kafka_listener.versions import ADVERTISED, ApiKey
from common.kafka_records import KafkaRecord, encode_batch
from tests.kafka_listener.support import (
    WAIT_S,
    RawClient,
    decode_response,
    encode_request,
    make,
    raw_frame,
    running,
)

API_VERSIONS_BODIES = {
    0: b"",
    1: b"",
    2: b"",
    3: b"\x05test\x041.0\x00",  # compact strings client_software_name / version, no tagged fields
}


def empty_metadata(version: int = 5) -> Any:
    return make(
        MetadataResponseV5,
        throttle_time=datetime.timedelta(0),
        brokers=(),
        cluster_id=None,
        controller_id=-1,
        topics=(),
    )


async def metadata_ok(ctx: RequestContext, request: Any) -> Any:
    return empty_metadata()


@pytest.mark.parametrize("version", [0, 1, 2, 3])
async def test_api_versions_from_raw_bytes_lists_what_is_served(version: int) -> None:
    async with running({ApiKey.METADATA: metadata_ok}) as server:
        client = await RawClient.connect(server.port)
        await client.send(
            raw_frame(
                18,
                version,
                77,
                b"\x00\x04test" + (b"\x00" if version >= 3 else b"") + API_VERSIONS_BODIES[version],
            )
        )
        correlation_id, body = await client.read()
        assert correlation_id == 77
        response = decode_response(18, version, body)  # header v0 even for v3 (KIP-511)
        assert response.error_code == ErrorCode.NONE
        rows = {k.api_key: (k.min_version, k.max_version) for k in response.api_keys}
        assert rows == {0 + ApiKey.API_VERSIONS: (0, 3), 0 + ApiKey.METADATA: ADVERTISED[ApiKey.METADATA]}
        if version >= 1:
            assert response.throttle_time.total_seconds() == 0
        await client.close()


async def test_api_versions_v3_keeps_the_client_software_in_the_connection_state() -> None:
    seen: list[Any] = []

    async def metadata(ctx: RequestContext, request: Any) -> Any:
        seen.append((ctx.client_id, ctx.state.get("client_software"), ctx.peer))
        return empty_metadata()

    async with running({ApiKey.METADATA: metadata}) as server:
        client = await RawClient.connect(server.port)
        request = ApiVersionsV3(client_software_name="quire-test", client_software_version="9.9")
        await client.call(request, 1)
        await client.call(MetadataV5(topics=None, allow_auto_topic_creation=False), 2)
        assert seen[0][:2] == ("test", ("quire-test", "9.9"))
        assert seen[0][2].startswith("127.0.0.1:")
        await client.close()


@pytest.mark.parametrize("version", [4, 99])
async def test_api_versions_too_high_gets_error_35_in_the_v0_layout(version: int) -> None:
    async with running() as server:
        client = await RawClient.connect(server.port)
        await client.send(raw_frame(18, version, 5, b"\x00\x04test\x00\x01\x01\x00"))
        correlation_id, body = await client.read()
        assert correlation_id == 5
        response = decode_response(18, 0, body)
        assert response.error_code == ErrorCode.UNSUPPORTED_VERSION
        assert [(k.api_key, k.min_version, k.max_version) for k in response.api_keys] == [(18, 0, 3)]
        # the client retries with v3 on the same connection
        again = await client.call(ApiVersionsV3(client_software_name="x", client_software_version="1"), 6)
        assert again.error_code == ErrorCode.NONE
        await client.close()


def produce_v2(acks: int) -> bytes:
    """A Produce v2 request: v3's layout without the transactional id."""
    batch = encode_batch(0, [KafkaRecord(0, 0, None, b"x")])
    request = ProduceV3(
        transactional_id=None,
        acks=acks,
        timeout=datetime.timedelta(seconds=1),
        topic_data=(
            TopicProduceData(name="t1", partition_data=(PartitionProduceData(index=0, records=batch),)),
            TopicProduceData(
                name="t2",
                partition_data=(
                    PartitionProduceData(index=3, records=batch),
                    PartitionProduceData(index=4, records=batch),
                ),
            ),
        ),
    )
    frame = encode_request(request, 9)
    header_end = 4 + 8 + 2 + 4  # size, api key/version/correlation id, client id "test"
    assert frame[header_end : header_end + 2] == b"\xff\xff"  # the null transactional id
    body = frame[4:header_end].replace(b"\x00\x03", b"\x00\x02", 1) + frame[header_end + 2 :]
    return struct.pack(">i", len(body)) + body


async def test_produce_v2_is_advertised_but_answered_with_error_35_per_partition() -> None:
    async with running({ApiKey.PRODUCE: metadata_ok}) as server:
        client = await RawClient.connect(server.port)
        await client.send(produce_v2(acks=1))
        correlation_id, body = await client.read()
        assert correlation_id == 9
        response = decode_response(0, 3, body)  # the v2 response layout is v3's
        assert [
            (t.name, [(p.index, p.error_code, p.base_offset) for p in t.partition_responses])
            for t in response.responses
        ] == [
            ("t1", [(0, ErrorCode.UNSUPPORTED_VERSION, -1)]),
            ("t2", [(3, ErrorCode.UNSUPPORTED_VERSION, -1), (4, ErrorCode.UNSUPPORTED_VERSION, -1)]),
        ]
        await client.send(produce_v2(acks=0))  # no response is read for acks=0: closed
        await client.assert_closed()


async def test_a_version_above_the_range_gets_error_35_when_the_layout_has_a_top_level_error() -> None:
    async def join_group(ctx: RequestContext, request: Any) -> Any:
        raise AssertionError("never called")

    async with running({ApiKey.JOIN_GROUP: join_group, ApiKey.METADATA: metadata_ok}) as server:
        client = await RawClient.connect(server.port)
        request = JoinGroupV6(
            group_id="g",
            session_timeout=datetime.timedelta(seconds=10),
            rebalance_timeout=datetime.timedelta(seconds=10),
            member_id="",
            group_instance_id=None,
            protocol_type="consumer",
            protocols=(),
        )
        response = await client.call(request, 3)  # flexible: header v2 in, header v1 out
        assert response.error_code == ErrorCode.UNSUPPORTED_VERSION
        # Metadata v6 has no top-level error code: closed
        await client.send(raw_frame(3, 6, 4, b"\x00\x04test\xff\xff\xff\xff\x00"))
        await client.assert_closed()


async def test_pipelined_requests_run_concurrently_and_are_answered_in_order() -> None:
    first_started = asyncio.Event()
    second_done = asyncio.Event()
    order: list[int] = []

    async def metadata(ctx: RequestContext, request: Any) -> Any:
        if ctx.correlation_id == 1:
            first_started.set()
            await asyncio.wait_for(second_done.wait(), WAIT_S)  # held until the second is done
        order.append(ctx.correlation_id)
        if ctx.correlation_id == 2:
            second_done.set()
        if ctx.correlation_id == 3:
            return None  # no response (as Produce with acks=0)
        return empty_metadata()

    async with running({ApiKey.METADATA: metadata}) as server:
        client = await RawClient.connect(server.port)
        request = MetadataV5(topics=None, allow_auto_topic_creation=False)
        await client.send(b"".join(encode_request(request, n) for n in (1, 2, 3, 4)))
        got = [(await client.read())[0] for _ in range(3)]
        assert order.index(2) < order.index(1)  # the second finished first...
        assert got == [1, 2, 4]  # ...but the answers keep the request order; 3 has none
        await client.close()


async def test_in_flight_requests_per_connection_are_bounded() -> None:
    release = asyncio.Event()
    started: list[int] = []

    async def metadata(ctx: RequestContext, request: Any) -> Any:
        started.append(ctx.correlation_id)
        await asyncio.wait_for(release.wait(), WAIT_S)
        return empty_metadata()

    async with running({ApiKey.METADATA: metadata}, max_in_flight=3) as server:
        client = await RawClient.connect(server.port)
        request = MetadataV5(topics=None, allow_auto_topic_creation=False)
        await client.send(b"".join(encode_request(request, n) for n in range(10)))
        await asyncio.sleep(0.2)
        assert started == [0, 1, 2]
        release.set()
        assert [(await client.read())[0] for _ in range(10)] == list(range(10))
        await client.close()


async def test_in_flight_bytes_per_connection_are_bounded() -> None:
    release = asyncio.Event()
    started: list[int] = []

    async def metadata(ctx: RequestContext, request: Any) -> Any:
        started.append(ctx.correlation_id)
        await asyncio.wait_for(release.wait(), WAIT_S)
        return empty_metadata()

    request = MetadataV5(topics=None, allow_auto_topic_creation=False)
    size = len(encode_request(request, 0)) - 4
    async with running({ApiKey.METADATA: metadata}, max_in_flight_bytes=2 * size) as server:
        client = await RawClient.connect(server.port)
        await client.send(b"".join(encode_request(request, n) for n in range(5)))
        await asyncio.sleep(0.2)
        assert started == [0, 1]
        release.set()
        assert [(await client.read())[0] for _ in range(5)] == list(range(5))
        await client.close()


async def test_pipelined_offset_commits_take_effect_in_request_order() -> None:
    """Kafka applies a connection's requests one after the other: a second async commit must not
    land before the first, even when the first is slower to handle."""
    landed: list[int] = []

    async def offset_commit(ctx: RequestContext, request: Any) -> Any:
        if ctx.correlation_id == 1:
            await asyncio.sleep(0.2)  # the first commit's store write is slow
        landed.append(ctx.correlation_id)
        return make(OffsetCommitResponse, throttle_time=datetime.timedelta(0), topics=())

    async with running({ApiKey.OFFSET_COMMIT: offset_commit}) as server:
        client = await RawClient.connect(server.port)
        request = make(
            OffsetCommitRequest,
            group_id="g",
            generation_id_or_member_epoch=1,
            member_id="m",
            retention_time=datetime.timedelta(milliseconds=-1),
            topics=(),
        )
        await client.send(b"".join(encode_request(request, n) for n in (1, 2)))
        assert [(await client.read())[0] for _ in range(2)] == [1, 2]
        assert landed == [1, 2]
        await client.close()


def produce_to(partitions: list[int], acks: int = 1) -> ProduceV3:
    batch = encode_batch(0, [KafkaRecord(0, 0, None, b"x")])
    data = tuple(PartitionProduceData(index=p, records=batch) for p in partitions)
    return ProduceV3(
        transactional_id=None,
        acks=acks,
        timeout=datetime.timedelta(seconds=5),
        topic_data=(TopicProduceData(name="t", partition_data=data),),
    )


async def test_pipelined_produces_to_one_partition_take_effect_in_request_order() -> None:
    """An idempotent producer's pipelined batches for a partition are checked and appended in the
    order sent (Kafka handles a connection's requests one at a time): the first one delayed (an
    authorization or quota check awaiting) must not let the second be applied before it."""
    landed: list[int] = []

    async def produce(ctx: RequestContext, request: Any) -> Any:
        if ctx.correlation_id == 1:
            await asyncio.sleep(0.2)  # the first batch's checks are slow
        landed.append(ctx.correlation_id)
        return None  # acks=0

    async with running({ApiKey.PRODUCE: produce}) as server:
        client = await RawClient.connect(server.port)
        frames = [encode_request(produce_to([0, 1]), 1), encode_request(produce_to([1]), 2)]
        await client.send(b"".join(frames))
        async with asyncio.timeout(WAIT_S):
            while len(landed) < 2:
                await asyncio.sleep(0.01)
        assert landed == [1, 2]
        await client.close()


async def test_produces_to_other_partitions_and_fetches_are_not_held_up() -> None:
    """Ordering is per partition: a slow produce to partition 0 holds neither a produce to
    partition 1 nor a request of another API on the same connection."""
    release = asyncio.Event()
    landed: list[int] = []

    async def produce(ctx: RequestContext, request: Any) -> Any:
        if ctx.correlation_id == 1:
            await asyncio.wait_for(release.wait(), WAIT_S)
        landed.append(ctx.correlation_id)
        if ctx.correlation_id == 2:
            release.set()
        return None

    async def metadata(ctx: RequestContext, request: Any) -> Any:
        landed.append(ctx.correlation_id)
        return empty_metadata()

    async with running({ApiKey.PRODUCE: produce, ApiKey.METADATA: metadata}) as server:
        client = await RawClient.connect(server.port)
        metadata_request = MetadataV5(topics=None, allow_auto_topic_creation=False)
        frames = [
            encode_request(produce_to([0], acks=0), 1),
            encode_request(metadata_request, 3),
            encode_request(produce_to([1], acks=0), 2),
        ]
        await client.send(b"".join(frames))
        assert (await client.read())[0] == 3
        assert landed[:2] == [3, 2] and landed[2:] == [1]
        await client.close()
