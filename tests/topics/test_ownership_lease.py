"""Broker leases judged by one clock, the metadata store's (reliability review 2026-11-28,
findings 5 and 11): a renewal that reaches the store after the lease ended is refused, so two
brokers never both hold a topic; a slow renewal makes the broker re-read what it owns; and the
lease is registered and renewed on the store seam's heartbeat lane, a thread of its own."""

from __future__ import annotations

import asyncio
import threading
import time

from bookie.metadata_calls import HEARTBEAT, metadata_calls
from managed_ledger.metadata.api import BrokerRecord, TopicOwner
from managed_ledger.metadata.memory import InMemoryMetadataStore
from topics.ownership import Ownership, OwnershipConfig

TOPIC = "public/default/t"


class SlowRenewals(InMemoryMetadataStore):
    """Holds broker a:1's renewals while `hold` is clear (a store write delayed in flight)."""

    def __init__(self) -> None:
        super().__init__()
        self.hold, self.entered = threading.Event(), threading.Event()
        self.hold.set()

    def renew_broker(self, broker_id: str, session: str, lease_ms: int) -> bool:
        if broker_id == "a:1":
            self.entered.set()
            self.hold.wait(10)
        return super().renew_broker(broker_id, session, lease_ms)


def _ownership(store: InMemoryMetadataStore, broker_id: str, lease_ms: int) -> Ownership:
    config = OwnershipConfig(broker_id, f"http://{broker_id}", lease_ms=lease_ms, heartbeat_interval_ms=300)
    return Ownership(store, config)


async def test_two_brokers_never_both_hold_a_topic_after_a_late_renewal() -> None:
    store, lease = SlowRenewals(), 1_000
    a, b = _ownership(store, "a:1", lease), _ownership(store, "b:1", lease)
    await a.start()
    assert a._task is not None
    a._task.cancel()  # A's heartbeats driven by hand
    registered = time.time()
    assert await a.owner(TOPIC) is None
    await b.start()
    try:
        await asyncio.sleep((lease - a.config.margin_ms - 100) / 1000)
        store.hold.clear()
        renewal = asyncio.create_task(a.heartbeat())  # sent while A's lease still runs
        assert await asyncio.to_thread(store.entered.wait, 5)
        await asyncio.sleep(max(0.0, registered + lease / 1000 + 0.05 - time.time()))
        assert await b.owner(TOPIC) is None  # B takes it: A's stored lease ended
        store.hold.set()
        await asyncio.wait_for(renewal, 10)  # ...and A's renewal lands after that
        assert not (a.holds(TOPIC) and b.holds(TOPIC)), "both brokers serve the topic"
        assert b.holds(TOPIC)
    finally:
        store.hold.set()
        await a.close()
        await b.close()


async def test_a_slow_renewal_rechecks_the_topics_held() -> None:
    store, lease = SlowRenewals(), 2_000
    a = _ownership(store, "a:1", lease)
    await a.start()
    assert a._task is not None
    a._task.cancel()
    try:
        assert await a.owner(TOPIC) is None
        assert await a.owner(TOPIC + "2") is None
        # Another writer took one topic over behind A's back (an operator, a bug): only a
        # re-read can tell, and a renewal slower than the margin triggers one.
        store.register_broker(BrokerRecord("b:1", "s-b", "http://b:1", expires_ms=2**62))
        store.release_topic(TOPIC, "a:1", a.session)
        store.claim_topic(TopicOwner(TOPIC, "b:1", "s-b"))
        store.hold.clear()
        renewal = asyncio.create_task(a.heartbeat())
        assert await asyncio.to_thread(store.entered.wait, 5)
        await asyncio.sleep((a.config.margin_ms + 100) / 1000)
        store.hold.set()
        await asyncio.wait_for(renewal, 10)
        assert a.valid()
        assert not a.holds(TOPIC) and a.holds(TOPIC + "2")
        assert a.dropped_after_recheck == 1
    finally:
        store.hold.set()
        await a.close()


class _Threads(InMemoryMetadataStore):
    """Records the thread each broker registration and renewal ran on."""

    def __init__(self) -> None:
        super().__init__()
        self.threads: list[str] = []

    def register_broker(self, broker: BrokerRecord, lease_ms: int | None = None) -> BrokerRecord:
        self.threads.append(threading.current_thread().name)
        return super().register_broker(broker, lease_ms)

    def renew_broker(self, broker_id: str, session: str, lease_ms: int) -> bool:
        self.threads.append(threading.current_thread().name)
        return super().renew_broker(broker_id, session, lease_ms)


async def test_the_lease_is_registered_and_renewed_on_the_heartbeat_lane() -> None:
    store = _Threads()
    config = OwnershipConfig("a:1", "http://a:1", lease_ms=60_000, heartbeat_interval_ms=10_000)
    ownership = Ownership(store, config)
    renewals_before = metadata_calls.figures()[HEARTBEAT].seconds.count
    await ownership.start()
    try:
        await ownership.heartbeat()
        assert ownership.renewals == 1
        assert len(store.threads) == 2
        assert all(name.startswith("quire-lease") for name in store.threads), store.threads
        assert metadata_calls.figures()[HEARTBEAT].seconds.count == renewals_before + 2
    finally:
        await ownership.close()
