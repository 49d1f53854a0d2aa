"""The producer dedup state's life outside memory (`managed_ledger.dedup` has its rule): its
snapshot in the metadata store, taken as of the last confirmed entry, and its rebuild on open
from the snapshot and the entries after it."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable

from managed_ledger import dedup
from managed_ledger.clock import Clock
from managed_ledger.dedup import Deduplication
from managed_ledger.fencing import Fence
from managed_ledger.metadata.api import DedupSnapshot, MetadataStore
from managed_ledger.position import Position
from managed_ledger.ranges import LedgerList

REPLAY_CHUNK = 1_000  # entries per read when dedup replays the entries after its snapshot
ReadEntries = Callable[[Position, int], Awaitable[list[tuple[Position, bytes]]]]


class DedupSnapshots:
    def __init__(
        self,
        name: str,
        state: Deduplication,
        *,
        store: MetadataStore,
        fence: Fence,
        clock: Clock,
        ledgers: LedgerList,
        read_entries: ReadEntries,
        last_confirmed: Callable[[], Position | None],
    ) -> None:
        self._name = name
        self._state = state
        self._store = store
        self._fence = fence
        self._clock = clock
        self._ledgers = ledgers
        self._read_entries = read_entries
        self._last_confirmed = last_confirmed
        self._lock = asyncio.Lock()

    async def take(self) -> None:
        """Store producer -> highest persisted sequence id as of the last confirmed entry."""
        state = self._state
        async with self._lock:
            last = self._last_confirmed()
            if last is None or state.entries_since_snapshot == 0:
                return
            counted = state.entries_since_snapshot
            position, persisted = (last.ledger_id, last.entry_id), dict(state.persisted)
            snapshot = DedupSnapshot(self._name, position, persisted, version=state.snapshot_version)
            stored = await self._fence.call(self._store.put_dedup_snapshot, snapshot)
            state.snapshot_version = stored.version
            state.entries_since_snapshot = max(0, state.entries_since_snapshot - counted)
            state.last_snapshot_ms = self._clock.now_ms()

    async def rebuild(self) -> None:
        await self.replay(await self._fence.call(self._store.get_dedup_snapshot, self._name))

    async def replay(self, snapshot: DedupSnapshot | None) -> None:
        """The stored snapshot, then the entries after it."""
        start = Position(-1, -1)
        if snapshot is not None:
            start = self._ledgers.next_position(Position(*snapshot.position))
        await dedup.rebuild(self._state, snapshot, self._payloads_from(start))

    async def _payloads_from(self, start: Position) -> AsyncIterator[bytes]:
        while entries := await self._read_entries(start, REPLAY_CHUNK):
            for _, payload in entries:
                yield payload
            start = self._ledgers.next_position(entries[-1][0])
