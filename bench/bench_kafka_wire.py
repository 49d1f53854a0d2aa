"""`make bench-kafka-wire`: what the Kafka listener's wire layer costs per request, storage aside.

Two parts, each the median of several rounds, printed as one table (not a test):
- codec: decoding a Produce v7 request frame carrying one 1 MB batch of 100 B records (header,
  body, and the batch's header and CRC checked), encoding its response, and encoding a Fetch v11
  response whose records are 1 MB (one partition), or ten 100 kB batches joined with their base
  offsets patched;
- server: a KafkaServer on this loop (uvloop) with a Produce handler that validates each batch
  and answers, and a Fetch handler that answers a prebuilt 1 MB of batches; a raw client in the
  same process pipelines requests (8 in flight) on one connection. Messages per second count
  100 B records (the bars: produce 500 k/s, consume 1 M/s on 2 cores).
"""

from __future__ import annotations

import argparse
import asyncio
import datetime
import statistics
import struct
import time
from collections.abc import Callable
from typing import Any

import uvloop
from kio.schema.errors import ErrorCode
from kio.schema.fetch.v11.request import FetchPartition, FetchRequest, FetchTopic
from kio.schema.fetch.v11.response import FetchableTopicResponse, FetchResponse, PartitionData
from kio.schema.produce.v7.request import PartitionProduceData, ProduceRequest, TopicProduceData
from kio.schema.produce.v7.response import PartitionProduceResponse, ProduceResponse, TopicProduceResponse

from app.kafka_listener import wire
from app.kafka_listener.server import KafkaServer, RequestContext
from app.kafka_listener.versions import ApiKey
from common.kafka_records import KafkaRecord, encode_batch, join_batches, parse_produced_batch

VALUE = b"x" * 100
MB = 1_000_000


def batch_of(size: int) -> tuple[bytes, int]:
    records = [KafkaRecord(i, 1_700_000_000_000, None, VALUE) for i in range(size // 108)]
    return encode_batch(0, records), len(records)


def produce_request(batch: bytes) -> ProduceRequest:
    return ProduceRequest(
        transactional_id=None,
        acks=-1,
        timeout=datetime.timedelta(seconds=30),
        topic_data=(
            TopicProduceData(name="bench", partition_data=(PartitionProduceData(index=0, records=batch),)),
        ),
    )


def produce_response(base_offset: int) -> ProduceResponse:
    partition = PartitionProduceResponse(index=0, error_code=ErrorCode.none, base_offset=base_offset)
    return ProduceResponse(responses=(TopicProduceResponse(name="bench", partition_responses=(partition,)),))


def fetch_response(records: bytes) -> FetchResponse:
    partition = PartitionData(
        partition_index=0,
        error_code=ErrorCode.none,
        high_watermark=1 << 40,
        aborted_transactions=None,
        records=records,
    )
    return FetchResponse(
        throttle_time=datetime.timedelta(0),
        error_code=ErrorCode.none,
        responses=(FetchableTopicResponse(topic="bench", partitions=(partition,)),),
    )


def timed(fn: Callable[[], object], rounds: int = 7, repeat: int = 200) -> float:
    """Median µs per call."""
    samples = []
    for _ in range(rounds):
        started = time.perf_counter()
        for _ in range(repeat):
            fn()
        samples.append((time.perf_counter() - started) / repeat * 1e6)
    return statistics.median(samples)


def codec_rows() -> list[tuple[str, float]]:
    batch, _ = batch_of(MB)
    frame = wire.encode_request(produce_request(batch), 1)[4:]
    request_cls = wire.request_type(ApiKey.PRODUCE, 7)
    assert request_cls is not None

    def decode_produce() -> None:
        wire.peek(frame)
        _, request, _ = wire.decode_request(frame, request_cls)
        parse_produced_batch(request.topic_data[0].partition_data[0].records)

    small, _ = batch_of(MB // 10)
    return [
        ("Produce v7 request, 1 MB batch: decode + batch check (µs)", timed(decode_produce)),
        ("Produce v7 response: encode (µs)", timed(lambda: wire.encode_response(1, produce_response(5)))),
        (
            "Fetch v11 response, 1 MB records: build + encode (µs)",
            timed(lambda: wire.encode_response(1, fetch_response(batch))),
        ),
        (
            "join 10 x 100 kB batches, base offsets patched (µs)",
            timed(lambda: join_batches((i * 10, small) for i in range(10))),
        ),
    ]


async def pipelined(port: int, frame: bytes, requests: int, window: int = 8) -> float:
    """Seconds to send `requests` copies of `frame` with `window` in flight and read the answers."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    started = time.perf_counter()
    sent = 0
    for _ in range(min(window, requests)):
        writer.write(frame)
        sent += 1
    for _ in range(requests):
        (size,) = struct.unpack(">i", await reader.readexactly(4))
        await reader.readexactly(size)
        if sent < requests:
            writer.write(frame)
            sent += 1
    elapsed = time.perf_counter() - started
    writer.close()
    return elapsed


async def server_rows(requests: int) -> list[tuple[str, float]]:
    batch, per_batch = batch_of(MB)
    offsets = [0]

    async def produce(ctx: RequestContext, request: Any) -> Any:
        header = parse_produced_batch(request.topic_data[0].partition_data[0].records)
        offsets[0] += header.records_count
        return produce_response(offsets[0])

    async def fetch(ctx: RequestContext, request: Any) -> Any:
        return fetch_response(batch)

    server = KafkaServer({ApiKey.PRODUCE: produce, ApiKey.FETCH: fetch}, port=0)
    await server.start()
    fetch_request = FetchRequest(
        replica_id=-1,
        max_wait=datetime.timedelta(milliseconds=500),
        min_bytes=1,
        max_bytes=50 * MB,
        isolation_level=0,
        session_id=0,
        session_epoch=-1,
        topics=(
            FetchTopic(
                topic="bench",
                partitions=(
                    FetchPartition(partition=0, fetch_offset=0, log_start_offset=-1, partition_max_bytes=MB),
                ),
            ),
        ),
        forgotten_topics_data=(),
        rack_id="",
    )
    try:
        rows = []
        for name, frame in (
            ("produce", wire.encode_request(produce_request(batch), 1)),
            ("fetch", wire.encode_request(fetch_request, 1)),
        ):
            seconds = statistics.median([await pipelined(server.port, frame, requests) for _ in range(5)])
            rows.append((f"server {name}, 1 MB requests: requests/s", requests / seconds))
            rows.append((f"server {name}: 100 B messages/s", requests * per_batch / seconds))
        return rows
    finally:
        await server.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=300, help="requests per server round")
    args = parser.parse_args()
    rows = codec_rows()
    rows += uvloop.run(server_rows(args.requests))
    width = max(len(name) for name, _ in rows)
    for name, value in rows:
        print(f"{name:<{width}}  {value:>12,.0f}")


if __name__ == "__main__":
    main()
