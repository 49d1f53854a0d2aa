"""A durable cursor (Pulsar's ManagedCursorImpl): mark-delete plus acked ranges beyond it.

State in memory: `mark_delete_position` (every entry at or before it is acked), the individually
acked ranges after it (`AckedRanges`) and the read position (not persisted: after a restart
reads start right after mark-delete, and unacked entries are delivered again).

Durability without a SQL write per ack: an ack only changes memory and marks the cursor dirty;
the managed ledger flushes all dirty cursors of the managed ledger in one `update_cursors`
transaction every `cursor_flush_interval_ms` and on close. `flush()` forces one and returns once
the state as of the call is stored, so a caller may report those acks as durable. Seeks
(`reset`, `reset_to_time`) flush at once: they are the only way a cursor moves back, and a crash
must not undo them into a later position.

Stored form (`CursorMetadata`): mark_delete (ledger, entry); individually_deleted as closed
ranges ((ledger, entry), (ledger, entry)), sorted and disjoint; properties as given;
delivery_state as its owner gives it.

Delivery state: an opaque JSON value owned by whoever consumes through the cursor (a topic's
subscription keeps acks inside batches and redelivery counts there). The owner registers a
source (`track_delivery_state`) and calls `delivery_state_changed()` when its state changes;
that marks the cursor dirty like an ack, and the next flush asks the source once, in
`snapshot()`, so the owner builds the value only once per flush, not per change. It is stored
in the same row and transaction as the acks it goes with, and read back at open
(`delivery_state`). A source that raises stores None: losing it may only mean redeliveries,
while a stale value might not (after a seek, say). An owner that seeks must report the change
before the reset, whose flush stores it.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping
from dataclasses import replace
from typing import Any, Protocol

from managed_ledger.metadata.api import CursorMetadata
from managed_ledger.position import Position
from managed_ledger.ranges import AckedRanges, LedgerList

log = logging.getLogger(__name__)

# Asked for the owner's delivery state when a flush stores the cursor (JSON-ready, or None).
DeliveryStateSource = Callable[[], Mapping[str, Any] | None]


class CursorSource(Protocol):
    """What a cursor needs of its managed ledger: the ledger list (positions and counts), its
    entries, and a flush of every dirty cursor."""

    @property
    def ledger_list(self) -> LedgerList: ...

    async def read_entries(self, start: Position, max_entries: int) -> list[tuple[Position, bytes]]: ...

    async def find_position_by_publish_time(self, timestamp_ms: int) -> Position | None: ...

    async def flush_cursors(self) -> None: ...


class ManagedCursor:
    def __init__(
        self, source: CursorSource, meta: CursorMetadata, on_change: Callable[[], None] | None = None
    ) -> None:
        """`on_change`: told of every change that a flush must store (the managed ledger's
        timer wakes for it)."""
        self._source = source
        self._on_change = on_change
        self._ledgers = source.ledger_list
        self._meta = meta
        self._name = meta.name
        self._mark_delete = Position(*meta.mark_delete)
        self._acked = AckedRanges(self._ledgers.next_position)
        for first, last in meta.individually_deleted:
            self._acked.add_range(Position(*first), Position(*last))
        self._properties: dict[str, object] = dict(meta.properties)
        self._read_position = self._ledgers.next_position(self._mark_delete)
        self._delivery_state: Mapping[str, Any] | None = meta.delivery_state
        self._delivery_source: DeliveryStateSource | None = None
        self._delivery_stale = False  # the source has changes the next snapshot must ask for
        self._changes = 0  # bumped on every change; a flush cleans only what it saw
        self._flushed_changes = 0
        self.persisted_mark_delete = self._mark_delete

    # --- state ---------------------------------------------------------------------------------
    @property
    def name(self) -> str:
        return self._name

    @property
    def mark_delete_position(self) -> Position:
        return self._mark_delete

    @property
    def read_position(self) -> Position:
        if self._read_position <= self._mark_delete:
            self._read_position = self._ledgers.next_position(self._mark_delete)
        return self._read_position

    @property
    def properties(self) -> dict[str, object]:
        return dict(self._properties)

    @property
    def delivery_state(self) -> Mapping[str, Any] | None:
        """The owner's delivery state as last stored (as read at open until a flush)."""
        return self._meta.delivery_state

    @property
    def dirty(self) -> bool:
        return self._changes != self._flushed_changes

    @property
    def backlog(self) -> int:
        last = self._ledgers.last_position()
        if last is None:
            return 0
        ledgers = self._ledgers
        acked = sum(ledgers.count_between(Position(f.ledger_id, f.entry_id - 1), la) for f, la in self._acked)
        return max(0, ledgers.count_between(self._mark_delete, last) - acked)

    def individually_deleted_ranges(self) -> list[tuple[Position, Position]]:
        return list(self._acked)

    def is_acked(self, position: Position) -> bool:
        return position <= self._mark_delete or self._acked.contains(position)

    # --- reads ---------------------------------------------------------------------------------
    async def read_entries(self, max_entries: int) -> list[tuple[Position, bytes]]:
        out: list[tuple[Position, bytes]] = []
        while len(out) < max_entries:
            batch = await self._source.read_entries(self.read_position, max_entries - len(out))
            if not batch:
                break
            self._read_position = self._ledgers.next_position(batch[-1][0])
            out.extend((p, data) for p, data in batch if not self._acked.contains(p))
        return out

    def rewind(self, position: Position | None = None) -> None:
        nxt = self._ledgers.next_position(self._mark_delete)
        self._read_position = nxt if position is None or position < nxt else position

    # --- acks ----------------------------------------------------------------------------------
    def ack(self, positions: Iterable[Position]) -> None:
        changed = False
        for position in positions:
            if position > self._mark_delete and self._ledgers.contains(position):
                changed |= self._acked.add(position)
        if changed:
            self._advance_mark_delete()
            self._changed()

    def ack_cumulative(self, position: Position) -> None:
        last = self._ledgers.last_position()
        if last is not None and position > last:
            position = last
        if position <= self._mark_delete:
            return
        self._mark_delete = position
        self._acked.drop_up_to(position)
        self._advance_mark_delete()
        self._changed()

    def _advance_mark_delete(self) -> None:
        while True:
            last = self._acked.pop_first_if_starts_at(self._ledgers.next_position(self._mark_delete))
            if last is None:
                return
            self._mark_delete = last

    def _changed(self) -> None:
        self._changes += 1  # the managed ledger's timer flushes dirty cursors on its interval
        if self._on_change is not None:
            self._on_change()

    # --- delivery state ------------------------------------------------------------------------
    def track_delivery_state(self, source: DeliveryStateSource | None) -> None:
        """Who to ask for the delivery state at flush time (None: keep the stored one)."""
        self._delivery_source = source

    def delivery_state_changed(self) -> None:
        """The owner's state changed: the next flush asks the source and stores the answer."""
        self._delivery_stale = True
        self._changed()

    def _current_delivery_state(self) -> Mapping[str, Any] | None:
        if self._delivery_stale and self._delivery_source is not None:
            self._delivery_stale = False
            try:
                self._delivery_state = self._delivery_source()
            except Exception:  # never a flush that fails for good: store none (redeliveries)
                log.exception("cursor %s: delivery state not built; storing none", self._name)
                self._delivery_state = None
        return self._delivery_state

    # --- seeks ---------------------------------------------------------------------------------
    async def reset(self, position: Position) -> None:
        self._mark_delete = Position(position.ledger_id, position.entry_id - 1)
        self._acked.clear()
        self._read_position = position
        self._changed()
        await self.flush()

    async def reset_to_time(self, timestamp_ms: int) -> None:
        position = await self._source.find_position_by_publish_time(timestamp_ms)
        if position is None:
            last = self._ledgers.last_position()
            position = self._ledgers.next_position(last if last is not None else self._mark_delete)
        await self.reset(position)

    # --- persistence ---------------------------------------------------------------------------
    async def flush(self) -> None:
        await self._source.flush_cursors()

    async def set_properties(self, properties: dict[str, object]) -> None:
        self._properties = dict(properties)
        self._changed()
        await self.flush()

    def snapshot(self) -> tuple[CursorMetadata, int]:
        """The record to store now and the change count it covers."""
        meta = replace(
            self._meta,
            mark_delete=(self._mark_delete.ledger_id, self._mark_delete.entry_id),
            individually_deleted=tuple(
                ((f.ledger_id, f.entry_id), (la.ledger_id, la.entry_id)) for f, la in self._acked
            ),
            properties=dict(self._properties),
            delivery_state=self._current_delivery_state(),
        )
        return meta, self._changes

    def flushed(self, stored: CursorMetadata, changes: int) -> None:
        self._meta = stored
        self._flushed_changes = max(self._flushed_changes, changes)
        self.persisted_mark_delete = Position(*stored.mark_delete)

    def stats(self) -> dict[str, object]:
        ranges = ",".join(f"({f.ledger_id}:{f.entry_id - 1}..{la}]" for f, la in self._acked)
        return {
            "markDeletePosition": str(self._mark_delete),
            "readPosition": str(self.read_position),
            "individuallyDeletedMessages": f"[{ranges}]",
        }
