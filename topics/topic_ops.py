"""Whole-topic operations from the admin side: terminate (Pulsar), truncate (Pulsar) and
truncate-before (Kafka's DeleteRecords), and what they mean to readers and subscriptions:
`end_of_topic`, and the log start that reads and subscriptions never go before.

Where each one's state lives: the managed ledger keeps it in its stored record
(`managed_ledger.log_bounds`), so it holds across restarts and owners. Here are only the
rules a managed ledger cannot know: a partitioned topic is terminated or truncated partition by
partition; a log start inside a batch acks that batch's earlier messages on every subscription;
a reader or a subscription at the end of a terminated topic is told so.
"""

from __future__ import annotations

import contextlib

from managed_ledger.api import ManagedLedger
from managed_ledger.position import MessageId, Position
from topics.api import Terminated
from topics.errors import InvalidArgumentError, MessageIdBeyondEndError
from topics.readers import BEYOND, EARLIEST, after, decode_entry
from topics.registry import TopicRegistry
from topics.subscriptions import Subscription
from topics.topic import Topic


class TopicOpsAdmin:
    """Terminate, truncate and truncate-before, and the log start's rules."""

    def __init__(self, registry: TopicRegistry) -> None:
        self._r = registry

    async def terminate(self, topic: str) -> Terminated:
        """Terminate every managed ledger of the topic (each partition of a partitioned one).
        Waiting consumers and readers are woken so that they learn it at once."""
        t = await self._r.topic(topic)
        last = [await ml.terminate() for ml in t.mls]
        t.notifier.notify()
        if t.partitions == 0:
            return Terminated(last[0], {})
        return Terminated(None, {ml.name: mid for ml, mid in zip(t.mls, last, strict=True)})

    async def truncate(self, topic: str) -> None:
        """Every subscription acks everything, then each managed ledger drops its closed ledgers
        (`ManagedLedger.truncate`). Under every subscription's lock: no delivery in between."""
        t = await self._r.topic(topic)
        subs = [await self._r.subscription(t, name) for name in sorted(t.mls[0].cursors)]
        async with contextlib.AsyncExitStack() as stack:
            for sub in subs:
                await stack.enter_async_context(sub.lock)
            for partition, ml in enumerate(t.mls):
                await ml.rollover()  # what the subscriptions ack below is all in closed ledgers
                for sub in subs:
                    sub.ack_all(partition)
                await ml.truncate()
        t.notifier.notify()

    async def truncate_before(self, topic: str, message_id: MessageId) -> None:
        """Kafka's DeleteRecords on the partition that holds `message_id`'s ledger."""
        t = await self._r.topic(topic)
        partition = await self._r.partition_of(t, message_id)
        if partition is None:
            raise InvalidArgumentError(
                f"message id {message_id} names no stored ledger of topic {t.name} (a partitioned "
                "topic finds the partition by the ledger)"
            )
        ml = t.mls[partition]
        end = await self._end_of(t, partition)
        if end is None or message_id <= (ml.log_start or EARLIEST):
            return  # nothing stored to delete, or the log start is there already: never back
        if message_id > end:
            raise MessageIdBeyondEndError(t.name, str(message_id), str(end))
        subs = [await self._r.subscription(t, name) for name in sorted(ml.cursors)]
        async with contextlib.AsyncExitStack() as stack:
            for sub in subs:
                await stack.enter_async_context(sub.lock)
                await _ack_before_id(sub, partition, message_id)
            await ml.truncate_before(message_id)
        t.notifier.notify()

    async def _end_of(self, t: Topic, partition: int) -> MessageId | None:
        """The id right after the partition's last message (None: it holds no entry)."""
        ml = t.mls[partition]
        last = ml.last_confirmed_position
        if last is None:
            return None
        if ml.terminated_at is not None and ml.terminated_at.position == last:
            return after(ml.terminated_at)
        count = len(decode_entry(ml.name, last.ledger_id, last.entry_id, await ml.read_entry(last)))
        return MessageId(last.ledger_id, last.entry_id, max(1, count))

    async def honour_log_start(self, t: Topic, sub: Subscription) -> None:
        """A subscription that starts (or seeks) before a partition's log start acks what is
        before it. Caller holds the subscription's lock."""
        for partition, ml in enumerate(t.mls):
            if ml.log_start is not None:
                await _ack_before_id(sub, partition, ml.log_start)

    # --- end of topic --------------------------------------------------------------------------
    async def reached_end_of_topic(self, topic: str, subscription: str) -> bool:
        """The topic is terminated and the subscription acked everything in it."""
        t = await self._r.topic(topic)
        return subscription_at_end(t, await self._r.subscription(t, subscription))


def all_terminated(mls: list[ManagedLedger]) -> bool:
    return all(ml.is_terminated for ml in mls)


def subscription_at_end(t: Topic, sub: Subscription) -> bool:
    return all_terminated(t.mls) and sub.backlog == 0


async def _ack_before_id(sub: Subscription, partition: int, start: MessageId) -> None:
    """Ack every message of `partition` before `start` on `sub` (nothing when it is past)."""
    if sub.cursors[partition].mark_delete_position >= start.position:
        return
    sub.ack_before(partition, Position(start.ledger_id, start.entry_id))
    if 0 < start.batch_index < BEYOND:
        await sub.ack_cumulative(MessageId(start.ledger_id, start.entry_id, start.batch_index - 1))
