"""The data plane's answer when the managed ledger fails underneath the topics layer: opening a
topic whose managed ledger is fenced (this broker's lease lapsed while it opened it, or another
owner took it) is NOT_LEADER_OR_FOLLOWER for that partition, which clients retry after a
metadata refresh. The connection stays open: closing it would leave the client's other in-flight
batches on it "possibly persisted", and an idempotent librdkafka producer may later resend those
under a bumped epoch (docs/chaos.md). Real listener and data plane over a socket; the topics
service raises what the real one raised in the chaos campaign."""

from __future__ import annotations

import datetime
from typing import Any

from kio.schema.fetch.v11.request import FetchPartition, FetchTopic
from kio.schema.fetch.v11.request import FetchRequest as FetchV11
from kio.schema.list_offsets.v3.request import ListOffsetsPartition, ListOffsetsTopic
from kio.schema.list_offsets.v3.request import ListOffsetsRequest as ListOffsetsV3
from kio.schema.produce.v7.request import PartitionProduceData, TopicProduceData
from kio.schema.produce.v7.request import ProduceRequest as ProduceV7
from kio.static.primitive import i32Timedelta

from app.kafka_listener.common import KafkaConfig
from app.kafka_listener.data import DataPlane
from app.kafka_listener.errors import ErrorCode
from common.kafka_records import KafkaRecord, encode_batch
from managed_ledger.errors import ManagedLedgerFencedError
from tests.kafka_listener.support import RawClient, running


class FencedTopics:
    """A topics service whose every data call fails as opening a fenced managed ledger does."""

    def __init__(self) -> None:
        self.calls = 0

    def _fenced(self, topic: str, partition: int) -> ManagedLedgerFencedError:
        self.calls += 1
        return ManagedLedgerFencedError(f"{topic}-partition-{partition} is fenced")

    async def kafka_produce(self, topic: str, partition: int, batch: Any) -> int:
        raise self._fenced(topic, partition)

    async def kafka_fetch(self, topic: str, partition: int, offset: int, max_bytes: int) -> Any:
        raise self._fenced(topic, partition)

    async def kafka_list_offset(self, topic: str, partition: int, timestamp_ms: int) -> Any:
        raise self._fenced(topic, partition)

    def kafka_arm(self, topic: str) -> None:
        return None


def produce(partitions: int) -> ProduceV7:
    batch = encode_batch(0, [KafkaRecord(0, 0, None, b"x")])
    parts = tuple(PartitionProduceData(index=i, records=batch) for i in range(partitions))
    return ProduceV7(
        transactional_id=None,
        acks=-1,
        timeout=i32Timedelta.parse(datetime.timedelta(seconds=5)),
        topic_data=(TopicProduceData(name="k", partition_data=parts),),
    )


async def test_a_fenced_managed_ledger_is_not_leader_and_the_connection_stays_open() -> None:
    topics = FencedTopics()
    plane = DataPlane(topics, KafkaConfig())  # type: ignore[arg-type]
    async with running(plane.handlers()) as server:
        client = await RawClient.connect(server.port)
        answer = await client.call(produce(2), 1)
        parts = [p for t in answer.responses for p in t.partition_responses]
        moved = ErrorCode.NOT_LEADER_OR_FOLLOWER
        assert [(p.index, p.error_code, p.base_offset) for p in parts] == [(0, moved, -1), (1, moved, -1)]
        fetch = FetchV11(
            replica_id=-1,
            max_wait=i32Timedelta.parse(datetime.timedelta(0)),
            min_bytes=1,
            max_bytes=1 << 20,
            isolation_level=0,
            session_id=0,
            session_epoch=-1,
            topics=(
                FetchTopic(
                    topic="k",
                    partitions=(
                        FetchPartition(
                            partition=0,
                            current_leader_epoch=-1,
                            fetch_offset=0,
                            log_start_offset=-1,
                            partition_max_bytes=1 << 20,
                        ),
                    ),
                ),
            ),
            forgotten_topics_data=(),
            rack_id="",
        )
        fetched = await client.call(fetch, 2)  # the same connection: still open
        assert [p.error_code for t in fetched.responses for p in t.partitions] == [moved]
        listed = await client.call(
            ListOffsetsV3(
                replica_id=-1,
                isolation_level=0,
                topics=(
                    ListOffsetsTopic(
                        name="k",
                        partitions=(ListOffsetsPartition(partition_index=0, timestamp=-1),),
                    ),
                ),
            ),
            3,
        )
        assert [p.error_code for t in listed.topics for p in t.partitions] == [moved]
        assert topics.calls == 4
        await client.close()
