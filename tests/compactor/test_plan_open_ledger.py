"""The plan of a run over an OPEN ledger stops at what was confirmed (reliability review
2026-11-28, finding 3): an entry past the LAC may be on one bookie only, never acknowledged, and
dropped by the ledger's recovery; a view that compacted it would keep a message (or tombstone)
the topic never had, under a horizon past the ledger's end.

Real bookie servers over TCP (`tests/bookie/local_cluster.py`), the real client and the plan."""

from __future__ import annotations

from dataclasses import replace

import pytest

from bookie.client import BookieClientConfig, BookieLedgerClient
from bookie.errors import BookieError
from bookie.ledgers import ledger_spec
from compactor.plan import build_plan
from managed_ledger.entry_format import Message, encode_batch
from managed_ledger.metadata.api import CompactionState
from managed_ledger.metadata.memory import InMemoryMetadataStore
from tests.bookie.local_cluster import LocalBookie


def batch(key: str, value: bytes) -> bytes:
    return encode_batch(1, "p", [Message(value, key)])


async def test_the_plan_of_an_open_ledger_survives_its_recovery() -> None:
    x, y, z = [await LocalBookie().start() for _ in range(3)]
    client = BookieLedgerClient(BookieClientConfig(add_timeout_s=0.5))
    store = InMemoryMetadataStore()
    try:
        meta = store.create_ledger((x.address, y.address, z.address), 3, 2, 0)
        ml = store.create_managed_ledger("t")
        store.update_managed_ledger(replace(ml, ledger_ids=(meta.ledger_id,)))
        spec = ledger_spec(meta)
        writer = await client.create_ledger(spec)
        for i in range(5):
            assert await writer.add_entry(batch(f"k{i}", b"v")) == i
        await y.kill()
        await z.kill()
        with pytest.raises(BookieError):
            await writer.add_entry(batch("k0", b""))  # on X only, never acknowledged
        await y.start()
        await z.start()

        plan = await build_plan(store, client, "t", CompactionState("t"))

        assert plan.new_horizon is not None
        await x.kill()
        recovered_last = await client.recover(spec)  # X away: Y and Z prove entry 5 missing
        assert recovered_last == 4
        assert plan.new_horizon.entry_id <= recovered_last, "the plan read an entry recovery dropped"
        # Entry 5's add carried LAC 4 to X: everything acknowledged is in, and nothing more.
        assert plan.new_horizon.entry_id == 4
        assert [r.last_entry_id for r in plan.ranges] == [4]
    finally:
        await client.close()
        for b in (x, y, z):
            await b.stop()
