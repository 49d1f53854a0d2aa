"""A small in-memory `LedgerStorageApi` so the server's unit tests run without the real engine.

It keeps the storage rules the server relies on (fencing, retries with the same bytes, LAC,
bad input, deletion) and passes the same contract as the engine
(`tests/bookie/test_storage_contract.py`), but nothing is durable; process and fault tests
use `bookie.storage.engine`.
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
from bookie.storage.api import LedgerStorageApi
from bookie.storage.index import MAX_ENTRY_ID
from bookie.storage.records import MAX_PAYLOAD_BYTES


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
        known = self.ledgers.get(ledger_id)
        if known is not None:
            if known.fenced and not recovery:
                raise FencedError(ledger_id)
            old = known.entries.get(entry_id)
            if old is not None:
                if old != payload:
                    raise BookieError(ErrorCode.BAD_REQUEST, f"entry {ledger_id}:{entry_id}: other bytes")
                return  # a retry: stored already, and its LAC is not applied again
        if not _valid(ledger_id, entry_id, last_add_confirmed) or len(payload) > MAX_PAYLOAD_BYTES:
            raise BookieError(ErrorCode.BAD_REQUEST, "bad ledger id, entry id or payload size")
        if self.add_gate is not None:
            await self.add_gate.wait()
        else:
            await asyncio.sleep(0)
        ledger = self.ledgers.setdefault(ledger_id, _Ledger())
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

    def ledger_ids(self) -> list[int]:
        return list(self.ledgers)

    def stats(self) -> dict[str, object]:
        return {
            "ledgers": len(self.ledgers),
            "entries": sum(len(x.entries) for x in self.ledgers.values()),
            "read_only": self.read_only_flag,
            "adds": self.adds,
        }


def _valid(ledger_id: int, entry_id: int, last_add_confirmed: int) -> bool:
    """The id ranges a journal record can hold (u64 ledger, i64 LAC) and the index can address
    (entry ids up to MAX_ENTRY_ID)."""
    return 0 <= ledger_id < 2**64 and 0 <= entry_id <= MAX_ENTRY_ID and -(2**63) <= last_add_confirmed < 2**63


async def is_fenced(storage: LedgerStorageApi, ledger_id: int) -> bool:
    """Whether the ledger is fenced, asked through the public write path without changing it.

    An add with entry id -1 is bad input and changes nothing; the fence is checked before the
    input, so it fails with FencedError on a fenced ledger and BAD_REQUEST on any other."""
    try:
        await storage.add_entry(ledger_id, -1, -1, b"")
    except FencedError:
        return True
    except BookieError as exc:
        assert exc.code == ErrorCode.BAD_REQUEST, exc
        return False
    raise AssertionError("an add with entry id -1 was accepted")
