"""A durable subscription's state (Pulsar's PersistentSubscription): what every type shares.

One `Subscription` per subscription name of a topic, over one cursor per managed ledger (one for
a plain topic, one per partition). The cursors are durable: mark-delete plus acked entries, and
with them the delivery state (`topics.delivery_state`): acks inside batches and the redelivery
counts of delivered, unacked messages, restored when the subscription is built (after a restart
or when another broker takes the topic over). The rest lives in memory only (unacked messages
are delivered again from the cursors, as in Pulsar):

- `pending`: delivered, not acked, with the deadline of its ack timeout. Insertion order is
  deadline order (one timeout per subscription, and a redelivery re-inserts at the end), so
  expiring is popping from the front.
- `redeliver`: a heap of ids (nacked, timed out) handed out before new ones, in id order.
- `ready`: messages read from a cursor, not yet handed out (key_shared queues them per key).
- `_delayed` (shared, key_shared): messages read before their delivery time, put back in
  `ready` when due (`topics.delayed`).
- `entries`: per entry read, its batch size and the batch indexes acked so far (acked on its
  cursor once all are). `counts`, per partition: the redelivery count of each message delivered.

Who gets which message is its dispatcher's (`topics.dispatchers`), one per type, chosen once
when the subscription is built: shared, single-active (exclusive and failover) or key_shared.
The subscription hands messages out (`hand_out`) to whom the dispatcher says, reads ahead for
it (`read_more`, through the compacted view per partition with `read_compacted`:
`topics.compacted_reads`), and does what no type changes: acks, cumulative acks, nacks, ack
timeouts, seeks. A consumer that leaves (idle past `exclusive_idle_ms`, or gone) has what it
held unacked redelivered, in id order, to the consumers that own it now (`consumers_left`).
Past `max_redeliveries` a message goes to the dead-letter topic (`topics.dead_letters`).

The delivery state is stored with the cursor's batched flush, not per message: a change only
tells the cursor (`delivery_state_changed`), and the flush asks `_delivery_state` for the JSON
once. It is taken in the same synchronous step as the cursor's acks, so the two always agree;
what was not flushed yet is lost towards redelivery only (a lost batch ack means the message
comes again, a lost count a lower count), never towards skipping a message. A seek clears the
state before the cursor's reset, whose flush stores the cleared state.
"""

from __future__ import annotations

import asyncio
import functools
import heapq
import logging
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass
from typing import Any

from common.errors import QuireError
from managed_ledger.api import Cursor, ManagedLedger
from managed_ledger.clock import Clock
from managed_ledger.entry_format import StoredMessage
from managed_ledger.errors import EntryNotFoundError
from managed_ledger.position import MessageId, Position
from topics import dead_letters, delivery_state
from topics.api import Delivery, KeySharedPolicy, SubscriptionOptions
from topics.compacted_reads import CompactedPartition
from topics.dead_letters import DeadLetterWriter
from topics.delayed import DELAYING_TYPES, DelayedMessages
from topics.delivery_state import EntryAcks
from topics.dispatchers import KeySharedDispatcher, SharedDispatcher, dispatcher_for
from topics.readers import BEYOND, CompactedSource, decode_entry, entries_wanted
from topics.ready_queue import ReadyQueue

# Resolves the partition of a message id the subscription has no state for (ledger ids are
# unique across the cluster, so an id names its managed ledger); None when no partition has it.
log = logging.getLogger("quire.topics")
PartitionLookup = Callable[[MessageId], Awaitable[int | None]]


@dataclass(slots=True)
class _Pending:
    message: StoredMessage
    partition: int
    deadline_ms: int
    consumer: str | None = None


class Subscription:
    def __init__(
        self,
        name: str,
        topic: str,
        mls: list[ManagedLedger],
        cursors: list[Cursor],
        options: SubscriptionOptions,
        *,
        ack_timeout_ms: int,
        max_unacked: int,
        exclusive_idle_ms: int,
        clock: Clock,
        compacted: CompactedSource,
        partition_of: PartitionLookup,
        dead_letter: DeadLetterWriter,
    ) -> None:
        self.name = name
        self.topic = topic
        self.mls = mls
        self.cursors = cursors
        self.options = options
        self.ack_timeout_ms = ack_timeout_ms
        self.max_unacked = max_unacked
        self._clock = clock
        self._partition_of = partition_of
        self._dead_letter = dead_letter
        self.dead_letter_topic = options.dead_letter_topic or f"{topic}-{name}-DLQ"
        self.dead_lettered = 0  # messages written to the dead-letter topic (a metric)
        self._reasons: dict[MessageId, str] = {}  # why a message waits for redelivery
        self._dead: list[tuple[int, StoredMessage]] = []  # found by this fill, written after it
        self.lock = asyncio.Lock()  # one delivery or ack at a time
        self.pending: dict[MessageId, _Pending] = {}
        # Per partition: the redelivery count of the last delivery of a delivered, unacked message.
        self._counts: list[dict[MessageId, int]] = [{} for _ in cursors]
        self._redeliver: list[MessageId] = []
        self._redeliver_msgs: dict[MessageId, _Pending] = {}  # as it was pending: who had it
        self.ready = ReadyQueue()
        # Shared and key_shared: messages read before their delivery time (topics.delayed).
        self._delayed = DelayedMessages() if options.type in DELAYING_TYPES else None
        self._entries: dict[Position, EntryAcks] = {}
        self._touched: set[int] = set()  # partitions whose delivery state this fill changed
        # Per partition: its read through the compacted view (read_compacted).
        self._compacted_reads = [
            CompactedPartition(compacted, ml, cursor) for ml, cursor in zip(mls, cursors, strict=True)
        ]
        # Who gets what: chosen once, by type; a partition consumer's fill is shared's over it.
        self.dispatcher = dispatcher_for(options.type, self, exclusive_idle_ms)
        self._partitions = [SharedDispatcher(self, only=p) for p in range(len(cursors))]
        self._rr = 0
        self._entries_read = 0  # with _messages_read: the batch size seen, to size reads
        self._messages_read = 0
        self._restore()

    # --- delivery state ------------------------------------------------------------------------
    def _restore(self) -> None:
        """Take over the delivery state stored with the cursors, and have them ask for ours."""
        for partition, cursor in enumerate(self.cursors):
            counts = self._counts[partition]
            for stored in delivery_state.decode(cursor.delivery_state):
                pos = stored.position
                if cursor.is_acked(pos) or (stored.size and len(stored.acked) >= stored.size):
                    continue
                if stored.size:
                    self._entries[pos] = EntryAcks(partition, stored.size, set(stored.acked))
                for index, count in stored.counts.items():
                    counts[MessageId(pos.ledger_id, pos.entry_id, index)] = count
            cursor.track_delivery_state(functools.partial(self._delivery_state, partition))

    def _delivery_state(self, partition: int) -> dict[str, Any] | None:
        """The stored form of one partition's state (asked for by its cursor's flush)."""
        entries = {p: s for p, s in self._entries.items() if s.partition == partition}
        cursor = self.cursors[partition]
        counts = self._counts[partition]
        return delivery_state.encode(entries, counts, cursor.is_acked, delivery_state.MAX_MESSAGES)

    # --- delivery ------------------------------------------------------------------------------
    async def fill(
        self,
        max_messages: int,
        consumer_id: str | None,
        partition: int | None = None,
        whole_entries: bool = False,
    ) -> list[Delivery]:
        """Hand out up to max_messages: redeliveries first, then new messages, as the
        subscription's dispatcher decides (`topics.dispatchers`). Caller holds the
        subscription's lock, so concurrent consumers never get the same message. Messages past
        their redelivery limit met on the way go to the dead-letter topic instead.

        `partition`: only that partition's messages, handed out as shared does (the Pulsar
        door's partition consumers, each its own Pulsar subscription: the door applies the
        type's rules per partition). `whole_entries`: the last new entry handed out is handed
        out whole, past max_messages (a push consumer's permits, as Pulsar's dispatcher sends a
        batch whole)."""
        dispatcher = self.dispatcher if partition is None else self._partitions[partition]
        now = self._clock.now_ms()
        consumer = dispatcher.admit(consumer_id, now)
        self._expire(now)
        if self._delayed is not None and len(self._delayed):
            # Due now: ahead of what was read after them (their ids are lower).
            self.ready.extendleft(reversed(self._delayed.due(now)))
        try:
            out = await dispatcher.fill(consumer, max_messages, now, whole_entries)
        finally:
            touched, self._touched = self._touched, set()
            self._changed(touched)
        if self._dead:
            await self._write_dead_letters()
        return out

    def take_redeliveries(
        self,
        out: list[Delivery],
        max_messages: int,
        consumer: str,
        now: int,
        mine: Callable[[int, StoredMessage], bool] | None,
        whole_entries: bool = False,
    ) -> None:
        """Hand out what waits for redelivery, in id order, up to max_messages in `out`: what
        `mine` accepts, when given (the rest keeps waiting, for the consumer it is for). With
        `whole_entries` the last entry's messages that wait go too, past max_messages (a push
        consumer: two MESSAGEs of one entry would have the first's ack cover the second's)."""
        skipped: list[MessageId] = []
        redeliver = self._redeliver
        try:
            while redeliver and (
                len(out) < max_messages
                or (whole_entries and out and redeliver[0].position == out[-1].message.message_id.position)
            ):
                mid = heapq.heappop(redeliver)
                item = self._redeliver_msgs.get(mid)
                if item is None or self.is_acked(item.partition, mid):
                    self._redeliver_msgs.pop(mid, None)
                    continue
                if mine is not None and not mine(item.partition, item.message):
                    skipped.append(mid)
                    continue
                del self._redeliver_msgs[mid]
                self.hand_out(out, item.partition, item.message, now, consumer)
        finally:
            for mid in skipped:
                heapq.heappush(self._redeliver, mid)

    def hand_out(
        self, out: list[Delivery], partition: int, message: StoredMessage, now: int, consumer: str
    ) -> None:
        """Deliver a message to `consumer`, or, once delivered max_redeliveries + 1 times, set it
        aside for the dead-letter topic: pending (nothing else takes it) until it is written and
        acked, or, if the write fails, until its ack timeout sends it round again."""
        self._touched.add(partition)
        limit = self.options.max_redeliveries
        if limit:
            previous = self._counts[partition].get(message.message_id)
            if previous is not None and previous >= limit:
                self.pending[message.message_id] = _Pending(message, partition, now + self.ack_timeout_ms)
                self._dead.append((partition, message))
                return
        out.append(self._deliver(partition, message, now, consumer))

    async def _write_dead_letters(self) -> None:
        """Write the messages set aside to the dead-letter topic, then ack them here (a crash in
        between writes one again after the restart, never loses one)."""
        dead, self._dead = self._dead, []
        letters = [
            dead_letters.letter(m, self.topic, self.name, self._reasons.get(m.message_id, "redelivery limit"))
            for _, m in dead
        ]
        try:
            await self._dead_letter(self.dead_letter_topic, letters)
        except (QuireError, OSError) as exc:
            log.warning(
                "%s/%s: %d dead letters not written to %s (tried again after the ack timeout): %s",
                self.topic, self.name, len(letters), self.dead_letter_topic, exc,
            )  # fmt: skip
            return
        await self.ack([m.message_id for _, m in dead])
        self.dead_lettered += len(dead)

    def _deliver(self, partition: int, message: StoredMessage, now: int, consumer: str) -> Delivery:
        mid = message.message_id
        counts = self._counts[partition]
        previous = counts.get(mid)
        count = 0 if previous is None else previous + 1
        counts[mid] = count
        self.pending[mid] = _Pending(message, partition, now + self.ack_timeout_ms, consumer)
        return Delivery(message, count)

    # --- consumers (for the dispatchers) -------------------------------------------------------
    def key_shared_join(self, consumer_id: str, policy: KeySharedPolicy) -> None:
        """A key_shared consumer's policy, and it joins now (another type: nothing)."""
        if isinstance(self.dispatcher, KeySharedDispatcher):
            self.dispatcher.join(consumer_id, policy, self._clock.now_ms())

    def consumers_left(self, gone: list[str]) -> None:
        """What consumers that left held unacked is redelivered, held by nobody (key_shared:
        its key is free)."""
        if not gone:
            return
        for mid in [m for m, p in self.pending.items() if p.consumer in gone]:
            self._to_redeliver(mid, "consumer left")
        for pending in self._redeliver_msgs.values():
            if pending.consumer in gone:
                pending.consumer = None

    def held(self) -> list[tuple[StoredMessage, str | None]]:
        """The messages delivered and not acked (pending, or waiting for redelivery), each with
        the consumer that had it last."""
        out = [(p.message, p.consumer) for p in self.pending.values()]
        out.extend((p.message, p.consumer) for p in self._redeliver_msgs.values())
        return out

    def redeliver_all(self) -> None:
        """Every unacked message goes round again, in order (its consumer changed)."""
        for mid in list(self.pending):
            self._to_redeliver(mid, "consumer left")

    def _expire(self, now: int) -> None:
        while self.pending:
            mid, pending = next(iter(self.pending.items()))
            if pending.deadline_ms > now:
                return
            self._to_redeliver(mid, "ack timeout")

    def _to_redeliver(self, mid: MessageId, reason: str) -> None:
        pending = self.pending.pop(mid, None)
        if pending is not None:
            self._reasons[mid] = reason
            heapq.heappush(self._redeliver, mid)
            self._redeliver_msgs[mid] = pending

    def next_redelivery_ms(self) -> int | None:
        """Milliseconds until something may be handed out without a new message: the earliest
        ack timeout, or a consumer leaving (failover, key_shared); 0 when redeliveries wait now."""
        if self._redeliver_msgs:
            return 0
        now = self._clock.now_ms()
        times = self.dispatcher.next_leave_ms()
        if self.pending:
            times.append(next(iter(self.pending.values())).deadline_ms)
        if self._delayed is not None and (due := self._delayed.next_ms()) is not None:
            times.append(due)
        return max(0, min(times) - now) if times else None

    def is_acked(self, partition: int, mid: MessageId) -> bool:
        state = self._entries.get(mid.position)
        if state is not None:
            return mid.batch_index in state.acked
        return self.cursors[partition].is_acked(mid.position)

    async def read_more(self, wanted: int, only: int | None = None) -> bool:
        """Read entries from the next cursor with any (from partition `only`'s alone, when
        given); False when every cursor is at its end."""
        if only is not None:
            return await self._read_partition(only, wanted)
        n = len(self.cursors)
        for i in range(n):
            partition = (self._rr + i) % n
            if await self._read_partition(partition, wanted):
                self._rr = (partition + 1) % n
                return True
        return False

    async def _read_partition(self, partition: int, wanted: int) -> bool:
        if self.options.read_compacted:
            progressed = await self._read_compacted(partition, wanted)
            if progressed is not None:
                return progressed
        cursor = self.cursors[partition]
        entries = await cursor.read_entries(entries_wanted(wanted, self._messages_read, self._entries_read))
        self._entries_read += len(entries)
        for pos, payload in entries:
            messages = decode_entry(self.topic, pos.ledger_id, pos.entry_id, payload)
            self._messages_read += len(messages)
            if not messages:
                cursor.ack([pos])
                continue
            state = self._entries.get(pos)
            if state is None:
                state = self._entries[pos] = EntryAcks(partition, len(messages))
            kept = [m for m in messages if m.message_id.batch_index not in state.acked]
            deliver_at = messages[0].deliver_at
            if deliver_at is not None and self._delayed is not None and deliver_at > self._clock.now_ms():
                self._delayed.hold(partition, kept, deliver_at)  # the entry's time: all its messages
                continue
            self.ready.extend((partition, m) for m in kept)
        return bool(entries)

    async def _read_compacted(self, partition: int, wanted: int) -> bool | None:
        """Pulsar's branch rule for a subscription; None when the cursor is past the horizon."""
        return await self._compacted_reads[partition].read(
            wanted, functools.partial(self._take_compacted, partition)
        )

    def _take_compacted(self, partition: int, m: StoredMessage) -> bool:
        """A message read through the compacted view: ready to hand out, and awaited, unless it
        was acked inside its batch before a restart."""
        mid = m.message_id
        state = self._entries.get(mid.position)
        if state is None:
            # A compacted entry's survivors stand for their entry: acking them acks it.
            state = self._entries[mid.position] = EntryAcks(partition, 0, compacted=True)
        if state.compacted:
            state.count += 1
        if mid.batch_index in state.acked:
            return False  # neither handed out nor awaited
        self.ready.append((partition, m))
        return True

    # --- acks ----------------------------------------------------------------------------------
    async def ack(self, ids: list[MessageId]) -> None:
        to_ack: dict[int, list[Position]] = {}
        touched: set[int] = set()
        for mid in ids:
            partition = self._forget(mid)
            if partition is not None:
                touched.add(partition)
            state = await self._entry_state(mid, partition)
            if state is None or mid.batch_index >= state.count:
                continue
            touched.add(state.partition)
            state.acked.add(mid.batch_index)
            if len(state.acked) >= state.count:
                del self._entries[mid.position]
                to_ack.setdefault(state.partition, []).append(mid.position)
        for partition, positions in to_ack.items():
            self.cursors[partition].ack(positions)
        self._changed(touched)
        if self.options.read_compacted:
            for compacted in self._compacted_reads:
                compacted.acked(ids)

    def _changed(self, partitions: Iterable[int]) -> None:
        for partition in partitions:
            self.cursors[partition].delivery_state_changed()

    def _forget(self, mid: MessageId) -> int | None:
        """Drop a message from the in-memory queues and its count; its partition when known
        (the caller reports the change of that partition's delivery state)."""
        partition: int | None = None
        if (pending := self.pending.pop(mid, None) or self._redeliver_msgs.pop(mid, None)) is not None:
            partition = pending.partition
            self.dispatcher.settled(pending.message)
        elif (state := self._entries.get(mid.position)) is not None:
            partition = state.partition  # a count restored from the delivery state, maybe
        self._reasons.pop(mid, None)
        if partition is not None:
            self._counts[partition].pop(mid, None)
        else:  # a count restored for an entry read through the compacted view: partition unknown
            for p, counts in enumerate(self._counts):
                if counts.pop(mid, None) is not None:
                    self.cursors[p].delivery_state_changed()
        return partition

    async def _entry_state(self, mid: MessageId, partition: int | None) -> EntryAcks | None:
        """The entry's ack state, loaded (its batch size read) when this session never read it."""
        state = self._entries.get(mid.position)
        if state is not None:
            return state
        if partition is None:
            partition = await self._partition_of(mid)
            if partition is None:
                return None
        if self.cursors[partition].is_acked(mid.position):
            return None
        try:
            payload = await self.mls[partition].read_entry(mid.position)
        except EntryNotFoundError:
            return None
        count = len(decode_entry(self.topic, mid.ledger_id, mid.entry_id, payload))
        state = self._entries[mid.position] = EntryAcks(partition, count)
        return state

    async def ack_cumulative(self, mid: MessageId) -> None:
        """Every message up to and including `mid` (of its partition) is acked."""
        partition = self._forget(mid)
        state = await self._entry_state(mid, partition)
        if state is None:
            self._changed([] if partition is None else [partition])
            return
        partition = state.partition
        cursor, pos = self.cursors[partition], mid.position
        if mid.batch_index < state.count - 1:
            state.acked.update(range(mid.batch_index + 1))
        if mid.batch_index >= state.count - 1 or len(state.acked) >= state.count:
            # The whole entry (the messages after `mid` may have been acked one by one before).
            self._entries.pop(pos, None)
            cursor.ack_cumulative(pos)
        else:
            # Entry E-1 of the same ledger (or L:-1, "before entry 0 of L") and all before it.
            cursor.ack_cumulative(Position(pos.ledger_id, pos.entry_id - 1))
        self._forget_through(partition, mid, pos)

    def _forget_through(self, partition: int, mid: MessageId, pos: Position) -> None:
        """The cursor acked up to `mid`: forget those messages and the entries' states before `pos`."""
        for other in [m for m, p in self.pending.items() if p.partition == partition and m <= mid]:
            self._forget(other)
        for other in [m for m, p in self._redeliver_msgs.items() if p.partition == partition and m <= mid]:
            self._forget(other)
        counts = self._counts[partition]  # restored counts of messages not delivered again yet
        for other in [m for m in counts if m <= mid]:
            del counts[other]
        for position in [p for p, s in self._entries.items() if s.partition == partition and p < pos]:
            del self._entries[position]
        self._compacted_reads[partition].acked_through(mid)
        self._changed([partition])

    def ack_before(self, partition: int, pos: Position) -> None:
        """Ack every message of `partition` stored before entry `pos` (a mark-delete past it stays)."""
        through = Position(pos.ledger_id, pos.entry_id - 1)
        if through <= self.cursors[partition].mark_delete_position:
            return  # nothing new (the TTL check's usual case): no scan of the pending
        self.cursors[partition].ack_cumulative(through)
        self._forget_through(partition, MessageId(pos.ledger_id, pos.entry_id - 1, BEYOND), pos)

    def ack_all(self, partition: int) -> None:
        """Ack every message of `partition` stored so far."""
        last = self.mls[partition].last_confirmed_position
        if last is not None:
            self.ack_before(partition, self.mls[partition].next_position(last))

    def batch_acks(self, pos: Position) -> set[int] | None:
        """The batch indexes acked of the entry at `pos` so far (None: none known here)."""
        state = self._entries.get(pos)
        return None if state is None else state.acked

    def nack(self, ids: list[MessageId]) -> None:
        for mid in ids:
            self._to_redeliver(mid, "nacked")

    # --- seeks ---------------------------------------------------------------------------------
    def clear(self) -> None:
        """Forget all delivery state (a seek is about to move the cursors; their reset's flush
        stores the cleared state)."""
        self.pending.clear()
        self._reasons.clear()
        self._dead.clear()
        self._counts = [{} for _ in self.cursors]
        self._redeliver.clear()
        self._redeliver_msgs.clear()
        self.ready.clear()
        if self._delayed is not None:
            self._delayed.clear()
        self._entries.clear()
        for compacted in self._compacted_reads:
            compacted.clear()
        self.dispatcher.clear()
        self._changed(range(len(self.cursors)))

    async def seek_to_message(self, partition: int, mid: MessageId) -> None:
        """Reset one partition's cursor to `mid` (inclusive): earlier messages of its batch count
        as acked so they are not delivered again."""
        await self.cursors[partition].reset(mid.position)
        if mid.batch_index > 0:
            state = await self._entry_state(mid, partition)
            if state is not None:
                state.acked.update(range(min(mid.batch_index, state.count)))
                self._changed([partition])

    # --- stats ---------------------------------------------------------------------------------
    @property
    def backlog(self) -> int:
        return sum(c.backlog for c in self.cursors)

    @property
    def unacked(self) -> int:
        return len(self.pending)

    def read_backlog(self) -> dict[int, tuple[int, int]]:
        return delivery_state.read_backlog(self._entries.values())
