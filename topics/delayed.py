"""Delayed delivery (Pulsar's DelayedDeliveryTracker), for `topics.subscriptions.Subscription`.

A message whose entry carries a delivery time (`StoredMessage.deliver_at`: a Pulsar SEND's
`deliver_at_time`, the client's `deliver_at` / `deliver_after`) is, on a shared or key_shared
subscription, not handed out before that time: read from the cursor, it is set aside here
rather than queued to hand out, and the subscription puts it back in its read-ahead once due
(`due`), ahead of what was read after it. Exclusive and failover subscriptions ignore the time,
as Pulsar's do; readers (REST or Pulsar) see the message as any other.

What is set aside is memory only, as in Pulsar: the cursor does not move past an unacked
message, so after a restart the message is read again and set aside again until its time.
"""

from __future__ import annotations

import heapq
from collections.abc import Iterable

from managed_ledger.entry_format import StoredMessage
from managed_ledger.position import MessageId
from topics.api import SubscriptionType

DELAYING_TYPES: frozenset[SubscriptionType] = frozenset({"shared", "key_shared"})


class DelayedMessages:
    def __init__(self) -> None:
        # (deliver_at ms, id, partition, message): the earliest time first, then id order.
        self._heap: list[tuple[int, MessageId, int, StoredMessage]] = []

    def __len__(self) -> int:
        return len(self._heap)

    def hold(self, partition: int, messages: Iterable[StoredMessage], deliver_at: int) -> None:
        for m in messages:
            heapq.heappush(self._heap, (deliver_at, m.message_id, partition, m))

    def due(self, now: int) -> list[tuple[int, StoredMessage]]:
        """(partition, message) of what is due by `now`, in id order, taken out."""
        heap = self._heap
        out: list[tuple[MessageId, int, StoredMessage]] = []
        while heap and heap[0][0] <= now:
            _, mid, partition, message = heapq.heappop(heap)
            out.append((mid, partition, message))
        out.sort(key=lambda item: item[0])
        return [(partition, message) for _, partition, message in out]

    def next_ms(self) -> int | None:
        """When the next message is due (ms), None when none waits."""
        return self._heap[0][0] if self._heap else None

    def clear(self) -> None:
        self._heap.clear()
