"""A recovery that fails part way leaves nothing a later recovery believes (reliability review
2026-11-28, finding 1): the replacement segments a recovery made stay out of the ledger's row
until the compare-and-set that closes it, as BookKeeper's recovery keeps them in memory. Real
bookie servers over TCP (in process), the real client and ledger manager."""

from __future__ import annotations

import asyncio

import pytest

from bookie.client import BookieClientConfig, BookieLedgerClient
from bookie.errors import BookieError
from bookie.ledger_metadata import LedgerState
from bookie.ledgers import LedgerManager, StaticPlacement, ledger_spec
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
        await b.kill()  # the writer is gone (no close); B is down, and so is the spare C
        await c.kill()
        with pytest.raises(BookieError):
            await manager.recover_and_close(handle.ledger_id)  # would replace B by C: C is down
        stored = store.get_ledger(handle.ledger_id)
        assert stored.state == LedgerState.IN_RECOVERY
        assert stored.history() == ((0, (a.address, b.address)),), "a failed recovery changed the segments"
        await c.start()  # C back, empty
        await b.start()  # B back, holding entry 9
        await a.kill()  # A restarting
        try:
            async with asyncio.timeout(20):
                closed = await manager.recover_and_close(handle.ledger_id)
        except BookieError:
            closed = None  # unavailable while A is away: acceptable, nothing was decided
        if closed is not None:
            assert closed.last_entry_id >= 9, f"closed at {closed.last_entry_id}; entry 9 was acknowledged"
        await a.start()
        async with asyncio.timeout(20):
            closed = await manager.recover_and_close(handle.ledger_id)
        assert closed.state == LedgerState.CLOSED and closed.last_entry_id == 9
    finally:
        await client.close()
        for bookie in (a, b, c):
            await bookie.stop()


async def test_recovery_records_its_replacement_when_it_closes() -> None:
    """The segments a successful recovery made are in the closed row (the one CAS carries them)."""
    a, b, c = [await LocalBookie().start() for _ in range(3)]
    client = BookieLedgerClient(BookieClientConfig(add_timeout_s=0.5))
    store = InMemoryMetadataStore()
    manager = LedgerManager(store, client, placement=StaticPlacement([a.address, b.address, c.address]))
    try:
        handle = await manager.create(2, 2, 2, ensemble=[a.address, b.address])
        for i in range(5):
            await handle.add_entry(b"m%d" % i)
        await b.kill()  # entry 4 now only on A as far as a recovery can read: copied to C
        async with asyncio.timeout(20):
            closed = await manager.recover_and_close(handle.ledger_id)
        assert closed.last_entry_id == 4
        assert c.address in {bk for _, bookies in closed.history() for bk in bookies}
        assert await client.read_entries(ledger_spec(closed), 0, 4) == [b"m%d" % i for i in range(5)]
    finally:
        await client.close()
        for bookie in (a, b, c):
            await bookie.stop()
