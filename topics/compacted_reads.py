"""A subscription's read through the compacted view, one partition at a time (Pulsar's branch
rule for a subscription with `read_compacted`, as `topics.readers` applies it to readers).

While a partition's cursor is at or before the compaction horizon, its messages come from the
compacted view (`topics.compacted`), from the cursor's read position on; once the view is read
up to the horizon, the cursor is rewound to right after it and the topic continues from there.

What compaction removed is never delivered, so nobody would ack it one by one: the partition
keeps the compacted messages delivered and not acked yet (`unacked`), and the horizon once the
view was read to it (`end`). When both say "done", everything up to the horizon is acked on the
cursor (`finish`). Invariant, after each call: `end` is set only while `unacked` is not empty.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from managed_ledger.api import Cursor, ManagedLedger
from managed_ledger.entry_format import StoredMessage
from managed_ledger.position import MessageId, Position
from topics.readers import CompactedSource, after


class CompactedPartition:
    __slots__ = ("_cursor", "_ml", "_view", "end", "next", "unacked")

    def __init__(self, view: CompactedSource, ml: ManagedLedger, cursor: Cursor) -> None:
        self._view = view
        self._ml = ml
        self._cursor = cursor
        self.next: MessageId | None = None  # where the view's next read starts, mid-view
        self.unacked: set[MessageId] = set()
        self.end: Position | None = None

    async def read(self, wanted: int, take: Callable[[StoredMessage], bool]) -> bool | None:
        """Read up to `wanted` messages of the view and pass each to `take`, which says whether
        it now awaits an ack (False: acked inside its batch before a restart). None when the
        cursor is past the horizon (the caller reads the topic instead); else True."""
        horizon = await self._view.horizon(self._ml.name)
        read_position = self._cursor.read_position
        if horizon is None or read_position > horizon.position:
            self.next = None
            return None
        start = self.next or MessageId(read_position.ledger_id, read_position.entry_id, 0)
        messages = await self._view.read(self._ml.name, start, wanted, until=horizon)
        for m in messages:
            if take(m):
                self.unacked.add(m.message_id)
        if len(messages) < wanted:
            # The view is read up to the horizon: the topic continues right after it.
            self._cursor.rewind(self._ml.next_position(horizon.position))
            self.next = None
            self.end = horizon.position
            self.finish()
        else:
            self.next = after(messages[-1].message_id)
        return True

    def acked(self, ids: Iterable[MessageId]) -> None:
        """These messages were acked (some may not be this partition's)."""
        self.unacked.difference_update(ids)
        self.finish()

    def acked_through(self, mid: MessageId) -> None:
        """Every message of this partition up to `mid` was acked."""
        self.unacked.difference_update([m for m in self.unacked if m <= mid])
        self.finish()

    def finish(self) -> None:
        """Ack up to the horizon on the cursor once the view was read to it and all it
        delivered is acked."""
        end = self.end
        if end is not None and not self.unacked:
            self.end = None
            self._cursor.ack_cumulative(end)

    def clear(self) -> None:
        """Forget the read (a seek is about to move the cursor)."""
        self.next = None
        self.unacked = set()
        self.end = None
