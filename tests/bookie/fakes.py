"""A small in-memory `LedgerStorageApi` so the server's unit tests run without the real engine.

It keeps the storage rules the server relies on (fencing, retries with the same bytes, LAC,
deletion) but nothing is durable; process and fault tests use `bookie.storage.engine`.
"""

from __future__ import annotations

import asyncio

from bookie.errors import (
    BookieError,
    ErrorCode,
    FencedError,
    NoSuchEntryError,
    NoSuchLedgerError,
    ReadOnlyError,
)


class _Ledger:
    __slots__ = ("entries", "fenced", "lac")

    def __init__(self) -> None:
        self.entries: dict[int, bytes] = {}
        self.fenced = False
        self.lac = -1


class MemoryStorage:
    def __init__(self) -> None:
        self.ledgers: dict[int, _Ledger] = {}
        self.read_only_flag = False
        self.add_gate: asyncio.Event | None = None  # set by tests to hold adds in flight
        self.adds = 0

    @property
    def read_only(self) -> bool:
        return self.read_only_flag

    async def start(self) -> None:
        return None

    async def close(self) -> None:
        return None

    async def add_entry(
        self,
        ledger_id: int,
        entry_id: int,
        last_add_confirmed: int,
        payload: bytes,
        *,
        recovery: bool = False,
    ) -> None:
        if self.read_only_flag:
            raise ReadOnlyError()
        ledger = self.ledgers.setdefault(ledger_id, _Ledger())
        if ledger.fenced and not recovery:
            raise FencedError(ledger_id)
        old = ledger.entries.get(entry_id)
        if old is not None and old != payload:
            raise BookieError(ErrorCode.BAD_REQUEST, f"entry {ledger_id}:{entry_id} exists with other bytes")
        if self.add_gate is not None:
            await self.add_gate.wait()
        else:
            await asyncio.sleep(0)
        ledger.entries[entry_id] = bytes(payload)
        ledger.lac = max(ledger.lac, last_add_confirmed)
        self.adds += 1

    def _get(self, ledger_id: int) -> _Ledger:
        ledger = self.ledgers.get(ledger_id)
        if ledger is None:
            raise NoSuchLedgerError(ledger_id)
        return ledger

    def read_entry(self, ledger_id: int, entry_id: int) -> bytes:
        try:
            return self._get(ledger_id).entries[entry_id]
        except KeyError:
            raise NoSuchEntryError(ledger_id, entry_id) from None

    def read_last_add_confirmed(self, ledger_id: int) -> int:
        return self._get(ledger_id).lac

    def last_entry_id(self, ledger_id: int) -> int:
        return max(self._get(ledger_id).entries, default=-1)

    async def fence(self, ledger_id: int) -> int:
        ledger = self.ledgers.setdefault(ledger_id, _Ledger())
        ledger.fenced = True
        return ledger.lac

    async def delete_ledger(self, ledger_id: int) -> None:
        self.ledgers.pop(ledger_id, None)

    def stats(self) -> dict[str, object]:
        return {
            "ledgers": len(self.ledgers),
            "entries": sum(len(x.entries) for x in self.ledgers.values()),
            "read_only": self.read_only_flag,
        }
