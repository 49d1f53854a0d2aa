"""The Kafka data plane: Metadata, Produce, Fetch, ListOffsets and InitProducerId over Quire's
topics (topics.kafka_ops does the storage side).

Produce validates each partition's record batch (header, CRC-32C, one batch, no control batch:
`records.parse_produced_batch`) and stores it unchanged; acks=0 gets no response, acks=1 and
acks=all both answer once the entry is on its ack quorum of bookies (Quire has no weaker write).
Fetch long-polls: it answers once min_bytes are there or max_wait passed, and a produce to any
of the requested topics wakes it. Stored Kafka batches go out with their base offset patched;
messages produced over REST (and compacted views) are encoded as batches on the way out.
"""

from __future__ import annotations

import asyncio
import datetime
import secrets
import time
from collections.abc import Sequence
from typing import Any

from app.auth.policy import Need
from app.kafka_listener.cluster import node_id_for
from app.kafka_listener.common import (
    KafkaConfig,
    build,
    error_code,
    kafka_topic,
    module,
    quire_topic,
    split_url,
)
from app.kafka_listener.errors import ErrorCode
from app.kafka_listener.security import Access
from app.kafka_listener.server import Handler, RequestContext
from app.kafka_listener.versions import ApiKey
from common.errors import QuireError
from common.kafka_records import (
    KafkaRecord,
    RecordBatchError,
    based,
    encode_batch,
    parse_produced_batch,
)
from managed_ledger.entry_format import KIND_KAFKA, StoredMessage, bytes_of, decode_batch, kafka_batch
from topics.api import KafkaBatch, KafkaFetched, TopicsApi
from topics.errors import TopicNotFoundError, TopicsError


class DataPlane:
    def __init__(self, topics: TopicsApi, config: KafkaConfig, access: Access | None = None) -> None:
        self._topics = topics
        self._config = config
        self._access = access or Access()
        self._me = node_id_for(config.broker_id)

    def handlers(self) -> dict[int, Handler]:
        return {
            ApiKey.METADATA: self.metadata,
            ApiKey.PRODUCE: self.produce,
            ApiKey.FETCH: self.fetch,
            ApiKey.LIST_OFFSETS: self.list_offsets,
            ApiKey.INIT_PRODUCER_ID: self.init_producer_id,
        }

    # --- metadata ------------------------------------------------------------------------------
    async def _brokers(self) -> dict[str, tuple[int, str, int]]:
        """kafka url -> (node id, host, port) of the live brokers (this one at least)."""
        out = {self._config.advertised: (self._me, *split_url(self._config.advertised))}
        for record in await self._topics.brokers():
            if record.kafka_url:
                out[record.kafka_url] = (node_id_for(record.broker_id), *split_url(record.kafka_url))
        return out

    async def metadata(self, ctx: RequestContext, req: Any) -> Any:
        mod = module(ApiKey.METADATA, ctx.api_version)
        brokers = await self._brokers()
        if req.topics is None or (ctx.api_version == 0 and not req.topics):
            names = [
                n
                for n in await self._all_topics()
                if not await self._access.denied(ctx, quire_topic(self._config, n), Need.LOOKUP)
            ]
        else:
            names = [t.name for t in req.topics]
        auto_create = getattr(req, "allow_auto_topic_creation", True)
        topics = [await self._topic_metadata(ctx, mod, name, auto_create, brokers) for name in names]
        return build(
            mod.MetadataResponse,
            brokers=tuple(
                build(mod.MetadataResponseBroker, node_id=n, host=h, port=p) for n, h, p in brokers.values()
            ),
            cluster_id=self._config.cluster_id,
            controller_id=self._me,
            topics=tuple(topics),
        )

    async def _all_topics(self) -> list[str]:
        namespace = f"{self._config.tenant}/{self._config.namespace}"
        try:
            listed = await self._topics.list_topics(namespace)
        except TopicsError:
            return []
        names = {n.split("-partition-")[0] for n in listed}
        return sorted(kafka_topic(self._config, n.removeprefix("persistent://")) for n in names)

    async def _topic_metadata(
        self,
        ctx: RequestContext,
        mod: Any,
        name: str,
        auto_create: bool,
        brokers: dict[str, tuple[int, str, int]],
    ) -> Any:
        topic = quire_topic(self._config, name)
        if await self._access.denied(ctx, topic, Need.LOOKUP):
            code = ErrorCode.TOPIC_AUTHORIZATION_FAILED.kio
            return build(mod.MetadataResponseTopic, error_code=code, name=name, partitions=())
        try:
            try:
                partitions = await self._topics.kafka_partitions(topic)
            except TopicNotFoundError:
                if not auto_create:
                    raise
                await self._topics.lookup(topic)  # refused when automatic creation is off
                count = self._config.default_partitions
                await self._topics.create_topic(topic, count if count > 1 else 0)
                partitions = await self._topics.kafka_partitions(topic)
            owner = await self._topics.lookup(topic)
        except TopicsError as exc:
            return build(mod.MetadataResponseTopic, error_code=error_code(exc).kio, name=name, partitions=())
        leader = self._me if owner is None else brokers.get(owner.kafka_url, (self._me,))[0]
        parts = tuple(
            build(
                mod.MetadataResponsePartition,
                error_code=ErrorCode.NONE.kio,
                partition_index=i,
                leader_id=leader,
                replica_nodes=(leader,),
                isr_nodes=(leader,),
                offline_replicas=(),
            )
            for i in range(partitions)
        )
        return build(mod.MetadataResponseTopic, error_code=ErrorCode.NONE.kio, name=name, partitions=parts)

    # --- produce -------------------------------------------------------------------------------
    async def produce(self, ctx: RequestContext, req: Any) -> Any:
        mod = module(ApiKey.PRODUCE, ctx.api_version)
        bad_acks = req.acks not in (0, 1, -1)
        if getattr(req, "transactional_id", None):
            bad: ErrorCode | None = ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
        else:
            bad = ErrorCode.INVALID_REQUIRED_ACKS if bad_acks else None
        jobs = [
            (t.name, p.index, self._produce_one(ctx, t.name, p.index, p.records, bad))
            for t in req.topic_data
            for p in t.partition_data
        ]
        results = await asyncio.gather(*(job for _, _, job in jobs))
        if req.acks == 0 and not bad_acks:
            return None
        by_topic: dict[str, list[Any]] = {}
        for (name, index, _), (code, base) in zip(jobs, results, strict=True):
            by_topic.setdefault(name, []).append(
                build(mod.PartitionProduceResponse, index=index, error_code=code.kio, base_offset=base)
            )
        return build(
            mod.ProduceResponse,
            responses=tuple(
                build(mod.TopicProduceResponse, name=n, partition_responses=tuple(parts))
                for n, parts in by_topic.items()
            ),
        )

    async def _produce_one(
        self, ctx: RequestContext, name: str, partition: int, records: bytes | None, bad: ErrorCode | None
    ) -> tuple[ErrorCode, int]:
        if bad is not None:
            return bad, -1
        if await self._access.denied(ctx, quire_topic(self._config, name), Need.PRODUCE):
            return ErrorCode.TOPIC_AUTHORIZATION_FAILED, -1
        try:
            header = parse_produced_batch(records)
            assert records is not None
            batch = KafkaBatch(
                bytes(records),
                header.records_count,
                header.producer_id,
                header.producer_epoch,
                header.base_sequence,
            )
            base = await self._topics.kafka_produce(quire_topic(self._config, name), partition, batch)
        except RecordBatchError as exc:
            return ErrorCode(exc.code), -1
        except QuireError as exc:  # the topics layer's, or the managed ledger's from opening the topic
            return error_code(exc), -1
        return ErrorCode.NONE, base

    # --- fetch ---------------------------------------------------------------------------------
    async def fetch(self, ctx: RequestContext, req: Any) -> Any:
        wait_s = min(req.max_wait.total_seconds(), self._config.max_fetch_wait_ms / 1000)
        deadline = time.monotonic() + max(0.0, wait_s)
        wanted = [
            (t.topic, p.partition, p.fetch_offset, p.partition_max_bytes)
            for t in req.topics
            for p in t.partitions
        ]
        max_bytes = getattr(req, "max_bytes", 2**31 - 1)
        while True:
            armed = [self._topics.kafka_arm(quire_topic(self._config, name)) for name, *_ in wanted]
            results = await self._fetch_all(ctx, wanted, max_bytes)
            size = sum(len(r[2]) for r in results)
            left = deadline - time.monotonic()
            futures = [f for f in armed if f is not None]
            if size >= req.min_bytes or left <= 0 or any(r[0] != ErrorCode.NONE for r in results):
                break
            if not futures:
                await asyncio.sleep(min(left, 0.05))  # nothing open here yet: look again soon
                continue
            await asyncio.wait(futures, timeout=left, return_when=asyncio.FIRST_COMPLETED)
        return self._fetch_response(ctx, wanted, results)

    async def _fetch_all(
        self, ctx: RequestContext, wanted: Sequence[tuple[str, int, int, int]], max_bytes: int
    ) -> list[tuple[ErrorCode, KafkaFetched | None, bytes]]:
        out: list[tuple[ErrorCode, KafkaFetched | None, bytes]] = []
        budget, spent = max_bytes, False
        for name, partition, offset, partition_max in wanted:
            limit = max(1, min(partition_max, budget))
            if await self._access.denied(ctx, quire_topic(self._config, name), Need.CONSUME):
                out.append((ErrorCode.TOPIC_AUTHORIZATION_FAILED, None, b""))
                continue
            try:
                fetched = await self._topics.kafka_fetch(
                    quire_topic(self._config, name), partition, offset, limit
                )
            except QuireError as exc:
                out.append((error_code(exc), None, b""))
                continue
            records = batches(fetched)
            if spent and len(records) > budget:
                # Only the first partition with data may go over the response's max_bytes (so
                # that a batch larger than it is still delivered); the others wait their turn.
                records = b""
            spent = spent or bool(records)
            budget = max(0, budget - len(records))
            out.append((ErrorCode.NONE, fetched, records))
        return out

    def _fetch_response(
        self,
        ctx: RequestContext,
        wanted: Sequence[tuple[str, int, int, int]],
        results: list[tuple[ErrorCode, KafkaFetched | None, bytes]],
    ) -> Any:
        mod = module(ApiKey.FETCH, ctx.api_version)
        by_topic: dict[str, list[Any]] = {}
        for (name, partition, _, _), (code, fetched, records) in zip(wanted, results, strict=True):
            high = fetched.high_watermark if fetched is not None else -1
            start = fetched.log_start_offset if fetched is not None else -1
            by_topic.setdefault(name, []).append(
                build(
                    mod.PartitionData,
                    partition_index=partition,
                    error_code=code.kio,
                    high_watermark=high,
                    last_stable_offset=high,
                    log_start_offset=start,
                    aborted_transactions=(),
                    records=records,
                )
            )
        return build(
            mod.FetchResponse,
            throttle_time=_ZERO,
            error_code=ErrorCode.NONE.kio,
            session_id=0,
            responses=tuple(
                build(mod.FetchableTopicResponse, topic=n, partitions=tuple(p)) for n, p in by_topic.items()
            ),
        )

    # --- list offsets, producer ids -------------------------------------------------------------
    async def list_offsets(self, ctx: RequestContext, req: Any) -> Any:
        mod = module(ApiKey.LIST_OFFSETS, ctx.api_version)
        topics = []
        for t in req.topics:
            parts = []
            denied = await self._access.denied(ctx, quire_topic(self._config, t.name), Need.CONSUME)
            for p in t.partitions:
                try:
                    if denied:
                        raise _NotAllowed
                    offset, timestamp = await self._topics.kafka_list_offset(
                        quire_topic(self._config, t.name), p.partition_index, p.timestamp
                    )
                    code = ErrorCode.NONE
                except QuireError as exc:
                    offset, timestamp, code = -1, -1, error_code(exc)
                except _NotAllowed:
                    offset, timestamp, code = -1, -1, ErrorCode.TOPIC_AUTHORIZATION_FAILED
                parts.append(
                    build(
                        mod.ListOffsetsPartitionResponse,
                        partition_index=p.partition_index,
                        error_code=code.kio,
                        timestamp=timestamp,
                        offset=offset,
                    )
                )
            topics.append(build(mod.ListOffsetsTopicResponse, name=t.name, partitions=tuple(parts)))
        return build(mod.ListOffsetsResponse, throttle_time=_ZERO, topics=tuple(topics))

    async def init_producer_id(self, ctx: RequestContext, req: Any) -> Any:
        """A new producer id: 62 random bits, so that brokers need not agree on a counter (a
        clash between two live producers is about as likely as a 2^-62 coin)."""
        mod = module(ApiKey.INIT_PRODUCER_ID, ctx.api_version)
        if req.transactional_id:
            return build(
                mod.InitProducerIdResponse,
                throttle_time=_ZERO,
                error_code=ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED.kio,
                producer_id=-1,
                producer_epoch=-1,
            )
        return build(
            mod.InitProducerIdResponse,
            throttle_time=_ZERO,
            error_code=ErrorCode.NONE.kio,
            producer_id=secrets.randbits(62),
            producer_epoch=0,
        )


class _NotAllowed(Exception):
    pass


def batches(fetched: KafkaFetched) -> bytes:
    """The Fetch `records` of what was found: the compacted messages as one batch, then each
    stored entry as a batch with its base offset set."""
    parts: list[bytes | memoryview] = []
    if fetched.compacted:
        parts.append(_encode_messages(fetched.compacted))
    for base, payload in fetched.entries:
        if payload[2] == KIND_KAFKA:
            parts += based(kafka_batch(payload), base)  # views: the join below is the one copy
        else:
            parts.append(_encode_messages(decode_batch(0, 0, payload)))
    return b"".join(parts)


def _encode_messages(messages: list[StoredMessage]) -> bytes:
    """Messages that carry their offsets as one uncompressed batch (offsets may leave gaps)."""
    first = messages[0].offset
    assert first is not None
    records = [
        KafkaRecord(
            offset_delta=(m.offset or first) - first,
            timestamp=m.event_time if m.event_time is not None else m.publish_time,
            key=None if m.key is None else bytes_of(m.key),  # a Kafka key's own bytes again
            value=m.value or None,  # an empty value is a tombstone: Kafka's is null
            headers=[(k, bytes_of(v)) for k, v in (m.properties or {}).items()],
        )
        for m in messages
    ]
    return encode_batch(first, records)


_ZERO = datetime.timedelta(0)
