"""What the Kafka listener asks of topics: produce a record batch, fetch by offset, list and
delete by offset, describe a topic as Kafka configs (DESIGN §11).

A Kafka partition is a partition's managed ledger (partition 0 of a non-partitioned topic is
its one managed ledger); offsets are the managed ledger's (managed_ledger.offsets).

Produce stores the record batch unchanged as one entry (entry_format kind 2) through the
topic's one publish path (`Topic.publish`); the idempotent producer's rules are in
`topics.dedup`, beside the REST producers'.

Fetch reads entries from the one that holds the offset; on a topic with compaction on it first
serves the compacted view up to the horizon (rows carry their offsets), then the tail.
"""

from __future__ import annotations

import asyncio

from bookie.metadata_calls import call_store
from managed_ledger.api import ManagedLedger
from managed_ledger.entry_format import StoredMessage, batch_publish_time, encode_kafka, entry_offsets
from managed_ledger.errors import EntryNotFoundError
from managed_ledger.position import MessageId, Position
from topics import names
from topics.api import KafkaBatch as KafkaBatch  # re-exported: the listener's tests import it here
from topics.api import KafkaFetched as KafkaFetched
from topics.api import TopicPolicies
from topics.dedup import (
    KafkaProducerState,
    KafkaSequence,
    check_kafka_sequence,
    check_stored_before,
    kafka_producer_name,
)
from topics.errors import (
    BatchTooLargeError,
    OffsetOutOfRangeError,
    TopicNotFoundError,
    UnknownPartitionError,
)
from topics.readers import EARLIEST, after
from topics.registry import TopicRegistry
from topics.topic import Entry, Topic
from topics.topic_ops import TopicOpsAdmin


class KafkaWrite:
    """A produced record batch as a write on one partition: stored unchanged as one entry
    (entry_format kind 2), under its idempotent producer's rules (topics.dedup)."""

    shielded = True  # the producer's state must learn the outcome even if the handler is gone

    def __init__(self, t: Topic, partition: int, batch: KafkaBatch) -> None:
        self.partition = partition
        self.producer = (
            kafka_producer_name(batch.producer_id, batch.producer_epoch) if batch.producer_id >= 0 else None
        )
        self.base_offset: int | None = None  # the batch's first offset, once stored (or found)
        self._topic = t
        self._batch = batch
        self._state: KafkaProducerState | None = None
        self._first = batch.base_sequence  # unwrapped once the producer's state is known

    def prepare(self, ml: ManagedLedger, now_ms: int) -> Entry | None:
        batch, highest = self._batch, None
        if self.producer is not None:
            sequence = KafkaSequence(
                batch.producer_id, batch.producer_epoch, batch.base_sequence, batch.count
            )
            t = self._topic
            checked = check_kafka_sequence(
                t.kafka_producers, t.name, self.partition, sequence, ml, t.policies.deduplication_enabled
            )
            if isinstance(checked, int):
                self.base_offset = checked  # the same batch again: its offset, nothing written
                return None
            check_stored_before(ml, self.producer, checked, sequence)
            self._state, self._first = checked, checked.next_sequence
            highest = self._first + batch.count - 1
            checked.pushed(self._first, batch.count)
        return Entry(encode_kafka(now_ms, batch.data, batch.count), highest)

    def failed(self) -> None:
        if self._state is not None:
            self._state.failed(self._first, self._batch.count)

    def stored(self, position: Position, base_offset: int) -> tuple[int, int]:
        if self._state is not None:
            self._state.stored(self._first, self._batch.count, base_offset)
        self.base_offset = base_offset
        return self._batch.count, len(self._batch.data)


class KafkaTopics:
    """What the Kafka listener asks of topics (see the module's docstring)."""

    def __init__(self, registry: TopicRegistry, ops: TopicOpsAdmin) -> None:
        self._r = registry
        self._ops = ops

    async def kafka_partitions(self, topic: str) -> int:
        """The topic's Kafka partition count (a non-partitioned topic has one); TopicNotFoundError."""
        meta = await call_store(self._r.store.get_topic, topic)
        if meta is None:
            raise TopicNotFoundError(topic)
        return max(1, meta.partitions)

    async def kafka_policies(self, topic: str) -> TopicPolicies:
        """The topic's effective policies (DescribeConfigs shows them as Kafka configs)."""
        names.validate_topic(topic)
        return await self._r.resolve_policies(topic)

    async def _kafka_ml(self, topic: str, partition: int) -> tuple[Topic, ManagedLedger]:
        t = await self._r.topic(topic)
        if not 0 <= partition < len(t.mls):
            raise UnknownPartitionError(topic, partition)
        return t, t.mls[partition]

    # --- produce -------------------------------------------------------------------------------
    async def kafka_produce(self, topic: str, partition: int, batch: KafkaBatch) -> int:
        """Store the batch through the topic's one publish path; its first record's offset."""
        t, _ = await self._kafka_ml(topic, partition)
        if len(batch.data) > self._r.config.max_batch_size_bytes:
            limit = self._r.config.max_batch_size_bytes
            raise BatchTooLargeError("bytes", len(batch.data), limit, "max_batch_size_bytes")
        write = KafkaWrite(t, partition, batch)
        await t.publish([write])
        assert write.base_offset is not None, "a publish that returned stored the batch or found it"
        return write.base_offset

    # --- fetch ---------------------------------------------------------------------------------
    async def kafka_fetch(self, topic: str, partition: int, offset: int, max_bytes: int) -> KafkaFetched:
        """Entries from the one holding `offset` while they fit in max_bytes (at least one, as
        Kafka returns a first batch larger than the limit). OffsetOutOfRangeError outside the
        partition's [log start, high watermark]."""
        t, ml = await self._kafka_ml(topic, partition)
        high = ml.high_watermark
        out = KafkaFetched(high, await self._kafka_log_start(t, ml))
        if offset == high:
            return out
        if not out.log_start_offset <= offset < high:
            raise OffsetOutOfRangeError(t.name, partition, offset, out.log_start_offset, high)
        size = 0
        if t.policies.compaction_on:
            out.compacted, size, offset = await self._compacted_from(ml, offset, max_bytes)
            if size >= max_bytes:
                return out
        position = await ml.find_offset(offset)
        if position is None:
            return out
        while size < max_bytes or not (out.entries or out.compacted):
            entries = await ml.read_entries(position, 16)
            for pos, payload in entries:
                header = entry_offsets(payload)
                if header is None or header[0] < 0:
                    return out
                out.entries.append((header[0], payload))
                size += len(payload)
                ml.offsets.note(header[0], pos, header[1])
                if size >= max_bytes:
                    break
            if not entries or size >= max_bytes:
                break
            position = ml.next_position(entries[-1][0])
        return out

    async def _kafka_log_start(self, t: Topic, ml: ManagedLedger) -> int:
        """The topic's log start, or the first compacted row's offset when retention deleted the
        ledgers that row came from; never before a truncation (DeleteRecords) point."""
        start = await ml.log_start_offset()
        if t.policies.compaction_on:
            first = await self._r.compacted.read(ml.name, ml.log_start or EARLIEST, 1)
            if first and first[0].offset is not None:
                start = min(start, first[0].offset)
        return start

    async def _compacted_from(
        self, ml: ManagedLedger, offset: int, max_bytes: int
    ) -> tuple[list[StoredMessage], int, int]:
        """Compacted messages with offsets >= `offset` up to the horizon, their size, and the
        offset to go on from in the topic (after the horizon)."""
        horizon = await self._r.compacted.horizon(ml.name)
        if horizon is None:
            return [], 0, offset
        position = await ml.find_offset(offset)
        start = EARLIEST
        if position is not None:
            base = entry_offsets(await ml.read_entry(position))
            start = MessageId(position.ledger_id, position.entry_id, offset - base[0] if base else 0)
        if start > horizon:
            return [], 0, offset
        out: list[StoredMessage] = []
        size = 0
        while size < max_bytes:
            page = await self._r.compacted.read(ml.name, start, 1_000, until=horizon)
            if not page:
                break
            start = after(page[-1].message_id)
            kept = [m for m in page if m.offset is not None and m.offset >= offset]
            out.extend(kept)
            size += sum(len(m.value) + len(m.key or "") + 40 for m in kept)
        if size < max_bytes:  # the whole view is served: the topic goes on after the horizon
            return out, size, max(offset, await self._offset_after(ml, horizon))
        return out, size, offset

    async def _offset_after(self, ml: ManagedLedger, horizon: MessageId) -> int:
        """The offset right after the horizon's message (the log start when its entry is gone)."""
        try:
            header = entry_offsets(await ml.read_entry(horizon.position))
        except EntryNotFoundError:
            return await ml.log_start_offset()
        if header is None or header[0] < 0:
            return await ml.log_start_offset()
        return header[0] + horizon.batch_index + 1

    def kafka_arm(self, topic: str) -> asyncio.Future[None] | None:
        """A future that completes at the topic's next produce (None: not open here)."""
        t = self._r.topics.get(topic)
        return t.notifier.arm() if t is not None else None

    # --- offsets by time, delete records, configs --------------------------------------------------
    async def kafka_list_offset(self, topic: str, partition: int, timestamp_ms: int) -> tuple[int, int]:
        """(offset, timestamp): -1 latest, -2 earliest, else the first entry published at or
        after the time, with its publish time (Kafka answers the found record's time, not the
        time asked for); (-1, -1) when there is none."""
        t, ml = await self._kafka_ml(topic, partition)
        if timestamp_ms == -1:
            return ml.high_watermark, -1
        if timestamp_ms == -2:
            return await self._kafka_log_start(t, ml), -1
        position = await ml.find_position_by_publish_time(timestamp_ms)
        if position is None:
            return -1, -1
        payload = await ml.read_entry(position)
        header = entry_offsets(payload)
        if header is None or header[0] < 0:
            return -1, -1
        return max(header[0], await ml.log_start_offset()), batch_publish_time(payload)

    async def kafka_delete_records(self, topic: str, partition: int, offset: int) -> int:
        """Kafka's DeleteRecords: the log start moves to `offset` (-1: the high watermark);
        the new low watermark."""
        t, ml = await self._kafka_ml(topic, partition)
        high = ml.high_watermark
        offset = high if offset == -1 else offset
        start = await ml.log_start_offset()
        if not 0 <= offset <= high:
            raise OffsetOutOfRangeError(t.name, partition, offset, start, high)
        if offset <= start:
            return start
        # The entry holding `offset`, or at the high watermark the one holding the offset before
        # it (then the id right after its last message): never the entries appended meanwhile.
        position = await ml.find_offset(min(offset, high - 1))
        header = entry_offsets(await ml.read_entry(position)) if position is not None else None
        assert position is not None and header is not None, "offsets below the high watermark are stored"
        message_id = MessageId(position.ledger_id, position.entry_id, offset - header[0])
        await self._ops.truncate_before(t.name, message_id)
        return offset
