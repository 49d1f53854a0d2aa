"""key_shared's bookkeeping (Pulsar's sticky-key dispatcher), for `topics.dispatchers.KeySharedDispatcher`.

Each key goes to one live consumer, its owner: the choice of a consistent-hash ring of the live
consumers (100 points each, as Pulsar's), unless the key is sticky. Keys move only when consumers
come or go, and never while a message of the key is out with the old consumer: when the ring
changes, a key whose unacked messages (delivered, or waiting to be redelivered) are with a
consumer that stays, and that the new ring gives to another, stays with that consumer (`sticky`)
until its messages out with it or queued for it are all acked; then it follows the ring. Messages
read from the cursors are queued at once for their key's owner; a key's queued messages are all
in one queue, in order, so moving them when the consumers change keeps each key's order. A
message without a key has the empty key.

Why stickiness is an exception counted per key rather than a holder and counts kept for every
key: between changes of consumers every key's owner is the ring's choice, so routing a message
is one dict lookup, and handing it out or acking it does no per-key work at all. Counting every
key's messages in and out (two counters per message queued, handed out and acked) was a tenth
of the consume path's instructions. Only the keys a change left with their old consumer are
counted, message by message, until they are free; each change counts them afresh from the
messages out (`set_consumers`).
"""

from __future__ import annotations

import bisect
import hashlib
from collections import deque
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
        # key -> its owner: every sticky key's, and the ring's choice for keys seen (a cache).
        self._owners: dict[str, str] = {}
        # Sticky key -> its messages out with or queued for its owner (not acked yet).
        self.sticky: dict[str, int] = {}
        self._queues: dict[str, deque[Queued]] = {}  # consumer -> messages queued for it
        self.queued = 0  # messages queued in all
        # Set when messages were queued for a consumer other than the one asking, or read-ahead
        # room freed, or the consumers changed: the others' long polls must look again.
        self._others_ready = False

    def set_consumers(
        self, consumers: Iterable[str], out: Iterable[tuple[StoredMessage, str | None]] = ()
    ) -> None:
        """The live consumers changed. `out`: the messages delivered and not acked (pending, or
        waiting for redelivery), each with the consumer that had it last. A key with messages
        out with a consumer that is still live stays with it; what is queued goes to its key's
        owner now."""
        self._live = frozenset(consumers)
        counts: dict[str, int] = {}
        held: dict[str, str] = {}
        for message, consumer in out:
            key = message.key or ""
            counts[key] = counts.get(key, 0) + 1
            if consumer in self._live:
                held[key] = consumer
        queued = [item for queue in self._queues.values() for item in queue]
        self._ring = sorted((_hash(f"{c}#{i}"), c) for c in self._live for i in range(RING_POINTS))
        self._owners.clear()
        self.sticky.clear()
        for key, holder in held.items():
            if holder != self.consumer_of(key):
                self._owners[key] = holder
                self.sticky[key] = counts[key]
        self._queues = {c: deque() for c in self._live}
        self.queued = 0
        self.route(queued)
        self._others_ready = True

    def others_ready(self) -> bool:
        """Whether other consumers' long polls should look again (once per change)."""
        ready, self._others_ready = self._others_ready, False
        return ready

    def consumer_of(self, key: str) -> str:
        """The consumer a key's messages go to: its sticky consumer, else the ring's choice."""
        owner = self._owners.get(key)
        if owner is None:
            if len(self._owners) > READ_AHEAD:
                self._forget_ring_choices()
            i = bisect.bisect_left(self._ring, (_hash(key), ""))
            owner = self._owners[key] = self._ring[i % len(self._ring)][1]
        return owner

    def _forget_ring_choices(self) -> None:
        """Keep the cache of the ring's choices bounded whatever the key space (sticky keys stay)."""
        sticky = {key: self._owners[key] for key in self.sticky}
        self._owners.clear()
        self._owners.update(sticky)

    def route(self, ready: Iterable[Queued], asking: str = "") -> None:
        """Queue what was read (`ready`; a deque is emptied) for the owners of its keys; `asking`
        is the consumer whose fill read it. Between changes of consumers no key is sticky and
        this is a dict lookup and an append per message."""
        owners, queues, sticky = self._owners, self._queues, self.sticky
        mine = queues.get(asking)
        mine_before = len(mine) if mine is not None else 0
        n = 0
        for item in ready:
            n += 1
            key = item[1].key or ""
            owner = owners.get(key)
            if owner is None:
                owner = self.consumer_of(key)
            elif sticky and key in sticky:
                sticky[key] += 1
            queues[owner].append(item)
        self.queued += n
        if n > (len(mine) if mine is not None else 0) - mine_before:
            self._others_ready = True
        if isinstance(ready, deque):
            ready.clear()

    def take(self, consumer: str, n: int) -> list[Queued]:
        """Up to `n` messages queued for `consumer`, in order (a sticky key's stay counted until
        they are acked: `settled`)."""
        queue = self._queues.get(consumer)
        if not queue or n <= 0:
            return []
        if n >= len(queue):
            items = list(queue)
            queue.clear()
        else:
            items = [queue.popleft() for _ in range(n)]
        before = self.queued
        self.queued -= len(items)
        if before >= READ_AHEAD > self.queued:
            self._others_ready = True  # consumers stalled by a full read-ahead may read again
        return items

    def settled(self, message: StoredMessage) -> None:
        """A message taken from a queue is acked (no longer pending or to redeliver). Only a
        sticky key counts it; the last one frees the key, which follows the ring again. Callers
        skip the call while nothing is sticky."""
        key = message.key or ""
        left = self.sticky.get(key)
        if left is None:
            return
        if left > 1:
            self.sticky[key] = left - 1
        else:
            del self.sticky[key]
            del self._owners[key]

    def clear(self) -> None:
        """Nothing is queued or out any more (a seek)."""
        for queue in self._queues.values():
            queue.clear()
        self.queued = 0
        self.sticky.clear()
        self._owners.clear()
