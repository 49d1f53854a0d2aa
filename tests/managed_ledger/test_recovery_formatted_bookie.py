"""A bookie wiped and formatted as a new instance cannot know what it held: its "no such ledger"
is never evidence in recovery (reliability review 2026-11-28, finding 2). One wipe of a Qw=2
copy plus an ordinary restart of the other must lose nothing. Real bookie servers over TCP (in
process), the real client, ledger manager and managed ledger; the format is what `quire bookie
--format` does to the store: a new cookie, made now."""

from __future__ import annotations

import asyncio
import time

from bookie.client import BookieClientConfig, BookieLedgerClient
from bookie.registry import BookieCookie
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
    for bookie in (a, b):
        store.put_bookie_cookie(BookieCookie(bookie.address, "first-" + bookie.address, "/d", 1))
    client1 = BookieLedgerClient(BookieClientConfig(add_timeout_s=0.5))
    ml = await ManagedLedgerFactory(client1, store, [a.address, b.address], timers=False).open("t", CONFIG)
    for i in range(10):
        await ml.append(b"m%d" % i)
    # The broker is killed (no close); B's disk is replaced: wiped, then formatted as new.
    await b.kill()
    b.storage = None
    old = store.get_bookie_cookie(b.address)
    assert old is not None
    store.put_bookie_cookie(BookieCookie(b.address, "second", "/d", time.time_ns() // 1_000_000, old.version))
    await b.start()
    await a.kill()  # and A restarts, at the same moment
    client2 = BookieLedgerClient(BookieClientConfig(add_timeout_s=0.5))
    factory2 = ManagedLedgerFactory(client2, store, [a.address, b.address], timers=False)
    try:
        try:
            async with asyncio.timeout(20):
                await factory2.open("t", CONFIG)  # recovery cannot decide without A: it must not guess
        except (ManagedLedgerError, TimeoutError):
            pass
        await a.start()
        async with asyncio.timeout(20):
            reopened = await factory2.open("t", CONFIG)
        entries = await reopened.read_entries(Position(-1, -1), 100)
        assert [p for _, p in entries] == [b"m%d" % i for i in range(10)], "acknowledged entries lost"
    finally:
        await factory2.close()
        await client2.close()
        await client1.close()
        for bookie in (a, b):
            await bookie.stop()
