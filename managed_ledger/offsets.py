"""Kafka offsets over a managed ledger: continuous, stored with each entry, found without a scan.

Every message of a managed ledger has an offset: the entry's base offset (stamped in its header
as it is appended, `entry_format.stamp_offset`) plus its index in the entry, and the next
entry's base is this one's plus its message count, so offsets never have gaps and never depend
on ledger ids (KoP's first scheme packed ledger and entry ids into the offset: gaps, and ledger
ids ran out).

What is stored, besides each entry's header (the record's properties, one compare-and-set with
the change that causes them):

    offsets      "ledger_id:first_offset,..." for the ledgers of the list, written when the
                 managed ledger adds a ledger (`ManagedLedgerRecord.add_ledger`)
    offsetFloor  the first offset still stored: the first remaining ledger's first offset, or
                 the next offset to assign when retention or truncation emptied the list

At open the next offset is the largest of: the end of the last stored entry (its base offset
plus its count, read from its header), the floor and every first offset listed (an empty ledger
dropped at recovery still says where the next one starts). All three only grow, so the largest
is the true end.

Finding the entry that holds an offset (`OffsetIndex.find`): the ledger by binary search over
the first offsets (memory), then the entry by binary search over entry headers (one entry read
per probe, log2(entries) reads, at most ~16 for Pulsar's 50,000-entry ledgers). Consumers read
on from where they stopped, so the index remembers the position of recently seen base offsets
(the entries a read returned and each append): a consumer's next fetch starts there with no
search at all. Everything here is derived from the entries and the properties, and so can be
rebuilt from them; nothing else stores offsets.
"""

from __future__ import annotations

from bisect import bisect_right
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Mapping

from managed_ledger.entry_format import entry_offsets
from managed_ledger.position import MessageId, Position
from managed_ledger.ranges import LedgerList

OFFSETS = "offsets"
OFFSET_FLOOR = "offsetFloor"
HINTS_KEPT = 4_096


def parse_offsets(properties: Mapping[str, str]) -> dict[int, int]:
    text = properties.get(OFFSETS, "")
    out: dict[int, int] = {}
    for item in text.split(","):
        if item:
            ledger_id, offset = item.split(":")
            out[int(ledger_id)] = int(offset)
    return out


def with_offsets(
    properties: Mapping[str, str], offsets: Mapping[int, int], floor: int | None
) -> dict[str, str]:
    """The properties with `offsets` (and `offsetFloor` when given) replaced."""
    out = dict(properties)
    if offsets:
        out[OFFSETS] = ",".join(f"{i}:{o}" for i, o in sorted(offsets.items()))
    else:
        out.pop(OFFSETS, None)
    if floor is not None:
        out[OFFSET_FLOOR] = str(floor)
    return out


def offset_floor(properties: Mapping[str, str]) -> int:
    return int(properties.get(OFFSET_FLOOR, "0"))


ReadEntry = Callable[[Position], Awaitable[bytes]]


class OffsetIndex:
    """Where each offset is: ledger first offsets plus remembered entry positions."""

    def __init__(self, ledgers: LedgerList, first_offsets: Mapping[int, int], read_entry: ReadEntry) -> None:
        self._ledgers = ledgers
        self._first: dict[int, int] = dict(first_offsets)
        self._read_entry = read_entry
        # base offset -> (position, message count), most recently used last
        self._hints: OrderedDict[int, tuple[Position, int]] = OrderedDict()

    def first_offset(self, ledger_id: int) -> int | None:
        return self._first.get(ledger_id)

    async def log_start_offset(self, first: Position | None, log_start: MessageId | None, end: int) -> int:
        """The first offset a reader can read: that of the first readable message (`first`, the
        first stored entry; `log_start`, the log's start inside it), `end` (the high
        watermark) when nothing is stored or the entries predate offsets."""
        if first is None:
            return end
        header = entry_offsets(await self._read_entry(first))
        if header is None or header[0] < 0:
            return end
        inside = log_start.batch_index if log_start is not None and log_start.position == first else 0
        return header[0] + inside

    def set_first(self, ledger_id: int, offset: int) -> None:
        self._first[ledger_id] = offset

    def forget(self, ledger_ids: list[int]) -> None:
        for ledger_id in ledger_ids:
            self._first.pop(ledger_id, None)

    @property
    def first_offsets(self) -> dict[int, int]:
        return dict(self._first)

    def note(self, base_offset: int, position: Position, count: int) -> None:
        """Remember that the entry at `position` starts at `base_offset`."""
        hints = self._hints
        hints[base_offset] = (position, count)
        hints.move_to_end(base_offset)
        if len(hints) > HINTS_KEPT:
            hints.popitem(last=False)

    async def find(self, offset: int) -> Position | None:
        """The stored entry holding `offset`; None when no listed ledger holds it."""
        hint = self._hints.get(offset)
        if hint is not None and self._ledgers.contains(hint[0]):
            return hint[0]
        ledger = self._ledger_of(offset)
        if ledger is None:
            return None
        lo, hi = 0, ledger[1] - 1  # the entry is the one whose offsets hold `offset`
        while lo <= hi:
            mid = (lo + hi) // 2
            position = Position(ledger[0], mid)
            header = entry_offsets(await self._read_entry(position))
            if header is None or header[0] < 0:
                return None  # an entry without an offset: this ledger predates offsets
            base, count = header
            self.note(base, position, count)
            if base <= offset < base + count:
                return position
            if base > offset:
                hi = mid - 1
            else:
                lo = mid + 1
        return None  # past the ledger's last message: not stored (yet)

    def _ledger_of(self, offset: int) -> tuple[int, int] | None:
        """(ledger id, entries) of the listed ledger whose offsets hold `offset`."""
        listed = [
            (self._first[i.ledger_id], i.ledger_id, i.entries)
            for i in self._ledgers
            if i.ledger_id in self._first
        ]
        firsts = [first for first, _, _ in listed]
        k = bisect_right(firsts, offset) - 1
        while k >= 0 and listed[k][2] == 0:
            k -= 1  # an empty ledger holds nothing: the offset would be in the one before
        if k < 0:
            return None
        return listed[k][1], listed[k][2]


async def recover_next_offset(
    ledgers: LedgerList, properties: Mapping[str, str], read_entry: ReadEntry
) -> int:
    """The next offset to assign, from what is stored (see the module docstring)."""
    first_offsets = parse_offsets(properties)
    candidates = [offset_floor(properties), *first_offsets.values()]
    last = ledgers.last_position()
    if last is not None:
        header = entry_offsets(await read_entry(last))
        if header is not None and header[0] >= 0:
            candidates.append(header[0] + header[1])
        elif last.ledger_id in first_offsets:  # not Quire entries: one message each
            candidates.append(first_offsets[last.ledger_id] + last.entry_id + 1)
    return max(candidates)
