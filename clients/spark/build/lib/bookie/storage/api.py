"""The seam between the bookie server (wire protocol) and its storage engine.

`bookie.storage.engine.LedgerStorage` implements it with a journal, entry files and an index;
`tests/bookie/test_storage_contract.py` runs the same cases against it and the tests' fake.
Rules every implementation keeps:
- `add_entry` returns only after an fdatasync covers the record (group commit: one fsync for
  every add waiting at that moment). A failed fsync or disk I/O error stops the process
  (`os._exit`) instead of acknowledging data that may not be on disk.
- A full disk is not an I/O error: adds are refused with ReadOnlyError and the bookie stays up,
  serving reads, fences and deletes, until there is room again.
- Adds to a fenced ledger raise FencedError unless `recovery` is set (the recovery writer).
- Adds while the disk is past its high-water mark raise ReadOnlyError; reads are still served.
- Re-adding an existing (ledger, entry) with the same bytes succeeds at once and changes
  nothing (a retry; the LAC it carries is not applied); with other bytes it raises
  BookieError(BAD_REQUEST).
- A negative ledger or entry id, or a payload over the record limit, raises
  BookieError(BAD_REQUEST) and changes nothing (checked after the read-only and fence checks).
- Reads never return a corrupt entry: a CRC mismatch raises BookieError(CORRUPT).
"""

from __future__ import annotations

from typing import Protocol


class LedgerStorageApi(Protocol):
    @property
    def read_only(self) -> bool: ...

    async def start(self) -> None:
        """Open files, replay the journal, rebuild the index if it is missing or damaged."""
        ...

    async def close(self) -> None:
        """Flush and close; no acknowledged add may be lost whether or not this runs."""
        ...

    async def add_entry(
        self,
        ledger_id: int,
        entry_id: int,
        last_add_confirmed: int,
        payload: bytes,
        *,
        recovery: bool = False,
    ) -> None: ...

    def read_entry(self, ledger_id: int, entry_id: int) -> bytes:
        """Raises NoSuchLedgerError / NoSuchEntryError / BookieError(CORRUPT)."""
        ...

    def read_last_add_confirmed(self, ledger_id: int) -> int:
        """The highest LAC any add of this ledger carried (durable); NoSuchLedgerError if unknown."""
        ...

    def last_entry_id(self, ledger_id: int) -> int:
        """The highest entry id stored for the ledger (-1 if none); NoSuchLedgerError if unknown."""
        ...

    async def fence(self, ledger_id: int) -> int:
        """Durably fence the ledger (creating it empty if unknown); returns its LAC."""
        ...

    async def delete_ledger(self, ledger_id: int) -> None:
        """Durably forget the ledger (idempotent); the garbage collector reclaims its space."""
        ...

    def ledger_ids(self) -> list[int]:
        """Every ledger the storage holds now (fenced-only ones too; not one whose first add is
        still in flight). The ledger garbage collector compares it with the metadata."""
        ...

    def stats(self) -> dict[str, object]:
        """Counters for health/stats: ledgers, entries, bytes, journal files, read_only, ..."""
        ...
