"""A recovery that fails must leave nothing a later recovery believes (review 2026-11-28, finding 1).

Recovery 1 replaces an unreachable bookie and then fails; if its replacement were recorded in
the ledger's row, recovery 2 would ask the replacement (which never held the entry), count its
"not there" and close the ledger short of an entry the writer had acknowledged, while the bookie
that holds it sits outside the last segment. Real bookies over TCP (`local_cluster`).
"""

from __future__ import annotations

import asyncio

import pytest

from bookie.client import BookieClientConfig, BookieLedgerClient
from bookie.errors import BookieError
from bookie.ledger_metadata import LedgerState
from bookie.ledgers import LedgerManager, StaticPlacement
from managed_ledger.metadata.memory import InMemoryMetadataStore
from tests.bookie.local_cluster import LocalBookie


async def test_a_second_recovery_never_closes_below_an_acknowledged_entry() -> None:
    a, b, c = [await LocalBookie().start() for _ in range(3)]
    client = BookieLedgerClient(BookieClientConfig(add_timeout_s=0.5))
    store = InMemoryMetadataStore()
    manager = LedgerManager(store, client, placement=StaticPlacement([a.address, b.address, c.address]))
    try:
        handle = await manager.create(2, 2, 2, ensemble=[a.address, b.address])
        assert [await handle.add_entry(b"m%d" % i) for i in range(10)] == list(range(10))
        await b.kill()  # the writer is gone without a close; B is down, and so is the spare C
        await c.kill()
        with pytest.raises(BookieError):
            await manager.recover_and_close(handle.ledger_id)  # replaces B by C, then fails
        row = store.get_ledger(handle.ledger_id)
        assert row.state == LedgerState.IN_RECOVERY
        assert row.history() == ((0, (a.address, b.address)),), "a failed recovery changed the history"
        await c.start()  # C back, empty
        await b.start()  # B back, holding entry 9
        await a.kill()  # A restarting
        try:
            async with asyncio.timeout(20):
                closed = await manager.recover_and_close(handle.ledger_id)
        except BookieError:
            return  # unavailable until A is back: acceptable, nothing was lost
        assert closed.last_entry_id >= 9, f"ledger closed at {closed.last_entry_id}; entry 9 was acknowledged"
        assert await manager.read(handle.ledger_id, 0, 9) == [b"m%d" % i for i in range(10)]
    finally:
        await client.close()
        for bookie in (a, b, c):
            await bookie.stop()
