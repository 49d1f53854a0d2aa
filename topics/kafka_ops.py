"""What the Kafka listener asks of topics: produce a record batch, fetch by offset, list and
delete by offset, describe a topic as Kafka configs (DESIGN §11).

A Kafka partition is a partition's managed ledger (partition 0 of a non-partitioned topic is
its one managed ledger); offsets are the managed ledger's (managed_ledger.offsets).

Produce stores the record batch unchanged as one entry (entry_format kind 2). Idempotent
producers (producer id >= 0) are checked per (partition, producer id) as Kafka's broker does:
an older epoch is refused (INVALID_PRODUCER_EPOCH), a batch equal to one of the last five
answers that batch's offset and writes nothing, an earlier sequence known stored is a duplicate
(DUPLICATE_SEQUENCE_NUMBER, which clients take as success), a gap is OUT_OF_ORDER_SEQUENCE.
The managed ledger's own dedup also sees every batch (producer `kafka-<id>-<epoch>`, the
batch's last sequence), so with the deduplication policy on, a new owner's producer state
starts after the highest sequence stored: a retry is still a duplicate and a batch past it a
gap. Without it, the first batch to arrive starts the state and what precedes it is not known
stored (OUT_OF_ORDER, never "duplicate"); docs/kafka.md says what that means for idempotence.

Fetch reads entries from the one that holds the offset; on a topic with compaction on it first
serves the compacted view up to the horizon (rows carry their offsets), then the tail.
"""

from __future__ import annotations

import asyncio
from collections import deque
from dataclasses import dataclass, field

from managed_ledger.api import ManagedLedger
from managed_ledger.entry_format import StoredMessage, batch_publish_time, encode_kafka, entry_offsets
from managed_ledger.errors import EntryNotFoundError, ManagedLedgerTerminatedError, SequenceInFlightError
from managed_ledger.position import MessageId
from topics import names
from topics.admin import AdminPlane
from topics.api import TopicPolicies
from topics.base import OpenTopic
from topics.errors import (
    BatchTooLargeError,
    KafkaSequenceError,
    OffsetOutOfRangeError,
    StorageUnavailableError,
    TopicNotFoundError,
    TopicsError,
    UnknownPartitionError,
    WriteInFlightError,
)
from topics.readers import EARLIEST, after
from topics.topic_ops import check_writable, terminated_error

RECENT_BATCHES = 5  # Kafka's ProducerStateEntry.NUM_BATCHES_TO_RETAIN; clients cap in-flight at 5


@dataclass(frozen=True, slots=True)
class KafkaBatch:
    """One produced record batch (magic 2), already validated by the listener."""

    data: bytes
    count: int
    producer_id: int = -1
    producer_epoch: int = -1
    base_sequence: int = -1


@dataclass(slots=True)
class KafkaFetched:
    """What a fetch found: compacted messages (each with its offset) first, then stored entries
    as (base offset, entry payload); the partition's bounds."""

    high_watermark: int
    log_start_offset: int
    compacted: list[StoredMessage] = field(default_factory=list)
    entries: list[tuple[int, bytes]] = field(default_factory=list)


SEQUENCES = 1 << 31  # a producer's sequence numbers wrap to 0 after 2**31 - 1 (Kafka's rule)


def unwrap(sequence: int, near: int) -> int:
    """The unwrapped sequence number (counting every wrap) whose wrapped value is `sequence`,
    nearest to the unwrapped `near`."""
    value = near - (near - sequence) % SEQUENCES
    return value + SEQUENCES if near - value > SEQUENCES // 2 else value


@dataclass(slots=True)
class _Producer:
    """An idempotent producer on one partition. `next_sequence` moves when a batch's write
    starts and moves back when it fails, so that the failed batch's retry is taken and the
    batches after it are refused as a gap until then (Kafka's broker only advances past a batch
    it appended; clients retry the failed batch first, then the ones after it)."""

    epoch: int
    # The first sequence of the next new batch (pushed, maybe in flight). Sequences here are
    # unwrapped: they keep counting past 2**31 where the wire's wrap to 0, so that order and the
    # managed ledger's dedup (which only goes up) hold across a wrap.
    next_sequence: int
    # The first sequence known stored (or being written): this state's start, or 0 when the
    # managed ledger's dedup vouched for everything before its start. Below it, a batch cannot be
    # called a duplicate -- it may be one lost in an owner change, never stored.
    floor: int
    recent: deque[tuple[int, int, int]] = field(default_factory=lambda: deque(maxlen=RECENT_BATCHES))
    in_flight: set[tuple[int, int]] = field(default_factory=set)  # (first sequence, count)


class KafkaOps(AdminPlane):
    async def kafka_partitions(self, topic: str) -> int:
        """The topic's Kafka partition count (a non-partitioned topic has one); TopicNotFoundError."""
        meta = await self._call(self._store.get_topic, topic)
        if meta is None:
            raise TopicNotFoundError(topic)
        return max(1, meta.partitions)

    async def kafka_policies(self, topic: str) -> TopicPolicies:
        """The topic's effective policies (DescribeConfigs shows them as Kafka configs)."""
        names.validate_topic(topic)
        return await self._resolve_policies(topic)

    async def _kafka_ml(self, topic: str, partition: int) -> tuple[OpenTopic, ManagedLedger]:
        t = await self._topic(topic)
        if not 0 <= partition < len(t.mls):
            raise UnknownPartitionError(topic, partition)
        return t, t.mls[partition]

    # --- produce -------------------------------------------------------------------------------
    async def kafka_produce(self, topic: str, partition: int, batch: KafkaBatch) -> int:
        """Store the batch; its first record's offset."""
        t, ml = await self._kafka_ml(topic, partition)
        if len(batch.data) > self._config.max_batch_size_bytes:
            limit = self._config.max_batch_size_bytes
            raise BatchTooLargeError("bytes", len(batch.data), limit, "max_batch_size_bytes")
        check_writable(t, [partition])
        if t.policies.backlog_quotas:
            await self._quota_gate(t)
        producer, last_sequence, state, first = None, None, None, batch.base_sequence
        if batch.producer_id >= 0:
            producer = f"kafka-{batch.producer_id}-{batch.producer_epoch}"
            checked = self._check_sequence(t, partition, batch, ml)
            if isinstance(checked, int):
                return checked  # the same batch again: its offset, nothing written
            state = checked
            first = state.next_sequence  # the batch's, unwrapped
            last_sequence = first + batch.count - 1
            try:
                if ml.dedup_check(producer, [last_sequence])[0]:
                    # stored before (a restart forgot it here): the next batch follows it
                    state.next_sequence = max(state.next_sequence, last_sequence + 1)
                    raise KafkaSequenceError("duplicate", producer, batch.base_sequence)
            except SequenceInFlightError as exc:
                raise WriteInFlightError(t.name, producer, exc.sequence_id) from exc
        payload = encode_kafka(self._clock.now_ms(), batch.data, batch.count)
        pushed = (first, batch.count)
        if state is not None:
            state.next_sequence = first + batch.count
            state.in_flight.add(pushed)
        # Shielded: a handler cancelled mid-write (its connection closed) must not cut the write's
        # own bookkeeping short, nor leave the producer's state with the batch pushed for ever.
        append = self._kafka_append(t, ml, payload, producer, last_sequence, state, pushed)
        base = await asyncio.shield(append)
        t.meters.appended(partition, batch.count, len(batch.data))
        t.notifier.notify()
        if t.policies.backlog_quotas:
            await self._quota_after_produce(t)
        return base

    async def _kafka_append(
        self,
        t: OpenTopic,
        ml: ManagedLedger,
        payload: bytes,
        producer: str | None,
        last_sequence: int | None,
        state: _Producer | None,
        pushed: tuple[int, int],
    ) -> int:
        """Append the entry; the producer's state learns the outcome either way."""
        try:
            _, base = await ml.append_entry(payload, producer, last_sequence)
        except BaseException as exc:
            if state is not None:
                state.in_flight.discard(pushed)
                state.next_sequence = min(state.next_sequence, pushed[0])  # its retry comes next
            if isinstance(exc, ManagedLedgerTerminatedError):
                raise terminated_error(t, exc) from exc
            if isinstance(exc, Exception) and not isinstance(exc, TopicsError):
                raise StorageUnavailableError(f"append to {ml.name} failed: {exc}") from exc
            raise
        if state is not None:
            state.in_flight.discard(pushed)
            state.recent.append((pushed[0], pushed[1], base))
        return base

    def _check_sequence(
        self, t: OpenTopic, partition: int, batch: KafkaBatch, ml: ManagedLedger
    ) -> _Producer | int:
        """The producer's state, the batch being next, or the offset of the same batch seen among
        the last five; KafkaSequenceError for an old epoch, a duplicate or a gap,
        WriteInFlightError while the same batch's first try is still being written."""
        key = (partition, batch.producer_id)
        state = t.kafka_producers.get(key)
        if state is None or batch.producer_epoch > state.epoch:
            state = self._new_producer(batch, ml)
            t.kafka_producers[key] = state
        elif batch.producer_epoch < state.epoch:
            raise KafkaSequenceError("epoch", f"producer {batch.producer_id}", batch.producer_epoch)
        first = unwrap(batch.base_sequence, state.next_sequence)
        for seen_first, seen_count, seen_base in state.recent:
            if seen_first == first and seen_count == batch.count:
                return seen_base
        if (first, batch.count) in state.in_flight:  # a retry while the first try is writing
            raise WriteInFlightError(t.name, f"kafka-{batch.producer_id}-{batch.producer_epoch}", first)
        if first < state.floor:  # not known to be stored: the client must not take it as done
            raise KafkaSequenceError("unknown", f"producer {batch.producer_id}", first)
        if first < state.next_sequence:
            raise KafkaSequenceError("duplicate", f"producer {batch.producer_id}", first)
        if first > state.next_sequence:
            raise KafkaSequenceError("gap", f"producer {batch.producer_id}", first)
        return state  # pushed by the caller once every check passed

    @staticmethod
    def _new_producer(batch: KafkaBatch, ml: ManagedLedger) -> _Producer:
        """The state of a producer (or epoch) this owner has not seen. With dedup on, the managed
        ledger knows the highest sequence stored: the state starts right after it, so a batch
        past it is a gap (the client resends the earlier, maybe lost, one) and one before it was
        stored; the highest also tells how often the sequence has wrapped. With nothing known
        (dedup off, or a producer new to the partition) the first batch to arrive starts it,
        whatever its sequence, as Kafka accepts an unknown producer's; what precedes it is then
        not known stored, so it is never answered a duplicate."""
        highest = ml.dedup_highest(f"kafka-{batch.producer_id}-{batch.producer_epoch}")
        if highest is None:
            return _Producer(batch.producer_epoch, batch.base_sequence, batch.base_sequence)
        return _Producer(batch.producer_epoch, highest + 1, 0)

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

    async def _kafka_log_start(self, t: OpenTopic, ml: ManagedLedger) -> int:
        """The topic's log start, or the first compacted row's offset when retention deleted the
        ledgers that row came from; never before a truncation (DeleteRecords) point."""
        start = await ml.log_start_offset()
        if t.policies.compaction_on:
            first = await self._compacted.read(ml.name, ml.log_start or EARLIEST, 1)
            if first and first[0].offset is not None:
                start = min(start, first[0].offset)
        return start

    async def _compacted_from(
        self, ml: ManagedLedger, offset: int, max_bytes: int
    ) -> tuple[list[StoredMessage], int, int]:
        """Compacted messages with offsets >= `offset` up to the horizon, their size, and the
        offset to go on from in the topic (after the horizon)."""
        horizon = await self._compacted.horizon(ml.name)
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
            page = await self._compacted.read(ml.name, start, 1_000, until=horizon)
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
        t = self._topics.get(topic)
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
        await self.truncate_before(t.name, message_id)
        return offset
