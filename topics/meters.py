"""Counters and rates of an open topic, as Pulsar's topic stats report them.

The hot paths only add to plain integers (`Meter.add`: one produce request or one receive adds
its totals once, never per message). Rates are what Pulsar calls them: messages and bytes per
second over the last stats interval, computed by `tick` from the counters' difference since the
previous tick (the admin plane ticks every open topic every `stats_interval_ms`). So a rate is at
most one interval old, and the counters are exact since the topic was opened on this broker.

Producers and consumers: over HTTP there is no connection to count, so a publisher is a
`producer_name` and a consumer a `consumer_id` (requests without one count as one anonymous
consumer, `None`) seen within `idle_ms`; at most `MAX_CLIENTS` of each are kept per topic or
subscription (the least recently seen goes first), so a client that makes up a new name per
request cannot grow the broker's memory or the stats without bound.

Messages per entry: a subscription's backlog is counted in entries by its cursors (a produce
batch is one entry). Its backlog in messages is exact over the entries the subscription has read
(their batch sizes and the messages acked inside them are known), and beyond them the unread
entries times the partition's messages per entry, measured on what this broker appended since it
opened the topic, or, before its first append, on the partition's last entry (`sample`). So it
is exact when producers send batches of one size, an estimate otherwise (Pulsar's own msgBacklog
counts entries).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from managed_ledger.api import Cursor

MAX_CLIENTS = 1_000


class Meter:
    """A message and byte counter with its rates over the last interval."""

    __slots__ = ("_bytes_then", "_count_then", "bytes", "count", "rate", "throughput")

    def __init__(self) -> None:
        self.count = 0
        self.bytes = 0
        self.rate = 0.0  # messages per second over the last interval
        self.throughput = 0.0  # bytes per second over the last interval
        self._count_then = 0
        self._bytes_then = 0

    def add(self, messages: int, nbytes: int) -> None:
        self.count += messages
        self.bytes += nbytes

    def tick(self, elapsed_s: float) -> None:
        if elapsed_s <= 0:
            return
        self.rate = (self.count - self._count_then) / elapsed_s
        self.throughput = (self.bytes - self._bytes_then) / elapsed_s
        self._count_then, self._bytes_then = self.count, self.bytes


@dataclass(slots=True)
class Client:
    """A producer or a consumer as seen over HTTP: its meter and when it was last heard (ms)."""

    meter: Meter = field(default_factory=Meter)
    first_seen_ms: int = 0
    last_seen_ms: int = 0


class Clients:
    """The producers (or consumers) heard within `idle_ms`, at most MAX_CLIENTS of them."""

    __slots__ = ("_by_name",)

    def __init__(self) -> None:
        self._by_name: dict[str | None, Client] = {}

    def heard(self, name: str | None, now_ms: int) -> Client:
        client = self._by_name.pop(name, None)  # re-inserted last: dict order is recency order
        if client is None:
            client = Client(first_seen_ms=now_ms)
            if len(self._by_name) >= MAX_CLIENTS:
                del self._by_name[next(iter(self._by_name))]
        client.last_seen_ms = now_ms
        self._by_name[name] = client
        return client

    def tick(self, elapsed_s: float, now_ms: int, idle_ms: int) -> None:
        for name in [n for n, c in self._by_name.items() if now_ms - c.last_seen_ms > idle_ms]:
            del self._by_name[name]
        for client in self._by_name.values():
            client.meter.tick(elapsed_s)

    def items(self) -> list[tuple[str | None, Client]]:
        return list(self._by_name.items())

    def __len__(self) -> int:
        return len(self._by_name)


class SubscriptionMeters:
    """Deliveries of one subscription: per partition, redeliveries, expiries, its consumers."""

    __slots__ = ("consumers", "expired", "out", "redelivered")

    def __init__(self, partitions: int) -> None:
        self.out = [Meter() for _ in range(partitions)]
        self.redelivered = Meter()  # deliveries with a redelivery count > 0 (bytes unused)
        self.expired = Meter()  # messages acked by expiry or TTL, estimated (bytes unused)
        self.consumers = Clients()

    def tick(self, elapsed_s: float, now_ms: int, idle_ms: int) -> None:
        for meter in self.out:
            meter.tick(elapsed_s)
        self.redelivered.tick(elapsed_s)
        self.expired.tick(elapsed_s)
        self.consumers.tick(elapsed_s, now_ms, idle_ms)


class TopicMeters:
    """What came in and went out of one open topic, per partition (one for a plain topic)."""

    __slots__ = ("entries_in", "ins", "outs", "publishers", "sample", "subscriptions")

    def __init__(self, partitions: int) -> None:
        n = max(1, partitions)
        self.ins = [Meter() for _ in range(n)]
        self.outs = [Meter() for _ in range(n)]  # to subscriptions and readers
        self.entries_in = [0] * n
        self.sample: list[float | None] = [None] * n  # messages per entry of the last entry
        self.publishers = Clients()
        self.subscriptions: dict[str, SubscriptionMeters] = {}

    def subscription(self, name: str) -> SubscriptionMeters:
        meters = self.subscriptions.get(name)
        if meters is None:
            meters = self.subscriptions[name] = SubscriptionMeters(len(self.ins))
        return meters

    def appended(self, partition: int, messages: int, nbytes: int) -> None:
        self.ins[partition].add(messages, nbytes)
        self.entries_in[partition] += 1

    def messages_per_entry(self, partition: int) -> float:
        entries = self.entries_in[partition]
        if entries:
            return self.ins[partition].count / entries
        sampled = self.sample[partition]
        return sampled if sampled is not None else 1.0

    def moving(self) -> bool:
        """Figures a later tick still changes with no new traffic: a rate not yet back to zero,
        a producer or consumer still to age out."""
        subs = self.subscriptions.values()
        meters = [*self.ins, *self.outs]
        for s in subs:
            meters += [*s.out, s.redelivered, s.expired]
        return (
            any(m.rate or m.throughput for m in meters)
            or len(self.publishers) > 0
            or any(len(s.consumers) for s in subs)
        )

    def tick(self, elapsed_s: float, now_ms: int, idle_ms: int) -> None:
        for meter in (*self.ins, *self.outs):
            meter.tick(elapsed_s)
        self.publishers.tick(elapsed_s, now_ms, idle_ms)
        for meters in self.subscriptions.values():
            meters.tick(elapsed_s, now_ms, idle_ms)


def message_backlog(
    meters: TopicMeters, cursors: Sequence[Cursor], read: dict[int, tuple[int, int]], partition: int
) -> int:
    """A subscription's backlog of one partition in messages: exact over the entries it has read
    (`read`, from `Subscription.read_backlog`), at the partition's messages per entry beyond."""
    entries = cursors[partition].backlog
    if not entries:
        return 0
    known_entries, known_messages = read.get(partition, (0, 0))
    rest = max(0, entries - known_entries)
    return known_messages + round(rest * meters.messages_per_entry(partition))


def count_expired(
    meters: SubscriptionMeters,
    per_entry: Sequence[float],
    backlog_before: Sequence[int],
    cursors: Sequence[Cursor],
) -> None:
    """Expiry moved a subscription's `cursors`: count the messages it acked, from each
    partition's entry backlog before it and its messages per entry."""
    expired = 0.0
    for partition, before in enumerate(backlog_before):
        gone = before - cursors[partition].backlog
        if gone > 0:
            expired += gone * per_entry[partition]
    if expired:
        meters.expired.add(round(expired), 0)
