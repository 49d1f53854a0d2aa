"""An in-memory `LedgerClient` for fast unit tests of the layers above the bookie.

It keeps the same rules as the real client (dense ids, fencing, recovery, deletion), so the
contract tests in tests/bookie/test_client_contract.py run against both.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence

from bookie.api import EnsembleChanger
from bookie.errors import BookieError, ErrorCode, FencedError, NoSuchEntryError, NoSuchLedgerError
from bookie.types import LedgerSpec


class _Ledger:
    __slots__ = ("entries", "fenced", "lac")

    def __init__(self) -> None:
        self.entries: list[bytes] = []
        self.fenced = False
        self.lac = -1


class _Writer:
    def __init__(self, client: InMemoryLedgerClient, spec: LedgerSpec, ledger: _Ledger) -> None:
        self._client = client
        self._spec = spec
        self._ledger = ledger
        self._closed = False
        self._failed: BookieError | None = None

    @property
    def spec(self) -> LedgerSpec:
        return self._spec

    @property
    def last_add_confirmed(self) -> int:
        return self._ledger.lac

    @property
    def failure(self) -> BookieError | None:
        return self._failed

    async def add_entry(self, payload: bytes) -> int:
        if self._closed:
            raise BookieError(ErrorCode.BAD_REQUEST, "writer is closed")
        if self._failed is not None:
            raise self._failed
        if self._ledger.fenced:
            self._failed = FencedError(self._spec.ledger_id)
            raise self._failed
        if self._client.fail_adds is not None:
            self._failed = self._client.fail_adds
            raise self._failed
        self._ledger.entries.append(bytes(payload))
        entry_id = len(self._ledger.entries) - 1
        self._ledger.lac = entry_id
        await asyncio.sleep(0)
        return entry_id

    async def close(self) -> int:
        self._closed = True
        return self._ledger.lac


class InMemoryLedgerClient:
    def __init__(self) -> None:
        self.ledgers: dict[int, _Ledger] = {}
        self.fail_adds: BookieError | None = None  # set by tests to make adds fail

    def _get(self, spec: LedgerSpec) -> _Ledger:
        ledger = self.ledgers.get(spec.ledger_id)
        if ledger is None:
            raise NoSuchLedgerError(spec.ledger_id)
        return ledger

    async def create_ledger(
        self, spec: LedgerSpec, on_ensemble_change: EnsembleChanger | None = None
    ) -> _Writer:
        # There are no bookies here to fail, so there is never an ensemble change.
        if spec.ledger_id in self.ledgers:
            raise BookieError(ErrorCode.BAD_REQUEST, f"ledger {spec.ledger_id} exists")
        ledger = self.ledgers[spec.ledger_id] = _Ledger()
        return _Writer(self, spec, ledger)

    async def read_entries(self, spec: LedgerSpec, first_entry_id: int, last_entry_id: int) -> list[bytes]:
        ledger = self._get(spec)
        if first_entry_id < 0 or last_entry_id >= len(ledger.entries) or first_entry_id > last_entry_id:
            raise NoSuchEntryError(spec.ledger_id, max(first_entry_id, len(ledger.entries)))
        return ledger.entries[first_entry_id : last_entry_id + 1]

    async def read_last_add_confirmed(self, spec: LedgerSpec) -> int:
        return self._get(spec).lac

    async def recover(
        self,
        spec: LedgerSpec,
        fresh: frozenset[str] = frozenset(),
        instances: Mapping[str, str] | None = None,
    ) -> int:
        ledger = self.ledgers.get(spec.ledger_id)
        if ledger is None:
            # BookKeeper treats a ledger no bookie has seen as empty.
            ledger = self.ledgers[spec.ledger_id] = _Ledger()
        ledger.fenced = True
        return len(ledger.entries) - 1

    async def delete_ledger(self, spec: LedgerSpec) -> None:
        self.ledgers.pop(spec.ledger_id, None)

    async def bookie_instance(self, address: str) -> str | None:
        return None  # no bookies here

    async def healthy(self, bookies: Sequence[str] | None = None) -> bool:
        return True

    async def close(self) -> None:
        return None
