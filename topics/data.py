"""The data plane of the topics service: produce, subscriptions (receive, ack, nack, seek) and
readers, over the topic registry (`topics.registry`).

Produce: a request's batch is checked against the limits as a whole, then handed to the topic's
one publish path (`Topic.publish`) as one write per partition it touches, each dedup-filtered
(`topics.dedup`) and encoded as one entry (kind 1); appends of concurrent requests pipeline in
the managed ledger (positions in call order), so nothing awaits between a batch's dedup check
and its append call. A batch holding a sequence id whose
earlier write is still unresolved is refused whole (WriteInFlightError, retriable), never
answered duplicate: that write may yet fail. A partitioned topic's batch is one entry per
partition touched: atomic per partition, not across partitions.
"""

from __future__ import annotations

import asyncio
import base64
from collections.abc import Sequence
from typing import Literal

import httpx

from managed_ledger.api import Cursor, ManagedLedger
from managed_ledger.entry_format import Message, StoredMessage, encode_batch_raw, entry_extras
from managed_ledger.errors import EntryNotFoundError
from managed_ledger.position import MessageId, Position
from topics import dedup, names
from topics.api import (
    Delivery,
    KeySharedPolicy,
    ProduceResult,
    ReadPage,
    SeekTarget,
    StartPosition,
    SubscriptionOptions,
)
from topics.errors import (
    BatchTooLargeError,
    DeadLetterForwardError,
    InvalidArgumentError,
    MessageNotFoundError,
    MessageTooLargeError,
    NotOwnerError,
    SubscriptionNotFoundError,
    TooManyMessagesRequestedError,
    TopicNotFoundError,
    WaitTooLongError,
)
from topics.readers import EARLIEST, after, decode_entry, latest, read_merged
from topics.registry import TopicRegistry
from topics.stats import TopicStats
from topics.subscription_options import options_to_properties
from topics.topic import Entry, Notifier, Topic
from topics.topic_ops import TopicOpsAdmin, all_terminated, subscription_at_end

_DUPLICATE = ProduceResult(None, True)
FORWARD_TIMEOUT_S = 10.0  # a dead-letter write forwarded to the topic's owner


class DataPlane:
    """Produce, subscriptions and readers: what clients call (see the module's docstring)."""

    def __init__(self, registry: TopicRegistry, ops: TopicOpsAdmin, stats: TopicStats) -> None:
        self._r = registry
        self._ops = ops
        self._stats = stats

    # --- dead letters --------------------------------------------------------------------------
    async def dead_letter(self, topic: str, messages: list[Message]) -> None:
        """Produce to the dead-letter topic: here when this broker owns it (or takes it), else
        at its owner over the REST API, as any client would."""
        try:
            await self.produce(topic, None, messages)
        except NotOwnerError as exc:
            await _forward_produce(exc.owner_url, topic, messages)

    # --- produce -------------------------------------------------------------------------------
    async def produce(
        self, topic: str, producer_name: str | None, messages: list[Message], partition: int | None = None
    ) -> list[ProduceResult]:
        """Store the batch through the topic's one publish path: one write per partition touched
        (all on `partition` when one is given)."""
        # Limits first: a refused batch must not even auto-create its topic.
        size = self._check_batch(messages)
        t = self._r.topics.get(topic)
        if t is None or self._r.ownership is not None:
            t = await self._r.topic(topic, create=True)
        if not messages:
            return []
        dedup_on = t.policies.deduplication_enabled
        if t.router is None or partition is not None:
            write = MessagesWrite(_partition(t, partition), producer_name, dedup_on, messages, size)
            await t.publish([write], producer_name)
            return write.results
        routes = t.router.route(messages)
        writes = [
            MessagesWrite(p, producer_name, dedup_on, [messages[i] for i in idxs], None)
            for p, idxs in routes.items()
        ]
        await t.publish(writes, producer_name)
        results = [_DUPLICATE] * len(messages)
        for idxs, w in zip(routes.values(), writes, strict=True):
            for i, result in zip(idxs, w.results, strict=True):
                results[i] = result
        return results

    def _check_batch(self, messages: Sequence[Message]) -> int:
        """The batch's size, or the error naming the limit it breaks.

        The one place produce limits are checked (a message's size is `message_size`'s); the
        batch's size is the sum over its messages, summed here once.
        """
        config = self._r.config
        if len(messages) > config.max_batch_messages:
            raise BatchTooLargeError(
                "messages", len(messages), config.max_batch_messages, "max_batch_messages"
            )
        limit = config.max_message_size_bytes
        total = 0
        for i, m in enumerate(messages):
            size = message_size(m)
            if size > limit:
                raise MessageTooLargeError(i, size, limit)
            total += size
        if total > config.max_batch_size_bytes:
            raise BatchTooLargeError("bytes", total, config.max_batch_size_bytes, "max_batch_size_bytes")
        return total

    # --- limits --------------------------------------------------------------------------------
    def _check_wait(self, wait_ms: int) -> float:
        if wait_ms < 0:
            raise InvalidArgumentError(f"wait_ms must be >= 0, got {wait_ms}")
        if wait_ms > self._r.config.max_wait_ms:
            raise WaitTooLongError(wait_ms, self._r.config.max_wait_ms)
        return asyncio.get_running_loop().time() + wait_ms / 1000

    def _check_max(self, max_messages: int) -> int:
        if max_messages <= 0:
            raise InvalidArgumentError(f"max_messages must be > 0, got {max_messages}")
        if max_messages > self._r.config.max_messages_per_read:
            raise TooManyMessagesRequestedError(max_messages, self._r.config.max_messages_per_read)
        return max_messages

    # --- subscriptions -------------------------------------------------------------------------
    async def create_subscription(self, topic: str, subscription: str, options: SubscriptionOptions) -> bool:
        names.validate_subscription(subscription)
        if options.ack_timeout_ms is not None and options.ack_timeout_ms <= 0:
            raise InvalidArgumentError(f"ack_timeout_ms must be > 0, got {options.ack_timeout_ms}")
        if options.max_redeliveries < 0:
            raise InvalidArgumentError(f"max_redeliveries must be >= 0, got {options.max_redeliveries}")
        if options.dead_letter_topic is not None:
            names.validate_topic(options.dead_letter_topic)
        t = await self._r.topic(topic, create=True)
        async with t.lock:
            if subscription in t.mls[0].cursors:
                return False
            properties = options_to_properties(options)
            # Partition 0 last: its cursor is what says the subscription exists.
            for ml in reversed(t.mls):
                cursor = await ml.open_cursor(subscription, options.initial_position)
                await cursor.set_properties(properties)
        if any(ml.log_start is not None for ml in t.mls):
            sub = await self._r.subscription(t, subscription)
            async with sub.lock:
                await self._ops.honour_log_start(t, sub)
        t.quota.changed()
        return True

    async def delete_subscription(self, topic: str, subscription: str) -> None:
        t = await self._r.topic(topic)
        await self._r.subscription(t, subscription)
        async with t.lock:
            t.subscriptions.pop(subscription, None)
            t.meters.subscriptions.pop(subscription, None)
            for ml in t.mls:
                if subscription in ml.cursors:
                    await ml.delete_cursor(subscription)
        t.notifier.notify()
        t.quota.changed()

    async def list_subscriptions(self, topic: str) -> list[str]:
        t = await self._r.topic(topic)
        return sorted(t.mls[0].cursors)

    async def receive(
        self,
        topic: str,
        subscription: str,
        max_messages: int,
        wait_ms: int,
        consumer_id: str | None,
        partition: int | None = None,
        whole_entries: bool = False,
    ) -> list[Delivery]:
        deadline = self._check_wait(wait_ms)
        max_messages = self._check_max(max_messages)
        t = await self._r.topic(topic)
        if partition is not None:
            _partition(t, partition)
        sub = await self._r.subscription(t, subscription)
        loop = asyncio.get_running_loop()
        while True:
            woken = t.notifier.arm()
            async with sub.lock:
                out = await sub.fill(max_messages, consumer_id, partition, whole_entries)
            if sub.dispatcher.others_ready():
                t.notifier.notify()
            remaining = deadline - loop.time()
            if out or remaining <= 0 or subscription_at_end(t, sub):
                self._stats.count_delivered(t, subscription, consumer_id, out)
                return out  # (nothing more ever comes to a terminated topic)
            redelivery_ms = sub.next_redelivery_ms()
            if redelivery_ms is not None:
                remaining = min(remaining, redelivery_ms / 1000 + 0.001)
            sub.dispatcher.heard(consumer_id, self._r.clock.now_ms() + int(remaining * 1000))
            await Notifier.wait(woken, remaining)
            if t.moved:
                return []  # the topic left this broker: the client's next request finds its owner
            if self._r.topics.get(t.name) is not t or t.subscriptions.get(subscription) is not sub:
                raise SubscriptionNotFoundError(t.name, subscription)  # deleted while we waited

    async def ack(self, topic: str, subscription: str, message_ids: list[MessageId]) -> None:
        t = await self._r.topic(topic)
        sub = await self._r.subscription(t, subscription)
        async with sub.lock:
            await sub.ack(message_ids)
        t.quota.changed()

    async def ack_cumulative(self, topic: str, subscription: str, message_id: MessageId) -> None:
        t = await self._r.topic(topic)
        sub = await self._r.subscription(t, subscription)
        async with sub.lock:
            await sub.ack_cumulative(message_id)
        t.quota.changed()

    async def last_sequence_id(
        self, topic: str, producer_name: str, partition: int | None = None
    ) -> int | None:
        """The producer's highest stored sequence id (topics.dedup's state; the Pulsar door's
        PRODUCER_SUCCESS.last_sequence_id); None with dedup off or nothing stored."""
        t = await self._r.topic(topic, create=True)
        if not t.policies.deduplication_enabled:
            return None
        mls = t.mls if partition is None else [t.mls[_partition(t, partition)]]
        highest = [h for ml in mls if (h := ml.dedup_highest(producer_name)) is not None]
        return max(highest, default=None)

    async def key_shared_consumer(
        self, topic: str, subscription: str, consumer_id: str, policy: KeySharedPolicy
    ) -> None:
        t = await self._r.topic(topic)
        sub = await self._r.subscription(t, subscription)
        async with sub.lock:
            sub.key_shared_join(consumer_id, policy)
        t.notifier.notify()

    async def consumer_left(self, topic: str, subscription: str, consumer_id: str) -> None:
        t = await self._r.topic(topic)
        sub = await self._r.subscription(t, subscription)
        async with sub.lock:
            # The next consumer to ask sees it gone (what it held is redelivered; failover's
            # active consumer and key_shared's keys follow).
            sub.dispatcher.left(consumer_id)
        t.notifier.notify()

    async def nack(self, topic: str, subscription: str, message_ids: list[MessageId]) -> None:
        t = await self._r.topic(topic)
        sub = await self._r.subscription(t, subscription)
        async with sub.lock:
            sub.nack(message_ids)
        t.notifier.notify()

    async def seek(self, topic: str, subscription: str, target: SeekTarget) -> None:
        t = await self._r.topic(topic)
        sub = await self._r.subscription(t, subscription)
        async with sub.lock:
            sub.clear()
            if isinstance(target, MessageId):
                partition = await self._r.partition_of(t, target)
                if partition is None:
                    raise MessageNotFoundError(t.name, str(target))
                await sub.seek_to_message(partition, target)
            elif isinstance(target, str):
                await self._seek_end(t, sub.cursors, target)
            else:
                for cursor in sub.cursors:
                    await cursor.reset_to_time(target)
            await self._ops.honour_log_start(t, sub)
        t.notifier.notify()
        t.quota.changed()

    async def _seek_end(
        self, t: Topic, cursors: Sequence[Cursor], target: Literal["earliest", "latest"]
    ) -> None:
        for ml, cursor in zip(t.mls, cursors, strict=True):
            last = ml.last_confirmed_position
            past_end = ml.next_position(last) if last is not None else None
            position = (ml.first_position or past_end) if target == "earliest" else past_end
            if position is not None:
                await cursor.reset(position)

    # --- readers -------------------------------------------------------------------------------
    async def _starts(self, t: Topic, start: StartPosition, mls: list[ManagedLedger]) -> list[MessageId]:
        """The inclusive start id of each managed ledger read (see topics.readers)."""
        n = len(mls)
        if isinstance(start, tuple) and start[0] == "time":
            found = [await ml.find_position_by_publish_time(start[1]) for ml in mls]
            return [
                latest(ml) if p is None else MessageId(p.ledger_id, p.entry_id, 0)
                for ml, p in zip(mls, found, strict=True)
            ]
        if start == "earliest":
            return [EARLIEST] * n
        if start == "latest":
            return [latest(ml) for ml in mls]
        if isinstance(start, MessageId):
            return [start] * n
        if isinstance(start, tuple) and len(start) == 2 and start[0] == "after":
            target = start[1]
            if isinstance(target, MessageId):
                return [after(target)] * n
            if len(target) != n:
                raise InvalidArgumentError(f"start names {len(target)} partitions; topic {t.name} has {n}")
            return [EARLIEST if s is None else after(s) for s in target]
        raise InvalidArgumentError(f"invalid start position {start!r}")

    async def read(
        self,
        topic: str,
        start: StartPosition,
        max_messages: int,
        read_compacted: bool,
        wait_ms: int,
        partition: int | None = None,
    ) -> ReadPage:
        deadline = self._check_wait(wait_ms)
        max_messages = self._check_max(max_messages)
        t = await self._r.topic(topic)
        mls = t.mls if partition is None else [t.mls[_partition(t, partition)]]
        starts = _from_log_start(mls, await self._starts(t, start, mls))
        loop = asyncio.get_running_loop()
        while True:
            woken = t.notifier.arm()
            terminated = all_terminated(t.mls)
            messages, slots = await read_merged(mls, self._r.compacted, starts, max_messages, read_compacted)
            if messages:
                self._stats.count_read(t, messages)
                end = terminated and await self._read_all(
                    mls, slots, len(messages) < max_messages, read_compacted
                )
                return ReadPage(messages, names.format_next(slots), end)
            remaining = deadline - loop.time()
            if remaining <= 0 or terminated:
                return ReadPage([], None, terminated)
            await Notifier.wait(woken, remaining)
            if t.moved:
                return ReadPage([], None)  # the topic left this broker: the retry finds its owner
            if self._r.topics.get(t.name) is not t:
                raise TopicNotFoundError(t.name, "deleted while the reader waited")

    async def _read_all(
        self, mls: list[ManagedLedger], slots: list[MessageId | None], short: bool, read_compacted: bool
    ) -> bool:
        """Whether a reader of a terminated topic, after this page, has nothing left to read."""
        if short:
            return True  # the page stopped before its size: nothing came after
        starts = _from_log_start(mls, [EARLIEST if s is None else after(s) for s in slots])
        more, _ = await read_merged(mls, self._r.compacted, starts, 1, read_compacted)
        return not more

    async def get_message(self, topic: str, message_id: MessageId) -> StoredMessage:
        t = await self._r.topic(topic)
        partition = await self._r.partition_of(t, message_id)
        start = t.mls[partition].log_start if partition is not None else None
        if partition is not None and (start is None or message_id >= start):
            try:
                payload = await t.mls[partition].read_entry(message_id.position)
            except EntryNotFoundError:
                pass
            else:
                messages = decode_entry(t.name, message_id.ledger_id, message_id.entry_id, payload)
                if message_id.batch_index < len(messages):
                    return messages[message_id.batch_index]
        raise MessageNotFoundError(t.name, str(message_id))

    async def last_message_id(
        self, topic: str, read_compacted: bool, partition: int | None = None
    ) -> MessageId | None:
        t = await self._r.topic(topic)
        found: list[MessageId] = []
        chosen = range(len(t.mls)) if partition is None else [_partition(t, partition)]
        for i in chosen:
            ml = t.mls[i]
            last = await self._last_in_ledger(t, ml.name, i)
            if read_compacted:
                horizon = await self._r.compacted.horizon(ml.name)
                if horizon is not None and (last is None or last <= horizon):
                    last = await self._r.compacted.last_message_id(ml.name)
            if last is not None and last >= (ml.log_start or last):
                found.append(last)
        return max(found) if found else None

    async def _last_in_ledger(self, t: Topic, name: str, partition: int) -> MessageId | None:
        ml = t.mls[partition]
        last = ml.last_confirmed_position
        if last is None:
            return None
        try:
            payload = await ml.read_entry(last)
        except EntryNotFoundError:
            return None
        count = len(decode_entry(name, last.ledger_id, last.entry_id, payload))
        return MessageId(last.ledger_id, last.entry_id, max(0, count - 1))

    async def reset_cursor(self, topic: str, subscription: str, timestamp_ms: int) -> None:
        await self.seek(topic, subscription, timestamp_ms)


def _from_log_start(mls: list[ManagedLedger], starts: list[MessageId]) -> list[MessageId]:
    """Reads start at each managed ledger's log start at the earliest (truncate-before)."""
    return [max(s, ml.log_start or s) for ml, s in zip(mls, starts, strict=True)]


def _partition(t: Topic, partition: int | None) -> int:
    """The managed ledger index of `partition` (None: a topic that is not partitioned)."""
    if partition is None:
        return 0
    if not 0 <= partition < t.partitions:
        raise InvalidArgumentError(f"{t.name} has {t.partitions} partitions, not a partition {partition}")
    return partition


async def _forward_produce(owner_url: str, topic: str, messages: list[Message]) -> None:
    body = {
        "messages": [
            {
                "key": m.key,
                "value": base64.b64encode(m.value).decode(),
                "value_encoding": "base64",
                "properties": dict(m.properties or {}),
                "event_time": m.event_time,
            }
            for m in messages
        ]
    }
    url = f"{owner_url.rstrip('/')}/v1/topics/{topic}/messages"
    try:
        async with httpx.AsyncClient(timeout=FORWARD_TIMEOUT_S, follow_redirects=True) as client:
            reply = await client.post(url, json=body)
    except httpx.HTTPError as exc:
        raise DeadLetterForwardError(f"{url}: {exc}") from exc
    if reply.status_code != 200:
        raise DeadLetterForwardError(f"{url}: {reply.status_code} {reply.text[:200]}")


def message_size(m: Message) -> int:
    """A message's size: the UTF-8 bytes of its key, its value's bytes, and the UTF-8 bytes of
    each property name and value."""
    size = len(m.value)
    if m.key:
        size += len(m.key.encode())
    if m.properties:
        size += sum([len(k.encode()) + len(v.encode()) for k, v in m.properties.items()])
    return size


class MessagesWrite:
    """A REST batch's messages for one partition as a write: one entry (entry_format kind 1) of
    the messages the producer's dedup does not know stored (topics.dedup); results in batch
    order once stored."""

    shielded = False

    def __init__(
        self, partition: int, producer: str | None, dedup_on: bool, messages: list[Message], size: int | None
    ) -> None:
        """`size`: the messages' size when known (the limits check summed it)."""
        self.partition = partition
        self.producer = producer
        self.results: list[ProduceResult] = []
        self._dedup = dedup_on
        self._messages = messages
        self._size = size
        self._duplicates: list[bool] | None = None
        self._kept = len(messages)

    def prepare(self, ml: ManagedLedger, now_ms: int) -> Entry | None:
        messages = self._messages
        duplicates = self._duplicates = dedup.duplicates(
            ml, self.producer, self._dedup, [m.sequence_id for m in messages]
        )
        rows: list[list[object]] = []
        highest: int | None = None
        first: Message | None = None
        for i, m in enumerate(messages):
            if duplicates is not None and duplicates[i]:
                continue
            if first is None:
                first = m
            props = m.properties
            if props is not None and type(props) is not dict:
                props = dict(props)
            rows.append([m.key, m.value, props or None, m.event_time, m.sequence_id])
            if m.sequence_id is not None and (highest is None or m.sequence_id > highest):
                highest = m.sequence_id
        self._kept = len(rows)
        if first is None:
            self.results = [_DUPLICATE] * len(messages)
            return None
        return Entry(encode_batch_raw(now_ms, self.producer, rows, entry_extras(first)), highest)

    def failed(self) -> None:
        pass

    def stored(self, position: Position, base_offset: int) -> tuple[int, int]:
        lid, eid = position
        duplicates = self._duplicates
        batch_index = 0
        for i in range(len(self._messages)):
            if duplicates is not None and duplicates[i]:
                self.results.append(_DUPLICATE)
            else:
                self.results.append(ProduceResult(MessageId(lid, eid, batch_index)))
                batch_index += 1
        if self._kept < len(self._messages):
            kept = [m for m, d in zip(self._messages, duplicates or (), strict=True) if not d]
            return len(kept), sum([message_size(m) for m in kept])
        size = self._size
        if size is None:
            size = sum([message_size(m) for m in self._messages])
        return self._kept, size
