"""A subscription's delivery state as stored with each of its cursors (`cursors.delivery_state`).

What the cursor (mark-delete plus acked entries) cannot say, kept so that a new owner of the
topic carries on where the old one stopped (docs/semantics.md, "Delivery state"):

- acks inside a batch: per entry some but not all of whose messages are acked, the batch
  indexes acked, so they are not delivered again;
- redelivery counts: per message delivered and not acked (pending, or waiting for redelivery),
  the redelivery count of its last delivery, so its next delivery says previous + 1.

Stored form, version 1, one JSON object per cursor (NULL when there is nothing to keep):

    {"v": 1, "entries": [[ledger_id, entry_id, size, acked, delivered], ...]}

sorted by position. `size` is the entry's number of messages (0: not known, as for an entry read
through the compacted view; then `acked` is empty). `acked` is the sorted list of batch indexes
acked. `delivered` is either one integer n, when every message of the entry not in `acked` was
delivered and all share the redelivery count n, or an object {"batch index": n} naming the
delivered ones only. When the state would cover more than `MAX_MESSAGES` messages (acked
indexes plus delivered messages), only the oldest entries are kept and `"omitted"` says how many
messages were left out: their acks are forgotten (the messages are delivered again) and their
counts restart at 0. Entries the cursor itself holds as acked are never stored.

Reading is forgiving: a value of an unknown version or shape restores nothing (everything after
the cursor is then delivered again, as before delivery states were stored).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from managed_ledger.position import MessageId, Position

log = logging.getLogger(__name__)

VERSION = 1
MAX_MESSAGES = 50_000


@dataclass(slots=True)
class EntryAcks:
    """An entry read by a subscription: its batch size and the batch indexes acked so far.
    `compacted`: read through the compacted view, where `count` counts the survivors read."""

    partition: int
    count: int
    acked: set[int] = field(default_factory=set)
    compacted: bool = False


def read_backlog(entries: Iterable[EntryAcks]) -> dict[int, tuple[int, int]]:
    """Per partition: the entries read and not wholly acked, and the messages of them not acked
    (exact, their batch sizes being known; `topics.meters.message_backlog`)."""
    out: dict[int, tuple[int, int]] = {}
    for state in entries:
        if not state.compacted:
            count, messages = out.get(state.partition, (0, 0))
            out[state.partition] = (count + 1, messages + state.count - len(state.acked))
    return out


@dataclass(frozen=True, slots=True)
class StoredEntry:
    position: Position
    size: int
    acked: frozenset[int]
    counts: dict[int, int]  # batch index -> redelivery count of its last delivery


def encode(
    entries: Mapping[Position, EntryAcks],
    counts: Mapping[MessageId, int],
    is_acked: Callable[[Position], bool],
    max_messages: int = MAX_MESSAGES,
) -> dict[str, Any] | None:
    """The stored form of one cursor's state: `entries` and `counts` of its partition only.

    Runs at flush time, over every count: linear, with no object made per message."""
    delivered: dict[tuple[int, int], dict[int, int]] = {}
    for mid, n in counts.items():
        key = mid[:2]  # (ledger, entry): a plain tuple, equal to the Position
        by_index = delivered.get(key)
        if by_index is None:
            by_index = delivered[key] = {}
        by_index[mid[2]] = n
    keys: set[tuple[int, int]] = set(delivered)
    keys.update(p for p, s in entries.items() if s.acked and not s.compacted)
    out: list[list[Any]] = []
    used = omitted = 0
    for key in sorted(keys):
        pos = Position(*key)
        if is_acked(pos):
            continue
        state = entries.get(pos)
        mine = delivered.get(key, {})
        if omitted:  # over the cap already: only count what is left out
            omitted += len(mine) + (len(state.acked) if state is not None and not state.compacted else 0)
            continue
        size, acked = (0, []) if state is None or state.compacted else (state.count, sorted(state.acked))
        if state is not None and state.acked:
            mine = {i: n for i, n in mine.items() if i not in state.acked}
        cost = len(acked) + len(mine)
        if used + cost > max_messages:
            omitted += cost
            continue
        used += cost
        out.append([pos.ledger_id, pos.entry_id, size, acked, _compact(mine, size - len(acked))])
    if not out and not omitted:
        return None
    stored: dict[str, Any] = {"v": VERSION, "entries": out}
    if omitted:
        stored["omitted"] = omitted
    return stored


def _compact(delivered: dict[int, int], unacked: int) -> int | dict[str, int]:
    values = set(delivered.values())
    if len(values) == 1 and len(delivered) == unacked:
        return values.pop()
    return {str(i): n for i, n in sorted(delivered.items())}


def decode(stored: Mapping[str, Any] | None) -> Iterator[StoredEntry]:
    """The entries of a stored state; nothing for None or a value this code cannot read."""
    if stored is None:
        return
    try:
        if stored.get("v") != VERSION:
            raise ValueError(f"unknown version {stored.get('v')!r}")
        decoded = [_entry(record) for record in stored["entries"]]
    except (AttributeError, KeyError, TypeError, ValueError) as exc:
        log.warning("delivery state not restored (%s): %.200r", exc, stored)
        return
    yield from decoded


def _entry(record: Any) -> StoredEntry:
    ledger_id, entry_id, size, acked, delivered = record
    acked_set = frozenset(int(i) for i in acked)
    if isinstance(delivered, Mapping):
        counts = {int(i): int(n) for i, n in delivered.items()}
    elif size > 0:  # one count for every message not acked
        counts = dict.fromkeys((i for i in range(int(size)) if i not in acked_set), int(delivered))
    else:
        raise ValueError("a single count needs the entry's size")
    return StoredEntry(Position(int(ledger_id), int(entry_id)), int(size), acked_set, counts)
