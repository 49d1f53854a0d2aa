"""A managed ledger's internal stats, shaped as Pulsar's `internalStats` (the ledger part)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Protocol

from managed_ledger.ranges import LedgerInfo, LedgerList


class _Cursor(Protocol):
    def stats(self) -> dict[str, object]: ...


def internal_stats(
    ledgers: LedgerList, writing: LedgerInfo | None, entries_added: int, cursors: Mapping[str, _Cursor]
) -> dict[str, object]:
    last = ledgers.last_position()
    current = ledgers.last()
    current_id = current.ledger_id if current is not None else -1
    last_text = str(last) if last is not None else f"{current_id}:-1"
    return {
        "entriesAddedCounter": entries_added,
        "numberOfEntries": ledgers.total_entries(),
        "totalSize": ledgers.total_size_bytes(),
        "currentLedgerEntries": writing.entries if writing is not None else 0,
        "currentLedgerSize": writing.size_bytes if writing is not None else 0,
        "lastConfirmedEntry": last_text,
        "state": "LedgerOpened" if writing is not None else "ClosedLedger",
        "ledgers": [
            {
                "ledgerId": info.ledger_id,
                "entries": info.entries,
                "size": info.size_bytes,
                "timestamp": info.timestamp_ms,
            }
            for info in ledgers
        ],
        "cursors": {name: c.stats() for name, c in cursors.items()},
    }
