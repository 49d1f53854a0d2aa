"""key_shared's bookkeeping (Pulsar's sticky-key dispatcher), for `topics.subscriptions`.

Each key goes to one live consumer: a consistent-hash ring of the live consumers (100 points
each, as Pulsar's) picks it, and a key stays with the consumer that holds its unacked messages
(`holder`, `out`: delivered, or waiting to be redelivered to it) until they are all acked, so
keys move only when consumers come or go, and never while a message of the key is out with the
old consumer. Messages read from the cursors are queued at once for the consumer of their key
(`queues`); a key's queued messages are all in one queue, in order, so moving them when the
consumers change keeps each key's order. A message without a key has the empty key.
"""

from __future__ import annotations

import bisect
import hashlib
from collections import Counter, deque
from collections.abc import Iterable

from managed_ledger.entry_format import StoredMessage

RING_POINTS = 100  # points per consumer on the hash ring (Pulsar's default)
# Messages read ahead for consumers that have not asked yet, at most; past it a consumer gets
# nothing new until the others take theirs (Pulsar's dispatcher stalls the same way).
READ_AHEAD = 10_000
Queued = tuple[int, StoredMessage]  # (partition, message)


def _hash(data: str) -> int:
    return int.from_bytes(hashlib.blake2b(data.encode(), digest_size=8).digest(), "big")


class KeyRouter:
    def __init__(self) -> None:
        self._live: frozenset[str] = frozenset()  # the consumers on the ring
        self._ring: list[tuple[int, str]] = []  # (point, consumer), sorted
        self._routes: dict[str, str] = {}  # key -> its consumer on the ring (a cache)
        self._queues: dict[str, deque[Queued]] = {}
        self._queued_at: dict[str, str] = {}  # key -> the consumer its queued messages wait for
        self._key_queued: Counter[str] = Counter()
        self.queued = 0  # messages queued in all
        self.holder: dict[str, str] = {}  # key -> consumer of its latest delivery
        self.out: Counter[str] = Counter()  # key -> its messages pending or to redeliver

    def set_consumers(self, consumers: Iterable[str]) -> None:
        """The live consumers changed: a new ring, and what is queued goes to its keys' consumers
        now."""
        self._live = frozenset(consumers)
        self._routes.clear()
        self._ring = sorted((_hash(f"{c}#{i}"), c) for c in self._live for i in range(RING_POINTS))
        queued: deque[Queued] = deque()
        for queue in self._queues.values():
            queued.extend(queue)
        self._queues.clear()
        self._queued_at.clear()
        self._key_queued.clear()
        self.queued = 0
        self.route(queued)

    def consumer_of(self, key: str) -> str:
        """The consumer a key's next message goes to: the one its earlier messages are out with
        or queued for, else the ring's choice."""
        holder = self.holder.get(key)
        if holder is not None and self.out[key] > 0 and holder in self._live:
            return holder
        queued = self._queued_at.get(key)
        if queued is not None:
            return queued
        if len(self._routes) > READ_AHEAD:
            self._routes.clear()  # a cache: keep it bounded whatever the key space
        routed = self._routes.get(key)
        if routed is None:
            i = bisect.bisect_left(self._ring, (_hash(key), ""))
            routed = self._routes[key] = self._ring[i % len(self._ring)][1]
        return routed

    def route(self, ready: deque[Queued]) -> None:
        """Queue what was read (`ready`, emptied) for the consumers of its keys."""
        while ready:
            item = ready.popleft()
            key = item[1].key or ""
            target = self.consumer_of(key)
            self._queues.setdefault(target, deque()).append(item)
            self._queued_at[key] = target
            self._key_queued[key] += 1
            self.queued += 1

    def take(self, consumer: str) -> Queued | None:
        """The next message queued for `consumer`, now counted out with it; None when none."""
        queue = self._queues.get(consumer)
        if not queue:
            return None
        item = queue.popleft()
        key = item[1].key or ""
        self.queued -= 1
        left = self._key_queued[key] - 1
        if left > 0:
            self._key_queued[key] = left
        else:
            del self._key_queued[key]
            del self._queued_at[key]
        self.out[key] += 1
        return item

    def settled(self, message: StoredMessage) -> None:
        """One of a key's messages is acked (no longer pending or to redeliver)."""
        key = message.key or ""
        left = self.out[key] - 1
        if left > 0:
            self.out[key] = left
        else:
            self.out.pop(key, None)
            self.holder.pop(key, None)

    def clear(self) -> None:
        self._queues.clear()
        self._queued_at.clear()
        self._key_queued.clear()
        self.queued = 0
        self.holder.clear()
        self.out.clear()
