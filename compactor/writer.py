"""Writing a compacted ledger through the ledger lifecycle (`bookie.ledgers.LedgerManager`).

Write order (a kill -9 at any point leaves nothing unaccounted for): the ledger is created
(metadata first, then its writer), the run records it as `run_ledger_id` in the topic's
compaction state, and only then are entries written; closing waits for every add, then the
metadata becomes CLOSED with the last entry id and length. A run that dies is cleaned up by the
next one through `run_ledger_id`; a crash before `run_ledger_id` is recorded leaves one empty
OPEN ledger that nothing references.
"""

from __future__ import annotations

import asyncio
from collections import deque

from bookie.api import LedgerClient
from bookie.ledger_metadata import LedgerMetadata, LedgerMetadataStore
from bookie.ledgers import EnsemblePlacement, LedgerHandle, LedgerManager
from common.clock import wall_clock_ms

ADDS_IN_FLIGHT = 8


def now_ms() -> int:
    return wall_clock_ms()


class CompactedLedgerWriter:
    """Pipelined adds of compacted entries to one new ledger (a few adds in flight at a time)."""

    def __init__(self, ledgers: LedgerManager, handle: LedgerHandle) -> None:
        self._ledgers = ledgers
        self._handle = handle
        self._in_flight: deque[asyncio.Future[int]] = deque()
        self.entries = 0
        self.messages = 0
        self.size_bytes = 0

    @classmethod
    async def create(
        cls,
        store: LedgerMetadataStore,
        client: LedgerClient,
        placement: EnsemblePlacement,
        quorums: tuple[int, int, int],
    ) -> CompactedLedgerWriter:
        """A writer of a new ledger placed by `placement`; `quorums` is (E, Qw, Qa)."""
        ledgers = LedgerManager(store, client, clock=now_ms, placement=placement)
        return cls(ledgers, await ledgers.create(*quorums))

    @property
    def ledger_id(self) -> int:
        return self._handle.ledger_id

    async def add(self, payload: bytes, count: int) -> None:
        while len(self._in_flight) >= ADDS_IN_FLIGHT:
            await self._in_flight.popleft()
        # ensure_future starts coroutines in creation order, so entry ids follow call order
        self._in_flight.append(asyncio.ensure_future(self._handle.add_entry(payload)))
        self.entries += 1
        self.messages += count
        self.size_bytes += len(payload)

    async def close(self) -> LedgerMetadata:
        """Wait for every add, close the ledger and mark its metadata CLOSED."""
        while self._in_flight:
            await self._in_flight.popleft()
        return await self._ledgers.close(self._handle)

    async def abandon(self) -> None:
        """Let adds in flight settle (failures ignored) so nothing writes after a delete."""
        for fut in self._in_flight:
            fut.cancel()
        await asyncio.gather(*self._in_flight, return_exceptions=True)
        self._in_flight.clear()


async def delete_ledger(store: LedgerMetadataStore, client: LedgerClient, ledger_id: int) -> None:
    """Delete a ledger in the lifecycle's one crash-safe order (idempotent)."""
    await LedgerManager(store, client, clock=now_ms).delete(ledger_id)
