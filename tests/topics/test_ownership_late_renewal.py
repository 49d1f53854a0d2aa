"""A broker whose lease renewal reaches the store late, after its lease ended and another broker
took one of its topics, loses everything it held: it never serves beside the new owner
(reliability review 2026-11-28, finding 5). Two `Ownership`s over one in-memory store, whose
renewals of broker A are held in the store while B looks the topic up; real, short leases."""

from __future__ import annotations

import asyncio
import threading
import time

from managed_ledger.metadata.memory import InMemoryMetadataStore
from topics.ownership import Ownership, OwnershipConfig

TOPIC = "public/default/t"
LEASE_MS = 1_000


class SlowRenewals(InMemoryMetadataStore):
    """Holds broker a:1's renewal inside the store (as a stalled database would) until released."""

    def __init__(self) -> None:
        super().__init__()
        self.hold, self.entered = threading.Event(), threading.Event()
        self.hold.set()

    def renew_broker(self, broker_id: str, session: str, expires_ms: int) -> bool:
        if broker_id == "a:1":
            self.entered.set()
            self.hold.wait(10)
        return super().renew_broker(broker_id, session, expires_ms)


async def test_two_brokers_never_both_hold_a_topic_after_a_late_renewal() -> None:
    store = SlowRenewals()
    a = Ownership(store, OwnershipConfig("a:1", "http://a:1", lease_ms=LEASE_MS, heartbeat_interval_ms=300))
    b = Ownership(store, OwnershipConfig("b:1", "http://b:1", lease_ms=LEASE_MS, heartbeat_interval_ms=300))
    await a.start()
    assert a._task is not None
    a._task.cancel()  # A's heartbeats are driven by hand
    registered = time.time()
    try:
        assert await a.owner(TOPIC) is None  # A owns the topic
        await b.start()
        # A renews 100 ms before its own margin; the store applies it after A's lease ended.
        await asyncio.sleep((LEASE_MS - a.config.margin_ms - 100) / 1000)
        store.hold.clear()
        renewal = asyncio.create_task(a.heartbeat())
        await asyncio.to_thread(store.entered.wait, 5)
        await asyncio.sleep(max(0.0, registered + LEASE_MS / 1000 + 0.05 - time.time()))
        assert await b.owner(TOPIC) is None  # B takes it: A's stored lease ended
        store.hold.set()
        await asyncio.wait_for(renewal, 10)
        assert not (a.holds(TOPIC) and b.holds(TOPIC)), "both brokers serve the topic"
        assert b.holds(TOPIC) and not a.holds(TOPIC)
    finally:
        store.hold.set()
        await a.close()
        await b.close()
