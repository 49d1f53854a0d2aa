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
        # Set when messages were queued for a consumer other than the one asking, or read-ahead
        # room freed, or the consumers changed: the others' long polls must look again.
        self._others_ready = False

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
        self._others_ready = True

    def others_ready(self) -> bool:
        """Whether other consumers' long polls should look again (once per change)."""
        ready, self._others_ready = self._others_ready, False
        return ready

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

    def route(self, ready: deque[Queued], asking: str = "") -> None:
        """Queue what was read (`ready`, emptied) for the consumers of its keys; `asking` is the
        consumer whose fill read it. A key with messages queued already goes to the same queue
        (all its queued messages are in one queue, in order)."""
        queues, queued_at, key_queued = self._queues, self._queued_at, self._key_queued
        for item in ready:
            key = item[1].key or ""
            target = queued_at.get(key)
            if target is None:
                target = queued_at[key] = self.consumer_of(key)
                key_queued[key] = 1
            else:
                key_queued[key] += 1
            if target != asking:
                self._others_ready = True
            queue = queues.get(target)
            if queue is None:
                queue = queues[target] = deque()
            queue.append(item)
        self.queued += len(ready)
        ready.clear()

    def take(self, consumer: str, n: int) -> list[Queued]:
        """Up to `n` messages queued for `consumer`, in order, now counted out with it."""
        queue = self._queues.get(consumer)
        if not queue or n <= 0:
            return []
        items = [queue.popleft() for _ in range(min(n, len(queue)))]
        before = self.queued
        self.queued -= len(items)
        if before >= READ_AHEAD > self.queued:
            self._others_ready = True  # consumers stalled by a full read-ahead may read again
        key_queued, queued_at, out = self._key_queued, self._queued_at, self.out
        for item in items:
            key = item[1].key or ""
            left = key_queued[key] - 1
            if left > 0:
                key_queued[key] = left
            else:
                del key_queued[key]
                del queued_at[key]
            out[key] += 1
        return items

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
