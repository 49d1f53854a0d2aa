"""Topic stats in Pulsar's shape (`stats`, `partitioned-stats`), the figures the broker's
Prometheus collector reads (`metrics_snapshot`), and the stats tick that turns the open topics'
counters into rates (`topics.meters`).

A partitioned topic's `stats` are the sum of its partitions' (rates, counters, backlogs; a
subscription's backlog is summed over the partitions); `partitioned-stats` adds each partition's
own under `partitions`, keyed by the partition's name, as Pulsar does. Publishers and consumers
are per topic and per subscription (over HTTP a client is not tied to one partition).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Iterable, Sequence
from typing import Any

from bookie.metadata_calls import call_store
from common.errors import QuireError
from managed_ledger.api import Cursor
from managed_ledger.entry_format import StoredMessage, iter_messages
from managed_ledger.metadata.api import CompactionState, CompactionStatus
from managed_ledger.position import MessageId
from topics import names
from topics.api import Delivery, SubscriptionSample, TopicSample
from topics.errors import TopicNotFoundError
from topics.meters import Clients, Meter, SubscriptionMeters, message_backlog
from topics.registry import TopicRegistry
from topics.subscriptions import Subscription
from topics.topic import Topic

log = logging.getLogger("quire.topics")


class TopicStats:
    """Counting, sampling and reporting the open topics' figures."""

    def __init__(self, registry: TopicRegistry) -> None:
        self._r = registry

    # --- counting (called by the data plane; plain integer work) -------------------------------
    def count_delivered(
        self, t: Topic, subscription: str, consumer_id: str | None, out: Sequence[Delivery]
    ) -> None:
        """A receive answered `out` (maybe nothing: the consumer is still heard)."""
        meters = t.meters.subscription(subscription)
        client = meters.consumers.heard(consumer_id, self._r.clock.now_ms())
        self._r.activity.keep("stats", t.name)
        if not out:
            return
        nbytes = 0
        redelivered = 0
        for d in out:
            nbytes += len(d.message.value)
            if d.redelivery_count:
                redelivered += 1
        client.meter.add(len(out), nbytes)
        meters.redelivered.add(redelivered, 0)
        if len(t.mls) == 1:
            meters.out[0].add(len(out), nbytes)
            t.meters.outs[0].add(len(out), nbytes)
            return
        for partition, count, size in self._by_partition(t, [d.message for d in out]):
            meters.out[partition].add(count, size)
            t.meters.outs[partition].add(count, size)

    def count_read(self, t: Topic, messages: Sequence[StoredMessage]) -> None:
        """A reader (no subscription) was answered `messages`."""
        self._r.activity.keep("stats", t.name)
        if len(t.mls) == 1:
            t.meters.outs[0].add(len(messages), sum([len(m.value) for m in messages]))
            return
        for partition, count, size in self._by_partition(t, messages):
            t.meters.outs[partition].add(count, size)

    def _by_partition(self, t: Topic, messages: Iterable[StoredMessage]) -> list[tuple[int, int, int]]:
        counts: dict[int, list[int]] = {}
        for m in messages:
            partition = _partition_of(t, m.message_id)
            slot = counts.get(partition)
            if slot is None:
                slot = counts[partition] = [0, 0]
            slot[0] += 1
            slot[1] += len(m.value)
        return [(p, c, b) for p, (c, b) in counts.items()]

    # --- the tick ------------------------------------------------------------------------------
    async def stats_loop(self) -> None:
        interval_s = self._r.config.stats_interval_ms / 1000
        loop = asyncio.get_running_loop()
        last = loop.time()
        while True:
            await asyncio.sleep(interval_s)
            now = loop.time()
            try:
                await self.tick_stats(now - last)
            except Exception:  # the loop must outlive one bad topic; the next tick retries
                log.exception("stats tick failed")
            last = now

    async def tick_stats(self, elapsed_s: float) -> None:
        """Turn the counters of the topics with traffic into rates over the last `elapsed_s`;
        sample the messages per entry of partitions this broker has not appended to yet. Only
        topics marked since the last tick are visited (`topics.activity`: opened, produced to,
        read, delivered from), and those whose figures still move (a rate to bring back to
        zero, a client to age out); an idle topic's rates are zero already."""
        now_ms = self._r.clock.now_ms()
        idle_ms = self._r.config.exclusive_consumer_idle_ms
        activity = self._r.activity
        for name in activity.take("stats"):
            t = self._r.topics.get(name)
            if t is None:
                continue
            t.meters.tick(elapsed_s, now_ms, idle_ms)
            await self._sample_batches(t)
            if t.meters.moving():
                activity.keep("stats", name)

    async def _sample_batches(self, t: Topic) -> None:
        """Messages per entry of the partitions this broker has not appended to: their last
        entry's (read once)."""
        for partition, ml in enumerate(t.mls):
            if t.meters.entries_in[partition] or t.meters.sample[partition] is not None:
                continue
            last = ml.last_confirmed_position
            if last is None:
                continue
            with contextlib.suppress(QuireError):  # unreadable now: the next tick tries again
                payload = await ml.read_entry(last)
                count = sum(1 for _ in iter_messages(last.ledger_id, last.entry_id, payload))
                t.meters.sample[partition] = float(max(1, count))

    # --- stats ---------------------------------------------------------------------------------
    async def stats(self, topic: str) -> dict[str, Any]:
        t = await self._r.topic(topic)
        await self._sample_batches(t)
        subs = await self._subscriptions_of(t)
        states = [await call_store(self._r.store.get_compaction, ml.name) for ml in t.mls]
        out = self._topic_stats(t, subs, range(len(t.mls)))
        out["publishers"] = _clients(t.meters.publishers, "producerName", "msgRateIn", "msgThroughputIn")
        for name, sub in subs.items():
            out["subscriptions"][name]["consumers"] = _clients(
                t.meters.subscription(name).consumers, "consumerName", "msgRateOut", "msgThroughputOut"
            )
            out["subscriptions"][name]["type"] = sub.options.type
        out.update(
            partitions=t.partitions,
            ownerBroker=self._r.ownership.me.broker_id if self._r.ownership is not None else None,
            compaction=compaction_stats(states),
            backlogQuotaEvents=t.quota.events(),
        )
        return out

    async def partitioned_stats(self, topic: str) -> dict[str, Any]:
        """The sum (`stats`) plus each partition's own stats under `partitions`."""
        t = await self._r.topic(topic)
        if t.partitions == 0:
            raise TopicNotFoundError(t.name, "is not a partitioned topic (GET .../stats instead)")
        out = await self.stats(topic)
        subs = await self._subscriptions_of(t)
        out["partitions"] = {}
        for partition in range(len(t.mls)):
            one = self._topic_stats(t, subs, [partition])
            for name, sub in subs.items():
                one["subscriptions"][name]["type"] = sub.options.type
            out["partitions"][names.partition_name(t.name, partition)] = one
        out["metadata"] = {"partitions": t.partitions}
        return out

    async def _subscriptions_of(self, t: Topic) -> dict[str, Subscription]:
        return {name: await self._r.subscription(t, name) for name in sorted(t.mls[0].cursors)}

    def _topic_stats(
        self, t: Topic, subs: dict[str, Subscription], partitions: Iterable[int]
    ) -> dict[str, Any]:
        """Counters, rates, storage and per-subscription figures summed over `partitions`."""
        parts = list(partitions)
        meters = t.meters
        inbound = _sum([meters.ins[p] for p in parts])
        outbound = _sum([meters.outs[p] for p in parts])
        storage = sum(t.mls[p].total_size_bytes for p in parts)
        subscriptions: dict[str, Any] = {}
        backlog_bytes = 0
        for name, sub in subs.items():
            subscriptions[name] = self._subscription_stats(t, sub, meters.subscription(name), parts)
            backlog_bytes = max(backlog_bytes, sum(_backlog_bytes(t, sub.cursors, p) for p in parts))
        return {
            "msgRateIn": inbound[2],
            "msgThroughputIn": inbound[3],
            "msgRateOut": outbound[2],
            "msgThroughputOut": outbound[3],
            "msgInCounter": inbound[0],
            "bytesInCounter": inbound[1],
            "msgOutCounter": outbound[0],
            "bytesOutCounter": outbound[1],
            "averageMsgSize": inbound[3] / inbound[2] if inbound[2] else 0.0,
            "storageSize": storage,
            "backlogSize": backlog_bytes,  # bytes behind the slowest subscription (per partition)
            "subscriptions": subscriptions,
        }

    def _subscription_stats(
        self, t: Topic, sub: Subscription, meters: SubscriptionMeters, parts: list[int]
    ) -> dict[str, Any]:
        out = _sum([meters.out[p] for p in parts])
        whole = len(parts) == len(t.mls)
        unacked = sub.unacked if whole else sum(1 for mid in sub.pending if _partition_of(t, mid) in parts)
        read = sub.read_backlog()
        return {
            "msgBacklog": sum(message_backlog(t.meters, sub.cursors, read, p) for p in parts),
            "unackedMessages": unacked,
            "msgRateOut": out[2],
            "msgThroughputOut": out[3],
            "msgOutCounter": out[0],
            "bytesOutCounter": out[1],
            "msgRateRedeliver": meters.redelivered.rate if whole else 0.0,
            "msgRedeliverCounter": meters.redelivered.count if whole else 0,
            "msgRateExpired": meters.expired.rate if whole else 0.0,
            "totalMsgExpired": meters.expired.count if whole else 0,
            "msgDeadLettered": sub.dead_lettered if whole else 0,
        }

    # --- metrics -------------------------------------------------------------------------------
    def metrics_snapshot(self) -> list[TopicSample]:
        """Every open topic's figures, read without I/O (the metrics endpoint calls it at each
        scrape; rates are the last tick's). A subscription nobody used since the topic was
        opened here has no delivery state yet: its figures come from its cursors."""
        out = []
        for t in list(self._r.topics.values()):
            subs = [_subscription_sample(t, name) for name in sorted(t.mls[0].cursors)]
            meters = t.meters
            backlog_bytes = [
                sum(_backlog_bytes(t, [ml.cursors[s.name] for ml in t.mls], p) for p in range(len(t.mls)))
                for s in subs
            ]
            out.append(
                TopicSample(
                    topic=t.name,
                    namespace=names.namespace_of(t.name),
                    inbound=_sum(meters.ins),
                    outbound=_sum(meters.outs),
                    storage_bytes=sum(ml.total_size_bytes for ml in t.mls),
                    backlog_bytes=max(backlog_bytes, default=0),
                    backlog=max((s.backlog for s in subs), default=0),
                    producers=len(meters.publishers),
                    subscriptions=tuple(subs),
                    quota_events=t.quota.events(),
                )
            )
        return out


def _subscription_sample(t: Topic, name: str) -> SubscriptionSample:
    m = t.meters.subscription(name)
    sub = t.subscriptions.get(name)
    if sub is not None:
        cursors, read, unacked, dead = sub.cursors, sub.read_backlog(), sub.unacked, sub.dead_lettered
    else:
        cursors, read, unacked, dead = [ml.cursors[name] for ml in t.mls], {}, 0, 0
    return SubscriptionSample(
        name=name,
        backlog=sum(message_backlog(t.meters, cursors, read, p) for p in range(len(t.mls))),
        unacked=unacked,
        consumers=len(m.consumers),
        out=_sum(m.out),
        redelivered=(m.redelivered.count, m.redelivered.rate),
        expired=m.expired.count,
        dead_lettered=dead,
    )


def _backlog_bytes(t: Topic, cursors: Sequence[Cursor], partition: int) -> int:
    return t.mls[partition].size_after(cursors[partition].mark_delete_position)


def _partition_of(t: Topic, mid: MessageId) -> int:
    """The partition holding `mid`'s ledger, learnt from the ledger lists (0 when unknown: a
    ledger trimmed meanwhile)."""
    if len(t.mls) == 1:
        return 0
    known = t.ledger_partition.get(mid.ledger_id)
    if known is None:
        for i, ml in enumerate(t.mls):
            ledgers: Any = ml.internal_stats().get("ledgers", [])
            for info in ledgers:
                t.ledger_partition[int(info["ledgerId"])] = i
        known = t.ledger_partition.get(mid.ledger_id, 0)
    return known


def _sum(meters: Sequence[Meter]) -> tuple[int, int, float, float]:
    return (
        sum(m.count for m in meters),
        sum(m.bytes for m in meters),
        sum(m.rate for m in meters),
        sum(m.throughput for m in meters),
    )


def _clients(
    clients: Clients, name_field: str, rate_field: str, throughput_field: str
) -> list[dict[str, Any]]:
    out = []
    for name, c in clients.items():
        m = c.meter
        out.append(
            {
                name_field: name,
                rate_field: m.rate,
                throughput_field: m.throughput,
                "msgCounter": m.count,
                "bytesCounter": m.bytes,
                "averageMsgSize": m.throughput / m.rate if m.rate else 0.0,
                "connectedSince": c.first_seen_ms,
                "lastSeenTimestamp": c.last_seen_ms,
            }
        )
    return out


def number_of_entries(stats: dict[str, object]) -> int:
    value = stats.get("numberOfEntries", 0)
    return value if isinstance(value, int) else 0


def compaction_stats(states: list[CompactionState]) -> dict[str, Any]:
    succeeded = [s.last_succeeded_ms for s in states if s.last_succeeded_ms]
    failed = [s.last_failed_ms for s in states if s.last_failed_ms]
    durations = [
        s.ended_ms - s.started_ms
        for s in states
        if s.status == CompactionStatus.SUCCESS and s.ended_ms is not None and s.started_ms is not None
    ]
    return {
        "lastCompactionRemovedEventCount": sum(max(0, s.messages_in - s.messages_out) for s in states),
        "lastCompactionSucceedTimestamp": max(succeeded, default=0),
        "lastCompactionFailedTimestamp": max(failed, default=0),
        "lastCompactionDurationTimeInMills": max(durations, default=0),
    }
