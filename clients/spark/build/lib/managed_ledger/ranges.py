"""Position arithmetic over a managed ledger: its ordered ledger list and a cursor's acked ranges.

Positions are (ledger_id, entry_id) ordered as tuples. Entry ids are dense within a ledger but a
managed ledger's positions are not dense: the entry after (7, 4) may be (9, 0). So "the next
position" is a question for the ledger list, and two acked ranges are adjacent only when the
list says the first one's last position is followed by the second one's first.

A position need not name a stored entry: (L, -1) is "just before L's first entry", a position in
a trimmed ledger still orders correctly, and (last_ledger, entries) is "the next one written".
Every rule here is written by ordering only, so such positions need no special cases.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from bookie.types import LedgerSpec
from managed_ledger.position import Position


@dataclass(slots=True)
class LedgerInfo:
    """One ledger of a managed ledger as the managed ledger sees it.

    `entries`/`size_bytes` count confirmed entries while it is written and are final once it is
    closed; `timestamp_ms` is its closing time, 0 while it is open (as Pulsar lists it).
    """

    ledger_id: int
    entries: int
    size_bytes: int
    timestamp_ms: int
    spec: LedgerSpec

    @property
    def last_position(self) -> Position:
        return Position(self.ledger_id, self.entries - 1)


class LedgerList:
    """The ordered ledgers of one managed ledger, with the counting every rule needs."""

    def __init__(self) -> None:
        self._ids: list[int] = []
        self._infos: dict[int, LedgerInfo] = {}

    def __iter__(self) -> Iterator[LedgerInfo]:
        return (self._infos[i] for i in self._ids)

    def __len__(self) -> int:
        return len(self._ids)

    @property
    def ids(self) -> tuple[int, ...]:
        return tuple(self._ids)

    def get(self, ledger_id: int) -> LedgerInfo | None:
        return self._infos.get(ledger_id)

    def last(self) -> LedgerInfo | None:
        return self._infos[self._ids[-1]] if self._ids else None

    def add(self, info: LedgerInfo) -> None:
        assert not self._ids or info.ledger_id > self._ids[-1], "ledger ids increase"
        self._ids.append(info.ledger_id)
        self._infos[info.ledger_id] = info

    def remove(self, ledger_id: int) -> None:
        if self._infos.pop(ledger_id, None) is not None:
            self._ids.remove(ledger_id)

    def first_position(self) -> Position | None:
        for info in self:
            if info.entries > 0:
                return Position(info.ledger_id, 0)
        return None

    def last_position(self) -> Position | None:
        for ledger_id in reversed(self._ids):
            info = self._infos[ledger_id]
            if info.entries > 0:
                return info.last_position
        return None

    def contains(self, position: Position) -> bool:
        info = self._infos.get(position.ledger_id)
        return info is not None and 0 <= position.entry_id < info.entries

    def total_entries(self) -> int:
        return sum(info.entries for info in self._infos.values())

    def total_size_bytes(self) -> int:
        return sum(info.size_bytes for info in self._infos.values())

    def size_after(self, position: Position) -> int:
        """Bytes stored after `position`: every later ledger's size, plus its own ledger's share of
        the entries after it at that ledger's average entry size (entry sizes are not kept one by
        one; Pulsar estimates a backlog's size the same way)."""
        total = 0
        for ledger_id in reversed(self._ids):
            info = self._infos[ledger_id]
            if ledger_id > position.ledger_id:
                total += info.size_bytes
                continue
            if ledger_id == position.ledger_id and info.entries > 0:
                after = min(info.entries, max(0, info.entries - position.entry_id - 1))
                total += info.size_bytes * after // info.entries
            break
        return total

    def position_keeping(self, max_bytes: int) -> Position | None:
        """The earliest position with at most `max_bytes` stored after it (by `size_after`), or
        None when everything stored fits."""
        kept = 0
        for ledger_id in reversed(self._ids):
            info = self._infos[ledger_id]
            if kept + info.size_bytes <= max_bytes:
                kept += info.size_bytes
                continue
            room = max_bytes - kept
            # The most entries k of this ledger with size * k // entries <= room.
            k = min(info.entries, ((room + 1) * info.entries - 1) // info.size_bytes)
            return Position(ledger_id, info.entries - k - 1)
        return None

    def count_up_to(self, position: Position) -> int:
        """Number of stored entries at or before `position`."""
        n = 0
        for ledger_id in self._ids:
            info = self._infos[ledger_id]
            if ledger_id < position.ledger_id:
                n += info.entries
            else:
                if ledger_id == position.ledger_id:
                    n += max(0, min(position.entry_id + 1, info.entries))
                break
        return n

    def count_between(self, after: Position, up_to: Position) -> int:
        """Stored entries in (after, up_to]."""
        if up_to <= after:
            return 0
        return self.count_up_to(up_to) - self.count_up_to(after)

    def next_position(self, position: Position) -> Position:
        """The first stored entry after `position`, or where the next write goes."""
        info = self._infos.get(position.ledger_id)
        if info is not None and position.entry_id + 1 < info.entries:
            return Position(position.ledger_id, max(position.entry_id + 1, 0))
        for ledger_id in self._ids[bisect_right(self._ids, position.ledger_id) :]:
            if self._infos[ledger_id].entries > 0:
                return Position(ledger_id, 0)
        last = self.last()
        if last is not None and last.ledger_id > position.ledger_id:
            return Position(last.ledger_id, last.entries)
        return Position(position.ledger_id, position.entry_id + 1)

    def read_plan(self, start: Position, max_entries: int) -> list[tuple[LedgerInfo, int, int]]:
        """(ledger, first, last) runs covering up to max_entries stored entries >= start."""
        plan: list[tuple[LedgerInfo, int, int]] = []
        remaining = max_entries
        for ledger_id in self._ids[bisect_left(self._ids, start.ledger_id) :]:
            if remaining <= 0:
                break
            info = self._infos[ledger_id]
            first = max(start.entry_id, 0) if ledger_id == start.ledger_id else 0
            if first >= info.entries:
                continue
            last = min(info.entries - 1, first + remaining - 1)
            plan.append((info, first, last))
            remaining -= last - first + 1
        return plan

    def position_at(self, index: int) -> Position:
        """The stored entry with ordinal `index` (0 = the oldest stored entry)."""
        for info in self:
            if index < info.entries:
                return Position(info.ledger_id, index)
            index -= info.entries
        raise IndexError(index)


class AckedRanges:
    """Sorted, disjoint closed ranges [first, last] of individually acked positions.

    Adjacency is asked of `next_position` at the time two ranges meet, so a range ending at a
    ledger's last entry merges with one starting at the next ledger's first entry.
    """

    def __init__(self, next_position: Callable[[Position], Position]) -> None:
        self._next = next_position
        self._firsts: list[Position] = []
        self._lasts: list[Position] = []

    def __len__(self) -> int:
        return len(self._firsts)

    def __iter__(self) -> Iterator[tuple[Position, Position]]:
        return zip(self._firsts, self._lasts, strict=True)

    def clear(self) -> None:
        self._firsts.clear()
        self._lasts.clear()

    def contains(self, position: Position) -> bool:
        i = bisect_right(self._firsts, position) - 1
        return i >= 0 and self._lasts[i] >= position

    def add(self, position: Position) -> bool:
        """Add one position; False if it was already in a range."""
        if self.contains(position):
            return False
        i = bisect_right(self._firsts, position)
        joins_left = i > 0 and self._next(self._lasts[i - 1]) == position
        joins_right = i < len(self._firsts) and self._next(position) == self._firsts[i]
        if joins_left and joins_right:
            self._lasts[i - 1] = self._lasts[i]
            del self._firsts[i], self._lasts[i]
        elif joins_left:
            self._lasts[i - 1] = position
        elif joins_right:
            self._firsts[i] = position
        else:
            self._firsts.insert(i, position)
            self._lasts.insert(i, position)
        return True

    def add_range(self, first: Position, last: Position) -> None:
        """Restore a persisted range (ranges arrive sorted and disjoint)."""
        assert not self._lasts or first > self._lasts[-1], "ranges arrive sorted"
        self._firsts.append(first)
        self._lasts.append(last)

    def drop_up_to(self, position: Position) -> None:
        """Forget every acked position <= `position` (it is covered by mark-delete now)."""
        while self._firsts and self._lasts[0] <= position:
            del self._firsts[0], self._lasts[0]
        if self._firsts and self._firsts[0] <= position:
            self._firsts[0] = self._next(position)

    def pop_first_if_starts_at(self, position: Position) -> Position | None:
        """If the first range starts at `position`, remove it and return its last position."""
        if self._firsts and self._firsts[0] == position:
            last = self._lasts[0]
            del self._firsts[0], self._lasts[0]
            return last
        return None
