"""Bad input to the Kafka listener: each case closes (only) its own connection, or gets the
Kafka error; a second connection opened afterwards still gets ApiVersions answered, and one
opened before keeps working."""

from __future__ import annotations

import asyncio
import contextlib
import datetime
import logging
import random
import struct
from typing import Any

import pytest
from kio.schema.api_versions.v0.request import ApiVersionsRequest as ApiVersionsV0
from kio.schema.metadata.v5.request import MetadataRequest as MetadataV5
from kio.schema.metadata.v5.response import MetadataResponse as MetadataResponseV5
from kio.schema.produce.v7.response import ProduceResponse as ProduceResponseV7

from app.kafka_listener import wire
from app.kafka_listener.server import CloseConnection, KafkaServer, RequestContext
from app.kafka_listener.versions import ADVERTISED, ApiKey
from tests.kafka_listener.support import WAIT_S, RawClient, encode_request, make, raw_frame, running

METADATA = MetadataV5(topics=None, allow_auto_topic_creation=False)
BAD_INPUT = {
    "garbage (an HTTP request)": b"GET / HTTP/1.1\r\nHost: x\r\n\r\n",
    "size -1": struct.pack(">i", -1),
    "size 0": struct.pack(">i", 0),
    "size 2^31-1": struct.pack(">i", 2**31 - 1) + b"\x00" * 100,
    "size over max_request_bytes": struct.pack(">i", 1_000_001) + b"\x00" * 100,
    "frame too short for a header": struct.pack(">i", 3) + b"\x00\x12\x00",
    "unknown api key 999": raw_frame(999, 0, 1),
    "known to Kafka, not served (DescribeGroups)": raw_frame(15, 0, 1),
    "served API without a handler here (Fetch)": raw_frame(1, 11, 1),
    "header cut short (client id length past the end)": raw_frame(18, 0, 1, b"\x00\x40ab"),
    "undecodable body (Metadata v5, array count past the end)": raw_frame(
        3, 5, 1, b"\x00\x04test\x00\x00\x00\x09"
    ),
    "undecodable flexible body (ApiVersions v3, bad compact string)": raw_frame(
        18, 3, 1, b"\x00\x04test\x00\x7f"
    ),
    "Produce v8 (above the range, no top-level error)": raw_frame(0, 8, 1),
    "Fetch v3 (below the range, no layout)": raw_frame(1, 3, 1),
}


async def metadata_ok(ctx: RequestContext, request: Any) -> Any:
    return make(
        MetadataResponseV5,
        throttle_time=datetime.timedelta(0),
        brokers=(),
        cluster_id=None,
        controller_id=-1,
        topics=(),
    )


async def assert_served(port: int) -> None:
    client = await RawClient.connect(port)
    response = await client.call(ApiVersionsV0(), 1)
    assert response.error_code == 0
    await client.close()


@pytest.mark.parametrize("name", list(BAD_INPUT))
async def test_bad_input_closes_only_its_connection(name: str) -> None:
    async with running(
        {ApiKey.METADATA: metadata_ok, ApiKey.PRODUCE: metadata_ok}, max_request_bytes=1_000_000
    ) as server:
        bystander = await RawClient.connect(server.port)
        await bystander.call(METADATA, 1)
        client = await RawClient.connect(server.port)
        await client.send(BAD_INPUT[name])
        await client.assert_closed()
        await assert_served(server.port)
        await bystander.call(METADATA, 2)
        await bystander.close()


async def test_answers_due_before_a_bad_request_are_still_written() -> None:
    async with running({ApiKey.METADATA: metadata_ok}) as server:
        client = await RawClient.connect(server.port)
        await client.send(encode_request(METADATA, 1) + encode_request(METADATA, 2) + raw_frame(999, 0, 3))
        assert [(await client.read())[0] for _ in range(2)] == [1, 2]
        await client.assert_closed()


@pytest.mark.parametrize("cut", [2, 4, 7, 20])
async def test_a_frame_truncated_by_the_end_of_input_closes(cut: int) -> None:
    async with running({ApiKey.METADATA: metadata_ok}) as server:
        client = await RawClient.connect(server.port)
        await client.send(encode_request(METADATA, 1)[:cut])
        client.writer.write_eof()
        await client.assert_closed()
        await assert_served(server.port)


FAILING_HANDLERS = {
    "raises": RuntimeError("boom"),
    "closes": CloseConnection("bye"),
    "answers the wrong API": make(ProduceResponseV7, responses=()),
    "answers a non-kio object": "not a response",
}


@pytest.mark.parametrize("name", list(FAILING_HANDLERS))
async def test_a_failing_handler_closes_its_connection_only(
    name: str, caplog: pytest.LogCaptureFixture
) -> None:
    outcome = FAILING_HANDLERS[name]

    async def metadata(ctx: RequestContext, request: Any) -> Any:
        if ctx.client_id == "bad":
            if isinstance(outcome, BaseException):
                raise outcome
            return outcome
        return await metadata_ok(ctx, request)

    caplog.set_level(logging.INFO, logger="quire.kafka_listener.server")
    async with running({ApiKey.METADATA: metadata}) as server:
        bystander = await RawClient.connect(server.port)
        client = await RawClient.connect(server.port)
        await client.send(encode_request(METADATA, 1, client_id="bad"))
        await client.assert_closed()
        await bystander.call(METADATA, 1)
        await assert_served(server.port)
        await bystander.close()
    assert "closing" in caplog.text or "closed it" in caplog.text


def test_handlers_only_for_apis_in_the_table() -> None:
    with pytest.raises(ValueError):
        KafkaServer({999: metadata_ok})
    with pytest.raises(ValueError):
        KafkaServer({ApiKey.API_VERSIONS: metadata_ok})
    with pytest.raises(ValueError):
        KafkaServer({15: metadata_ok})  # DescribeGroups: not advertised


async def test_close_is_bounded_with_handlers_stuck_and_clients_idle(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.ERROR, logger="asyncio")
    stuck = asyncio.Event()

    async def never(ctx: RequestContext, request: Any) -> Any:
        stuck.set()
        await asyncio.sleep(3600)

    server = KafkaServer({ApiKey.METADATA: never}, port=0)
    await server.start()
    clients = [await RawClient.connect(server.port) for _ in range(3)]
    await clients[0].send(encode_request(METADATA, 1))
    await asyncio.wait_for(stuck.wait(), WAIT_S)
    loop = asyncio.get_running_loop()
    started = loop.time()
    await server.close(timeout_s=2.0)
    assert loop.time() - started < 2.5
    assert not server.connections
    for client in clients:
        await client.assert_closed()
    with pytest.raises(OSError):
        await asyncio.wait_for(asyncio.open_connection("127.0.0.1", server.port), WAIT_S)
    await asyncio.sleep(0.05)
    assert not [r for r in caplog.records if r.name == "asyncio"], caplog.text  # nothing unhandled


def random_frames(count: int, seed: int) -> list[bytes]:
    """Frames with a served (api key, version) header and random bodies, some with huge counts."""
    rng = random.Random(seed)
    served = [(key, version) for key, (low, high) in ADVERTISED.items() for version in range(low, high + 1)]
    frames = []
    for _ in range(count):
        key, version = rng.choice(served)
        body = rng.randbytes(rng.randint(0, 48))
        if rng.random() < 0.3:
            body = struct.pack(">i", rng.choice([2**31 - 1, -2, 1_000_000])) + body
        frames.append(raw_frame(key, version, 1, b"\x00\x01x" + b"\x00" * rng.randint(0, 1) + body))
    return frames


def test_random_bodies_decode_or_raise_wire_errors_only() -> None:
    for frame in random_frames(20_000, seed=7):
        key, version, _ = wire.peek(frame[4:])
        request_cls = wire.request_type(key, version)
        if request_cls is None:
            continue
        with contextlib.suppress(wire.WireError):
            wire.decode_request(frame[4:], request_cls)


async def test_random_frames_never_stop_the_server() -> None:
    handlers = {key: metadata_ok for key in ADVERTISED if key != ApiKey.API_VERSIONS}
    async with running(handlers) as server:
        for frame in random_frames(150, seed=11):
            client = await RawClient.connect(server.port)
            await client.send(frame)
            client.writer.write_eof()
            with contextlib.suppress(AssertionError, asyncio.IncompleteReadError, OSError):
                while True:  # an answer (error 35, or a handler's) or the connection closed
                    await client.read()
            await client.close()
        await assert_served(server.port)
