"""key_shared's bookkeeping (Pulsar's sticky-key dispatcher), for `topics.dispatchers.KeySharedDispatcher`.

Each key goes to one live consumer, its owner: the consumer of the key's hash slot
(`topics.key_ranges`: Murmur3 of the key mod 65,536, divided by the AUTO_SPLIT ring or the
consumers' STICKY ranges), unless the key is held. Keys move only when consumers come or go,
and, unless the consumers allow out-of-order delivery, never while a message of the key is out
with the old consumer: when the consumers change, a key whose unacked messages (delivered, or
waiting to be redelivered) are with a consumer that stays, and that the new slots give to
another, stays with that consumer (`sticky`) until its messages out with it or queued for it
are all acked; then it follows its slot. Messages read from the cursors are queued at once for
their key's owner; a key's queued messages are all in one queue, in order, so moving them when
the consumers change keeps each key's order. A key no consumer covers (STICKY ranges with a
gap) is queued for nobody (`NOBODY`) until one comes.

Which key: a message's own key (None: the empty key), or, once entries go whole
(`by_entry`, a Pulsar consumer's push), its entry's (`StoredMessage.entry_key`: the ordering
key, else the entry's first message's key), so that a Pulsar batch goes whole to one consumer,
as Pulsar routes a batch by its metadata's key.

Why stickiness is an exception counted per key rather than a holder and counts kept for every
key: between changes of consumers every key's owner is its slot's, so routing a message is one
dict lookup, and handing it out or acking it does no per-key work at all. Counting every key's
messages in and out (two counters per message queued, handed out and acked) was a tenth of the
consume path's instructions. Only the keys a change left with their old consumer are counted,
message by message, until they are free; each change counts them afresh from the messages out
(`set_consumers`).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable, Mapping

from managed_ledger.entry_format import StoredMessage
from topics.api import KeySharedPolicy
from topics.key_ranges import Slots

NOBODY = ""  # the owner of keys no live consumer covers (consumer ids are never empty)
# Messages read ahead for consumers that have not asked yet, at most; past it a consumer gets
# nothing new until the others take theirs (Pulsar's dispatcher stalls the same way).
READ_AHEAD = 10_000
Queued = tuple[int, StoredMessage]  # (partition, message)


class KeyRouter:
    def __init__(self) -> None:
        self._live: frozenset[str] = frozenset()  # the consumers the slots are divided among
        self._slots = Slots()
        self.by_entry = False  # route by the entry's key (entries go whole)
        # key -> its owner: every sticky key's, and its slot's owner for keys seen (a cache).
        self._owners: dict[str, str] = {}
        # Sticky key -> its messages out with or queued for its owner (not acked yet).
        self.sticky: dict[str, int] = {}
        self._queues: dict[str, deque[Queued]] = {NOBODY: deque()}  # consumer -> queued for it
        self.queued = 0  # messages queued in all
        # Set when messages were queued for a consumer other than the one asking, or read-ahead
        # room freed, or the consumers changed: the others' long polls must look again.
        self._others_ready = False

    def key_of(self, message: StoredMessage) -> str:
        """The key `message` is routed by."""
        if self.by_entry and message.entry_key is not None:
            return message.entry_key
        return message.key or ""

    def set_consumers(
        self,
        consumers: Iterable[str],
        out: Iterable[tuple[StoredMessage, str | None]] = (),
        policies: Mapping[str, KeySharedPolicy] | None = None,
    ) -> None:
        """The live consumers changed. `out`: the messages delivered and not acked (pending, or
        waiting for redelivery), each with the consumer that had it last. A key with messages
        out with a consumer that is still live stays with it (unless the consumers' policies
        allow out-of-order delivery); what is queued goes to its key's owner now."""
        policies = policies or {}
        self._live = frozenset(consumers)
        in_order = not any(policies[c].allow_out_of_order for c in self._live if c in policies)
        counts: dict[str, int] = {}
        held: dict[str, str] = {}
        for message, consumer in out if in_order else ():
            key = self.key_of(message)
            counts[key] = counts.get(key, 0) + 1
            if consumer in self._live:
                held[key] = consumer
        queued = [item for queue in self._queues.values() for item in queue]
        self._slots.set(self._live, policies)
        self._owners.clear()
        self.sticky.clear()
        for key, holder in held.items():
            if holder != self.consumer_of(key):
                self._owners[key] = holder
                self.sticky[key] = counts[key]
        self._queues = {c: deque() for c in self._live}
        self._queues[NOBODY] = deque()
        self.queued = 0
        self.route(queued)
        self._others_ready = True

    def others_ready(self) -> bool:
        """Whether other consumers' long polls should look again (once per change)."""
        ready, self._others_ready = self._others_ready, False
        return ready

    def consumer_of(self, key: str) -> str:
        """The consumer a key's messages go to: its sticky consumer, else its slot's (NOBODY
        when no live consumer covers the slot)."""
        owner = self._owners.get(key)
        if owner is None:
            if len(self._owners) > READ_AHEAD:
                self._forget_ring_choices()
            owner = self._owners[key] = self._slots.owner(key) or NOBODY
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
        owners, queues, sticky, by_entry = self._owners, self._queues, self.sticky, self.by_entry
        mine = queues.get(asking)
        mine_before = len(mine) if mine is not None else 0
        n = 0
        for item in ready:
            n += 1
            message = item[1]
            key = (message.entry_key if by_entry and message.entry_key is not None else message.key) or ""
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

    def take_of_entry(self, consumer: str, out: list[Queued]) -> None:
        """Append to `out` what is queued for `consumer` next of the entry of out's last message
        (an entry goes whole: its messages are queued together, for one consumer)."""
        queue = self._queues.get(consumer)
        if not queue or not out:
            return
        position = out[-1][1].message_id.position
        before, queued = len(out), self.queued
        while queue and queue[0][1].message_id.position == position:
            out.append(queue.popleft())
        self.queued -= len(out) - before
        if queued >= READ_AHEAD > self.queued:
            self._others_ready = True  # consumers stalled by a full read-ahead may read again

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
        key = self.key_of(message)
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
