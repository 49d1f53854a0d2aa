"""Writing a compacted ledger: metadata first, then entries through the bookies, then close.

Write order (a kill -9 at any point leaves nothing unaccounted for): the ledger's metadata is
created OPEN, the run records it as `run_ledger_id` in the topic's compaction state, and only then
are entries written; closing waits for every add, then the metadata becomes CLOSED with the last
entry id and length. A run that dies is cleaned up by the next one through `run_ledger_id`.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections import deque
from dataclasses import replace

from bookie.api import LedgerClient, LedgerWriter
from bookie.errors import NoSuchLedgerError
from bookie.types import LedgerSpec
from managed_ledger.metadata.api import LedgerMetadata, LedgerState, MetadataStore, NotFoundError

ADDS_IN_FLIGHT = 8


def now_ms() -> int:
    return int(time.time() * 1000)


def spec_of(meta: LedgerMetadata) -> LedgerSpec:
    return LedgerSpec(meta.ledger_id, tuple(meta.ensemble), meta.write_quorum, meta.ack_quorum)


class CompactedLedgerWriter:
    """Pipelined adds of compacted entries to one new ledger (a few adds in flight at a time)."""

    def __init__(self, store: MetadataStore, client: LedgerClient, meta: LedgerMetadata) -> None:
        self._store = store
        self._client = client
        self.meta = meta
        self._writer: LedgerWriter | None = None
        self._in_flight: deque[asyncio.Future[int]] = deque()
        self.entries = 0
        self.messages = 0
        self.size_bytes = 0

    async def open(self) -> None:
        self._writer = await self._client.create_ledger(spec_of(self.meta))

    async def add(self, payload: bytes, count: int) -> None:
        assert self._writer is not None, "open() first"
        while len(self._in_flight) >= ADDS_IN_FLIGHT:
            await self._in_flight.popleft()
        # ensure_future starts coroutines in creation order, so entry ids follow call order
        self._in_flight.append(asyncio.ensure_future(self._writer.add_entry(payload)))
        self.entries += 1
        self.messages += count
        self.size_bytes += len(payload)

    async def close(self) -> LedgerMetadata:
        """Wait for every add, close the ledger and mark its metadata CLOSED."""
        assert self._writer is not None, "open() first"
        while self._in_flight:
            await self._in_flight.popleft()
        last = await self._writer.close()
        closed = replace(
            self.meta,
            state=LedgerState.CLOSED,
            last_entry_id=last,
            length_bytes=self.size_bytes,
            closed_ms=now_ms(),
        )
        self.meta = await asyncio.to_thread(self._store.update_ledger, closed)
        return self.meta

    async def abandon(self) -> None:
        """Let adds in flight settle (failures ignored) so nothing writes after a delete."""
        for fut in self._in_flight:
            fut.cancel()
        await asyncio.gather(*self._in_flight, return_exceptions=True)
        self._in_flight.clear()


async def create_ledger_metadata(
    store: MetadataStore, ensemble: tuple[str, ...], write_quorum: int, ack_quorum: int
) -> LedgerMetadata:
    return await asyncio.to_thread(store.create_ledger, ensemble, write_quorum, ack_quorum, now_ms())


async def delete_ledger(store: MetadataStore, client: LedgerClient, ledger_id: int) -> None:
    """Delete a ledger: metadata first, then its entries on the bookies (both idempotent here)."""
    try:
        meta = await asyncio.to_thread(store.get_ledger, ledger_id)
    except NotFoundError:
        return
    await asyncio.to_thread(store.delete_ledger, ledger_id)
    with contextlib.suppress(NoSuchLedgerError):
        await client.delete_ledger(spec_of(meta))
