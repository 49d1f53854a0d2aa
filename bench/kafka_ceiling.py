"""The client ceiling of `make bench-kafka`: the listener's wire server (app.kafka_listener.server)
with storage-free handlers, so that confluent-kafka against it measures what the client itself
can do on this machine -- the most any broker could show in the bench's Kafka rows.

`python -m bench.kafka_ceiling PORT MESSAGES` serves, on 127.0.0.1:PORT:
- Metadata: every topic asked for exists, one partition, led by this server;
- Produce: each batch is validated as the listener does (`parse_produced_batch`: header, CRC)
  and answered at once with its base offset (nothing is stored);
- Fetch: any topic holds MESSAGES messages of 100 B, served from one batch of 10,000 records
  encoded at start, its base offset patched (as the listener patches stored ones), up to the
  partition's max bytes; each answer's records are kept, so a later round's fetches at the same
  offsets cost the server nothing but the write.
"""

from __future__ import annotations

import asyncio
import datetime
import sys
from typing import Any

import uvloop

from app.kafka_listener.common import build, module
from app.kafka_listener.errors import ErrorCode
from app.kafka_listener.server import KafkaServer, RequestContext
from app.kafka_listener.versions import ApiKey
from common.kafka_records import KafkaRecord, encode_batch, join_batches, parse_produced_batch

NODE = 1
PER_BATCH = 10_000
VALUE = b"x" * 100


class Ceiling:
    def __init__(self, port: int, messages: int) -> None:
        self.port = port
        self.messages = messages
        self.offsets: dict[tuple[str, int], int] = {}
        self._batches: dict[int, bytes] = {}
        self._records: dict[tuple[int, int], bytes] = {}  # (fetch offset, max bytes) -> records

    def batch(self, count: int) -> bytes:
        if count not in self._batches:
            records = [KafkaRecord(i, 1_700_000_000_000, None, VALUE) for i in range(count)]
            self._batches[count] = encode_batch(0, records)
        return self._batches[count]

    def records(self, offset: int, max_bytes: int) -> bytes:
        size, chunks = 0, []
        while offset < self.messages and size < max_bytes:
            batch = self.batch(min(PER_BATCH, self.messages - offset))
            chunks.append((offset, batch))
            offset += min(PER_BATCH, self.messages - offset)
            size += len(batch)
        return join_batches(chunks)

    async def metadata(self, ctx: RequestContext, req: Any) -> Any:
        mod = module(ApiKey.METADATA, ctx.api_version)
        part = build(
            mod.MetadataResponsePartition,
            error_code=ErrorCode.NONE.kio,
            partition_index=0,
            leader_id=NODE,
            replica_nodes=(NODE,),
            isr_nodes=(NODE,),
            offline_replicas=(),
        )
        topics = tuple(
            build(mod.MetadataResponseTopic, error_code=ErrorCode.NONE.kio, name=t.name, partitions=(part,))
            for t in req.topics or ()
        )
        broker = build(mod.MetadataResponseBroker, node_id=NODE, host="127.0.0.1", port=self.port)
        return build(
            mod.MetadataResponse, brokers=(broker,), cluster_id="ceiling", controller_id=NODE, topics=topics
        )

    async def produce(self, ctx: RequestContext, req: Any) -> Any:
        mod = module(ApiKey.PRODUCE, ctx.api_version)
        answers = []
        for t in req.topic_data:
            parts = []
            for p in t.partition_data:
                header = parse_produced_batch(p.records)
                base = self.offsets.get((t.name, p.index), 0)
                self.offsets[(t.name, p.index)] = base + header.records_count
                parts.append(
                    build(
                        mod.PartitionProduceResponse,
                        index=p.index,
                        error_code=ErrorCode.NONE.kio,
                        base_offset=base,
                    )
                )
            answers.append(build(mod.TopicProduceResponse, name=t.name, partition_responses=tuple(parts)))
        return None if req.acks == 0 else build(mod.ProduceResponse, responses=tuple(answers))

    async def fetch(self, ctx: RequestContext, req: Any) -> Any:
        mod = module(ApiKey.FETCH, ctx.api_version)
        topics = []
        for t in req.topics:
            parts = []
            for p in t.partitions:
                key = (p.fetch_offset, p.partition_max_bytes)
                if key not in self._records:
                    self._records[key] = self.records(p.fetch_offset, p.partition_max_bytes)
                parts.append(
                    build(
                        mod.PartitionData,
                        partition_index=p.partition,
                        error_code=ErrorCode.NONE.kio,
                        high_watermark=self.messages,
                        last_stable_offset=self.messages,
                        log_start_offset=0,
                        aborted_transactions=(),
                        records=self._records[key],
                    )
                )
            topics.append(build(mod.FetchableTopicResponse, topic=t.topic, partitions=tuple(parts)))
        if not any(p.records for t in topics for p in t.partitions):
            await asyncio.sleep(min(req.max_wait.total_seconds(), 0.5))  # a long poll, not a spin
        return build(
            mod.FetchResponse,
            throttle_time=datetime.timedelta(0),
            error_code=ErrorCode.NONE.kio,
            session_id=0,
            responses=tuple(topics),
        )


async def serve(port: int, messages: int) -> None:
    ceiling = Ceiling(port, messages)
    ceiling.batch(PER_BATCH)
    handlers = {
        ApiKey.METADATA: ceiling.metadata,
        ApiKey.PRODUCE: ceiling.produce,
        ApiKey.FETCH: ceiling.fetch,
    }
    async with KafkaServer(handlers, port=port):
        await asyncio.Event().wait()  # until SIGTERM


if __name__ == "__main__":
    uvloop.run(serve(int(sys.argv[1]), int(sys.argv[2])))
