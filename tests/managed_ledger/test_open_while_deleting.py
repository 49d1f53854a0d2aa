"""An open never waits for, nor fails with, a ledger deletion (reliability review 2026-11-28,
finding 4): a bookie of a ledger being deleted that is down, perhaps for good, or a metadata
store that refuses the deletion, must not make the topic unopenable.

Real bookie servers over TCP (`tests/bookie/local_cluster.py`), the real client, ledger manager
and managed ledger."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest

from bookie.client import BookieClientConfig, BookieLedgerClient
from bookie.ledger_gc import LedgerGarbageCollector
from managed_ledger.api import ManagedLedgerConfig, RetentionPolicy, RolloverPolicy
from managed_ledger.errors import ManagedLedgerError
from managed_ledger.factory import ManagedLedgerFactory
from managed_ledger.metadata.api import MetadataUnavailableError, NotFoundError
from managed_ledger.metadata.memory import InMemoryMetadataStore
from managed_ledger.record import deleting_ids
from tests.bookie.local_cluster import LocalBookie

CONFIG = ManagedLedgerConfig(
    rollover=RolloverPolicy(min_rollover_time_ms=0),
    retention=RetentionPolicy(0, 0),
    ensemble_size=2,
    write_quorum=2,
    ack_quorum=2,
)


class RefusingStore(InMemoryMetadataStore):
    """A metadata store that refuses ledger-row deletions while `refuse` is set."""

    refuse = False

    def delete_ledger(self, ledger_id: int) -> None:
        if self.refuse:
            raise MetadataUnavailableError("database down")
        super().delete_ledger(ledger_id)


@pytest.fixture
async def bookies() -> AsyncIterator[list[LocalBookie]]:
    started = [await LocalBookie().start() for _ in range(3)]
    try:
        yield started
    finally:
        for b in started:
            await b.stop()


async def _two_ledgers(factory: ManagedLedgerFactory) -> tuple[int, int]:
    """A managed ledger "t" holding a consumed first ledger and a current one."""
    ml = await factory.open("t", CONFIG)
    await ml.append(b"old")
    first = ml.ledger_list.last().ledger_id  # type: ignore[union-attr]
    await ml.rollover()
    await ml.append(b"new")
    return first, ml.ledger_list.last().ledger_id  # type: ignore[union-attr]


async def test_a_down_bookie_of_a_deleted_ledger_does_not_stop_the_topic_from_opening(
    bookies: list[LocalBookie],
) -> None:
    store = InMemoryMetadataStore()
    addresses = [b.address for b in bookies]
    client1 = BookieLedgerClient(BookieClientConfig(add_timeout_s=0.5))
    factory1 = ManagedLedgerFactory(client1, store, addresses, timers=False)
    client2 = BookieLedgerClient(BookieClientConfig(add_timeout_s=0.5))
    factory2 = ManagedLedgerFactory(client2, store, addresses, timers=False)
    try:
        first, last = await _two_ledgers(factory1)
        ml = await factory1.open("t", CONFIG)
        old, current = store.get_ledger(first).ensemble, store.get_ledger(last).ensemble
        gone = next(b for b in bookies if b.address in old and b.address not in current)
        await gone.kill()
        await ml.trim()  # today: ManagedLedgerDeleteError, `first` left in `deleting`
        with pytest.raises(NotFoundError):
            store.get_ledger(first)
        assert deleting_ids(store.get_managed_ledger("t").properties) == []  # type: ignore[union-attr]
        async with asyncio.timeout(20):
            reopened = await factory2.open("t", CONFIG)
        assert [p for _, p in await reopened.read_entries(reopened.first_position, 10)] == [b"new"]  # type: ignore[arg-type]

        await gone.start()  # back, still holding `first`: its garbage collector deletes it
        assert first in gone.storage.ledger_ids()  # type: ignore[union-attr]
        collector = LedgerGarbageCollector(gone.storage, store, interval_s=0)  # type: ignore[arg-type]
        assert await collector.collect() == [first]
    finally:
        await factory2.close()
        await factory1.close()
        await client2.close()
        await client1.close()


async def test_an_open_does_not_wait_for_or_fail_with_a_pending_deletion(bookies: list[LocalBookie]) -> None:
    store = RefusingStore()
    addresses = [b.address for b in bookies]
    client1 = BookieLedgerClient(BookieClientConfig(add_timeout_s=0.5))
    factory1 = ManagedLedgerFactory(client1, store, addresses, timers=False)
    client2 = BookieLedgerClient(BookieClientConfig(add_timeout_s=0.5))
    factory2 = ManagedLedgerFactory(client2, store, addresses, timers=False)
    try:
        first, _ = await _two_ledgers(factory1)
        ml = await factory1.open("t", CONFIG)
        store.refuse = True
        with pytest.raises(ManagedLedgerError):
            await ml.trim()  # the list lost `first`; its deletion is pending in `deleting`
        assert deleting_ids(store.get_managed_ledger("t").properties) == [first]  # type: ignore[union-attr]

        async with asyncio.timeout(20):
            reopened = await factory2.open("t", CONFIG)  # today: ManagedLedgerMetadataError
        assert [p for _, p in await reopened.read_entries(reopened.first_position, 10)] == [b"new"]  # type: ignore[arg-type]

        store.refuse = False
        await reopened.tick()  # the timer's pass tries the pending deletion again
        async with asyncio.timeout(20):
            while deleting_ids(store.get_managed_ledger("t").properties):  # type: ignore[union-attr]
                await asyncio.sleep(0.01)
        with pytest.raises(NotFoundError):
            store.get_ledger(first)
    finally:
        await factory2.close()
        await factory1.close()
        await client2.close()
        await client1.close()
