"""Topic ownership across brokers (Pulsar's ownership cache and lookup, on the metadata store).

Each broker registers a *session* in the metadata store (`brokers` row: id, URLs, lease end)
and renews its lease every `heartbeat_interval_ms`. A topic is owned through a `topic_owners`
row naming a broker and one of its sessions; the row is valid while that session is the broker's
current one and its lease runs. So a broker's ownerships all lapse together with its lease, and
all are voided at once when it registers a new session: no per-topic renewal, no row to clean up.

Safety: the broker stops serving before another broker may take over. One clock decides leases,
the metadata store's (`managed_ledger/metadata/store_clock.py`): the store writes the lease end
as its own now plus lease_ms when it applies a registration or renewal, refuses to renew a lease
that already ended (a late renewal must not revive a session whose topics another broker took),
and judges every claim and owner by its own now; no broker's wall clock enters. Locally the
broker counts its lease as ending `margin` before lease_ms on its monotonic clock (`valid()`),
measured from before the request was sent: the store applied it no earlier, so the store's lease
ends no earlier than the local one plus the margin. A renewal that took longer than the margin
makes the broker re-read the owner of every topic it holds and drop any it does not own. A
refused renewal drops every topic. When `valid()` turns
false — the broker was paused, or could not reach the store — it drops every topic it had
(`on_lost`) and registers a new session; its managed ledgers are fenced through the same check
(managed_ledger.fencing), and the next owner's recovery fences their ledgers on the bookies, so a
stale owner's write fails rather than forking a topic.

Lookup: the owner of a topic is read from the store; an unowned topic is assigned to the live
broker with the fewest owned topics (ties broken by a hash of the topic, so a burst of lookups
from every broker spreads) by one claim that only one claimer can win. Answers about other
owners are cached for `owner_cache_ms`, so a request at a non-owner is redirected without a
store round trip.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
import uuid
import zlib
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from bookie.metadata_calls import HEARTBEAT, call_store
from managed_ledger.clock import Clock, SystemClock
from managed_ledger.metadata.api import (
    BrokerRecord,
    MetadataError,
    MetadataStore,
    NotFoundError,
    TopicOwner,
)
from topics.errors import NotOwnerError, OwnershipUnavailableError

log = logging.getLogger("quire.ownership")
ASSIGN_ATTEMPTS = 3


@dataclass(frozen=True, slots=True)
class OwnershipConfig:
    broker_id: str  # the advertised host:port of the broker's HTTP listener
    http_url: str
    kafka_url: str = ""
    pulsar_url: str = ""  # "pulsar://host:port" (the Pulsar listener's LOOKUP redirects there)
    lease_ms: int = 5_000
    heartbeat_interval_ms: int = 1_000
    owner_cache_ms: int = 1_000

    @property
    def margin_ms(self) -> int:
        """How much earlier than the stored lease end this broker stops serving."""
        return max(self.lease_ms // 5, self.heartbeat_interval_ms // 2)


@dataclass(frozen=True, slots=True)
class BrokerInfo:
    broker_id: str
    http_url: str
    kafka_url: str
    pulsar_url: str = ""


class Ownership:
    def __init__(
        self,
        store: MetadataStore,
        config: OwnershipConfig,
        *,
        on_lost: Callable[[], Awaitable[None]] | None = None,
        clock: Clock | None = None,
    ) -> None:
        self._store = store
        self.config = config
        self.on_lost = on_lost
        self._clock: Clock = clock or SystemClock()
        self.me = BrokerInfo(config.broker_id, config.http_url, config.kafka_url, config.pulsar_url)
        self.session = ""
        self._valid_until = 0.0
        self._owned: set[str] = set()
        self._cache: dict[str, tuple[BrokerInfo, float]] = {}
        self._brokers: dict[str, BrokerRecord] = {}
        self._task: asyncio.Task[None] | None = None
        self._lock = asyncio.Lock()  # one heartbeat (renewal, loss, registration) at a time
        self.draining = False
        self.renewals = 0
        self.renewal_failures = 0
        self.sessions_lost = 0
        self.dropped_after_recheck = 0

    # --- the session -------------------------------------------------------------------------
    def valid(self) -> bool:
        """True while this broker may serve the topics it owns."""
        return time.monotonic() < self._valid_until

    @property
    def owned(self) -> frozenset[str]:
        return frozenset(self._owned)

    async def start(self) -> None:
        async with self._lock:
            await self._register()
        if self._task is None:
            self._task = asyncio.create_task(self._heartbeats(), name="quire-broker-heartbeat")

    async def _register(self) -> None:
        session = uuid.uuid4().hex
        started = time.monotonic()
        record = BrokerRecord(
            self.me.broker_id, session, self.me.http_url, self.me.kafka_url, self.me.pulsar_url
        )
        # The store stamps the session's start and lease end with its own clock.
        # Registration and renewal run on the seam's heartbeat lane, a thread of their own:
        # behind a queue of slow metadata calls, a renewal could come too late and cost this
        # broker all its topics.
        await call_store(self._store.register_broker, record, self.config.lease_ms, lane=HEARTBEAT)
        self.session = session
        self._valid_until = started + (self.config.lease_ms - self.config.margin_ms) / 1000
        log.info("broker %s registered session %s", self.me.broker_id, session)
        await self._refresh_brokers()

    async def _heartbeats(self) -> None:
        interval_s = self.config.heartbeat_interval_ms / 1000
        while True:
            await asyncio.sleep(interval_s)
            try:
                await self.heartbeat()
            except Exception:  # the loop must outlive a failed pass; validity covers safety
                self.renewal_failures += 1
                log.exception("broker heartbeat failed")

    async def heartbeat(self) -> None:
        """Renew the lease; on a lapsed or replaced session, drop every topic and start anew."""
        async with self._lock:
            if self.session and not self.valid():
                await self._lose("its lease lapsed before it could renew it")
            elif self.session:
                started = time.monotonic()
                renew, lease_ms = self._store.renew_broker, self.config.lease_ms
                renewed = await call_store(renew, self.me.broker_id, self.session, lease_ms, lane=HEARTBEAT)
                if renewed:
                    self._valid_until = started + (self.config.lease_ms - self.config.margin_ms) / 1000
                    self.renewals += 1
                    if time.monotonic() - started > self.config.margin_ms / 1000:
                        await self._recheck_owned()
                    await self._refresh_brokers()
                    return
                await self._lose("the store refused its renewal (lease ended, or session replaced)")
            if not self.draining:
                await self._register()

    async def _recheck_owned(self) -> None:
        """After a slow renewal: keep only the topics the store still says this session owns.
        (The store never renews a lapsed session, so this finds nothing unless something else
        went wrong; it is cheap next to serving a topic another broker took.)"""
        for topic in sorted(self._owned):
            current = await call_store(self._store.get_topic_owner, topic, None)
            if current is None or not self._is_me(current):
                log.warning("broker %s no longer owns %s after a slow renewal", self.me.broker_id, topic)
                self.forget(topic)
                self.dropped_after_recheck += 1

    async def _lose(self, reason: str) -> None:
        log.warning(
            "broker %s lost session %s: %s; dropping its topics", self.me.broker_id, self.session, reason
        )
        self.sessions_lost += 1
        self.session = ""
        self._valid_until = 0.0
        self._owned.clear()
        self._cache.clear()
        if self.on_lost is not None:
            await self.on_lost()

    async def _refresh_brokers(self) -> None:
        brokers = await call_store(self._store.list_brokers, None)  # by the store's clock
        self._brokers = {b.broker_id: b for b in brokers}

    # --- owners ------------------------------------------------------------------------------
    async def owner(self, topic: str) -> BrokerInfo | None:
        """None when this broker owns `topic` (claiming it if nobody does and this broker is the
        least loaded); else the owner (NotOwnerError is the caller's to raise)."""
        if topic in self._owned and self.valid() and not self.draining:
            return None
        cached = self.cached_owner(topic)
        if cached is not None:
            return cached
        if not self.valid():
            raise OwnershipUnavailableError(f"broker {self.me.broker_id} is renewing its session; retry")
        now = self._clock.now_ms()  # only recorded as when it was acquired; the store judges
        current = await call_store(self._store.get_topic_owner, topic, None)
        if current is not None and self._is_me(current) and self.draining:
            await self.release(topic)
            current = None
        if current is None:
            current = await self._assign(topic, now)
        if self._is_me(current):
            self._owned.add(topic)
            return None
        info = await self._info(current.broker_id)
        self._cache[topic] = (info, time.monotonic() + self.config.owner_cache_ms / 1000)
        return info

    def cached_owner(self, topic: str) -> BrokerInfo | None:
        """Another broker known to own `topic` (answered within `owner_cache_ms`), or None."""
        cached = self._cache.get(topic)
        if cached is not None and cached[1] > time.monotonic():
            return cached[0]
        return None

    async def _assign(self, topic: str, now: int) -> TopicOwner:
        """Claim the unowned `topic` for the least loaded live broker; the owner after it."""
        for _ in range(ASSIGN_ATTEMPTS):
            # Fresh counts, read just before the claim: every broker's assignments count (one
            # read per topic assigned; a topic is assigned once per owner it has).
            await self._refresh_brokers()
            target = self._choose(topic)
            claim = TopicOwner(topic, target.broker_id, target.session, acquired_ms=now)
            try:
                return await call_store(self._store.claim_topic, claim, None)
            except NotFoundError:
                continue  # the target left since the list was read: choose among the rest
        raise OwnershipUnavailableError(f"no live broker could take topic {topic}; retry")

    def holds(self, topic: str) -> bool:
        """This broker owns `topic` and may serve it now."""
        return topic in self._owned and self.valid()

    async def check(self, topic: str) -> None:
        """Return when this broker owns `topic`; NotOwnerError naming the owner otherwise."""
        info = await self.owner(topic)
        if info is not None:
            raise NotOwnerError(topic, info.broker_id, info.http_url)

    def _is_me(self, owner: TopicOwner) -> bool:
        return owner.broker_id == self.me.broker_id and owner.session == self.session

    def _choose(self, topic: str) -> BrokerRecord:
        """The live broker with the fewest topics (not this one while it is draining); ties go
        by a hash of the topic and the broker, so brokers assigning at once spread them."""
        candidates = [
            b for b in self._brokers.values() if not (self.draining and b.broker_id == self.me.broker_id)
        ]
        if not candidates:
            raise OwnershipUnavailableError(f"no live broker can take topic {topic} now; retry")
        return min(candidates, key=lambda b: (b.owned_topics, zlib.crc32(f"{topic}|{b.broker_id}".encode())))

    async def _info(self, broker_id: str) -> BrokerInfo:
        record = self._brokers.get(broker_id)
        if record is None:
            await self._refresh_brokers()
            record = self._brokers.get(broker_id)
        if record is None:
            raise OwnershipUnavailableError(f"the owner {broker_id} is not registered any more; retry")
        return BrokerInfo(record.broker_id, record.http_url, record.kafka_url, record.pulsar_url)

    async def release(self, topic: str) -> None:
        """Give up `topic` (after its managed ledgers were closed)."""
        self._owned.discard(topic)
        self._cache.pop(topic, None)
        if self.session:
            await call_store(self._store.release_topic, topic, self.me.broker_id, self.session)

    def forget(self, topic: str) -> None:
        """Drop what is known locally about `topic` (it was dropped without a release)."""
        self._owned.discard(topic)
        self._cache.pop(topic, None)

    async def close(self) -> None:
        """Stop renewing and leave the cluster: the session's remaining ownerships go with it."""
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
        if self.session:
            with contextlib.suppress(MetadataError):
                await call_store(self._store.remove_broker, self.me.broker_id, self.session)
        self.session = ""
        self._valid_until = 0.0
        self._owned.clear()
