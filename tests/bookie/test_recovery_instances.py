"""A "not there" from a bookie that cannot know is no evidence (review 2026-11-28, finding 2).

A bookie wiped and formatted since it entered a ledger's segment is another instance: its "no
such ledger" says nothing about what the old instance held. Counted as evidence, it closed an
open ledger empty while the real holder was restarting, the managed ledger dropped the ledger,
and the holder's copies were deleted once it came back. Real bookies over TCP (`local_cluster`).
"""

from __future__ import annotations

import asyncio

from bookie.client import BookieClientConfig, BookieLedgerClient
from bookie.ledger_metadata import LedgerState
from managed_ledger.api import ManagedLedgerConfig, RetentionPolicy
from managed_ledger.errors import ManagedLedgerError
from managed_ledger.factory import ManagedLedgerFactory
from managed_ledger.metadata.memory import InMemoryMetadataStore
from managed_ledger.position import Position
from tests.bookie.local_cluster import LocalBookie

CONFIG = ManagedLedgerConfig(retention=RetentionPolicy(-1, -1), ensemble_size=2, write_quorum=2, ack_quorum=2)


async def test_a_wipe_and_a_restart_never_lose_acknowledged_entries() -> None:
    a, b = [await LocalBookie().start() for _ in range(2)]
    store = InMemoryMetadataStore()
    client1 = BookieLedgerClient(BookieClientConfig(add_timeout_s=0.5))
    ml = await ManagedLedgerFactory(client1, store, [a.address, b.address], timers=False).open("t", CONFIG)
    for i in range(10):
        await ml.append(b"m%d" % i)
    ledger_id = ml.ledger_list.last().ledger_id
    recorded = store.get_ledger(ledger_id).segment_instances(0)
    assert recorded == {a.address: a.instance_id, b.address: b.instance_id}
    await b.kill()  # the broker is gone; B is wiped and formatted as a new instance
    b.storage = None
    await b.start()
    await a.kill()  # A restarting
    client2 = BookieLedgerClient(BookieClientConfig(add_timeout_s=0.5))
    factory2 = ManagedLedgerFactory(client2, store, [a.address, b.address], timers=False)
    try:
        try:
            async with asyncio.timeout(20):
                await factory2.open("t", CONFIG)
        except (ManagedLedgerError, TimeoutError):
            pass  # unavailable while A is away: acceptable
        meta = store.get_ledger(ledger_id)
        assert meta.state != LedgerState.CLOSED or meta.last_entry_id >= 9, "closed short by a new instance"
        await a.start()
        async with asyncio.timeout(20):
            reopened = await factory2.open("t", CONFIG)
        entries = await reopened.read_entries(Position(-1, -1), 100)
        assert [p for _, p in entries] == [b"m%d" % i for i in range(10)]
    finally:
        await factory2.close()
        await client2.close()
        await client1.close()
        for bookie in (a, b):
            await bookie.stop()
