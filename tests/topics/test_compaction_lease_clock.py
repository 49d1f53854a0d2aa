"""Compaction run leases as a broker sees them, on the store's clock rather than its own
(reliability review 2026-11-28, finding 11): a broker whose clock runs an hour ahead must not
record a compactor's live run as ERROR."""

from __future__ import annotations

from bookie.memory import InMemoryLedgerClient
from managed_ledger.clock import ManualClock
from managed_ledger.factory import ManagedLedgerFactory
from managed_ledger.metadata.memory import InMemoryMetadataStore
from topics import compaction_lease
from topics.config import TopicsConfig
from topics.service import TopicService

T = "public/default/skewed"
HOUR_MS = 3_600_000


async def test_a_broker_whose_clock_runs_ahead_does_not_end_a_live_run() -> None:
    store, client = InMemoryMetadataStore(), InMemoryLedgerClient()
    store_clock = ManualClock()
    broker_clock = ManualClock(store_clock.now_ms() + HOUR_MS)
    factory = ManagedLedgerFactory(client, store, ["b1:3181"], clock=broker_clock, timers=False)
    svc = TopicService(store, factory, client, TopicsConfig(), clock=broker_clock, lease_clock=store_clock)
    try:
        await svc.create_topic(T)
        await svc.trigger_compaction(T)
        state = store.get_compaction(T)
        lease_ms = TopicsConfig().compaction_lease_ms
        assert state.lease_expires_ms == store_clock.now_ms() + lease_ms  # stamped on the store's clock
        store.put_compaction(compaction_lease.taken(state, "c-1", store_clock.now_ms(), lease_ms))
        assert (await svc.compaction_status(T))["status"] == "RUNNING"
        assert await svc.check_compaction_thresholds() == []  # the periodic check leaves it running too
        assert store.get_compaction(T).lease_holder == "c-1"
    finally:
        await svc.close()
        await factory.close()
