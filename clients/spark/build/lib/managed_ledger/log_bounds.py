"""A managed ledger's two bounds, kept in its record's properties (no column of their own):

- `terminated`: set once by terminate (Pulsar's ManagedLedgerInfo.terminatedPosition): the id
  `L:E:B` of the last message, or "" when the managed ledger held no entry. Present = no append
  is ever taken again, across restarts and owners.
- `log_start`: Kafka's log start offset, moved by truncate-before (DeleteRecords): `L:E:B`,
  the first message id still readable. It only moves forward (Kafka's low watermark).

Both live in the same JSON `properties` as `deleting`, so they change by the same
compare-and-set as the ledger list and come back on every open (docs/storage-format.md).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from managed_ledger.entry_format import EntryFormatError, decode_batch_header, entry_offsets
from managed_ledger.position import MessageId, Position
from managed_ledger.ranges import LedgerInfo

TERMINATED = "terminated"
LOG_START = "log_start"


def is_terminated(properties: Mapping[str, str]) -> bool:
    return TERMINATED in properties


def terminated_at(properties: Mapping[str, str]) -> MessageId | None:
    """The last message id stored at terminate (None: not terminated, or terminated empty)."""
    text = properties.get(TERMINATED, "")
    return MessageId.parse(text) if text else None


def log_start(properties: Mapping[str, str]) -> MessageId | None:
    text = properties.get(LOG_START, "")
    return MessageId.parse(text) if text else None


def hidden_through(start: MessageId | None) -> Position | None:
    """The last entry position wholly before the log start (None: nothing is hidden)."""
    if start is None:
        return None
    return Position(start.ledger_id, start.entry_id - 1)


def ledgers_before(ledgers: Sequence[LedgerInfo], start: MessageId) -> list[int]:
    """Closed ledgers whose every entry is before `start`, oldest first; never the last ledger
    of the list (it may be the one being written; retention keeps it too)."""
    out: list[int] = []
    for info in ledgers[:-1]:
        if info.timestamp_ms == 0 or info.last_position >= start.position:
            break
        out.append(info.ledger_id)
    return out


def last_batch_index(payload: bytes) -> int:
    """The index of an entry's last message (the `B` of the id terminate stores for it)."""
    header = entry_offsets(payload)
    if header is not None:
        return max(0, header[1] - 1)
    try:
        return max(0, len(decode_batch_header(payload)[2]) - 1)
    except EntryFormatError:
        return 0  # not a topic batch: its one message
