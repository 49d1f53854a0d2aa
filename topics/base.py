"""The topics service's shared core: open topics (their managed ledgers, router, subscriptions,
counters), opening and auto-creating them, and policy resolution. `topics.admin` and
`topics.service` build the admin and data planes on it."""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
from collections.abc import Callable
from typing import Any, TypeVar

from bookie.api import LedgerClient
from bookie.ledgers import LedgerManager
from managed_ledger.api import ManagedLedger, ManagedLedgerFactory
from managed_ledger.clock import Clock, SystemClock
from managed_ledger.entry_format import Message
from managed_ledger.metadata.api import (
    AlreadyExistsError,
    MetadataError,
    MetadataStore,
    NotFoundError,
    TopicMetadata,
)
from managed_ledger.position import MessageId, Position
from topics import names, policies
from topics.api import TopicPolicies
from topics.backlog_quota import QuotaState
from topics.config import TopicsConfig
from topics.errors import (
    InvalidNameError,
    NamespaceNotFoundError,
    NotOwnerError,
    SubscriptionNotFoundError,
    TopicNotFoundError,
)
from topics.meters import TopicMeters
from topics.ownership import Ownership
from topics.partitions import Router
from topics.readers import CompactedSource
from topics.subscription_options import options_from_properties
from topics.subscriptions import Subscription

T = TypeVar("T")
log = logging.getLogger("quire.topics")
CLOSE_TIMEOUT_S = 10.0  # a managed ledger's close when its topic leaves this broker


class Notifier:
    """Wakes long polls of a topic: new messages, nacks, seeks. Arm before checking for data,
    then wait on the armed future, so a wake-up between the check and the wait is not lost."""

    __slots__ = ("_future",)

    def __init__(self) -> None:
        self._future: asyncio.Future[None] | None = None

    def arm(self) -> asyncio.Future[None]:
        if self._future is None or self._future.done():
            self._future = asyncio.get_running_loop().create_future()
        return self._future

    def notify(self) -> None:
        future, self._future = self._future, None
        if future is not None and not future.done():
            future.set_result(None)

    @staticmethod
    async def wait(future: asyncio.Future[None], timeout_s: float) -> None:
        if timeout_s <= 0:
            return
        # shield: a timeout must not cancel the future other waiters share.
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(asyncio.shield(future), timeout_s)


class OpenTopic:
    """A topic this broker has open."""

    def __init__(self, meta: TopicMetadata, mls: list[ManagedLedger], effective: TopicPolicies) -> None:
        self.name = meta.name
        self.partitions = meta.partitions
        self.mls = mls
        self.router = Router(meta.partitions) if meta.partitions > 0 else None
        self.policies = effective
        self.notifier = Notifier()
        self.quota = QuotaState(Notifier())  # backlog quota: cached figures, counts, held produces
        self.subscriptions: dict[str, Subscription] = {}
        self.lock = asyncio.Lock()  # subscription create/delete
        self.ledger_partition: dict[int, int] = {}  # ledger id -> partition, learnt on demand
        self.meters = TopicMeters(meta.partitions)  # counters and rates (topics.meters)
        # partition -> (first entry after the compaction horizon, its publish time): the maxLagMs
        # trigger reads that entry once per horizon (topics.compaction_check)
        self.first_after_horizon: dict[int, tuple[Position, int]] = {}
        # Set when the topic left this broker (unloaded, handed over, its lease lost) rather than
        # being deleted: a long poll that was waiting on it answers empty, and the client's retry
        # finds the new owner.
        self.moved = False
        # Kafka idempotent producers: (partition, producer id) -> state (topics.kafka_ops)
        self.kafka_producers: dict[tuple[int, int], Any] = {}

    @property
    def stale(self) -> bool:
        """A managed ledger of it was fenced: another owner took it, or this broker's lease lapsed."""
        return any(ml.is_fenced for ml in self.mls)


class TopicsBase:
    def __init__(
        self,
        store: MetadataStore,
        factory: ManagedLedgerFactory,
        client: LedgerClient,
        config: TopicsConfig,
        *,
        compacted: CompactedSource | None = None,
        clock: Clock | None = None,
        lease_clock: Clock | None = None,
        close_dependencies: bool = False,
        ownership: Ownership | None = None,
    ) -> None:
        """`close_dependencies`: `close()` also closes the factory, the ledger client and the
        store (the broker hands them over); tests that restart over one store leave it off.
        `ownership`: this broker's share of the cluster's topics (topics.ownership); None when
        this process is the only broker and owns every topic. `lease_clock`: what stamps and
        judges compaction run leases (the broker passes the store's clock); `clock` by default."""
        self._store = store
        self._ownership = ownership
        if ownership is not None:
            ownership.on_lost = self._drop_all
            factory.lease = ownership.valid
        self._close_dependencies = close_dependencies
        self._factory = factory
        self._client = client
        self._config = config
        self._clock: Clock = clock or SystemClock()
        self._lease_clock: Clock = lease_clock or self._clock
        self._ledger_manager = LedgerManager(store, client, clock=self._clock.now_ms)
        if compacted is None:
            from topics.compacted import CompactedView

            compacted = CompactedView(store, client)
        self._compacted: CompactedSource = compacted
        self._defaults = policies.defaults(config)
        self._topics: dict[str, OpenTopic] = {}
        self._open_locks: dict[str, asyncio.Lock] = {}
        self._namespace_policies: dict[str, dict[str, Any]] = {}  # as last applied (admin)

    async def _call(self, fn: Callable[..., T], *args: Any) -> T:
        """A metadata store call, off the event loop (the store is synchronous)."""
        return await asyncio.to_thread(fn, *args)

    # --- opening topics ------------------------------------------------------------------------
    async def _topic(self, topic: str, create: bool = False) -> OpenTopic:
        """The open topic; opened on first use; created first when `create` and allowed.

        With several brokers, only the topic's owner opens it: NotOwnerError names the owner.
        """
        open_topic = self._topics.get(topic)
        own = self._ownership
        if open_topic is not None:
            if own is None or (own.holds(topic) and not open_topic.stale):
                return open_topic
            await self._drop(open_topic, release=False)  # lease lapsed or fenced: look again
        name = names.validate_topic(topic)
        if own is not None:
            elsewhere = own.cached_owner(name)
            if elsewhere is not None:  # a redirect needs no store read and no lock
                raise NotOwnerError(name, elsewhere.broker_id, elsewhere.http_url)
        # One lock per topic: opening one (recovery reads the bookies) never holds up another.
        async with self._open_locks.setdefault(name, asyncio.Lock()):
            open_topic = self._topics.get(name)
            if open_topic is None:
                meta = await self._call(self._store.get_topic, name)
                if meta is None and not create:
                    raise TopicNotFoundError(name)
                if meta is None and not self._config.allow_auto_topic_creation:
                    raise TopicNotFoundError(name, "automatic topic creation is off")
                if own is not None:
                    await own.check(name)
                if meta is None:
                    meta = await self._create_topic_record(name, 0)
                open_topic = await self._load(meta)
                self._topics[name] = open_topic
        return open_topic

    async def _dead_letter(self, topic: str, messages: list[Message]) -> None:
        """Write dead letters to `topic` (the data plane does, here or at the topic's owner)."""
        raise NotImplementedError

    async def _drop(self, t: OpenTopic, *, release: bool) -> None:
        """Close the topic here and forget it (its waiters answer empty); with `release`, give up
        its ownership afterwards so that another broker may take it at once.

        Under the topic's open lock: a request that comes meanwhile waits and then looks for the
        owner afresh, rather than reopening the topic here while it is being given up."""
        async with self._open_locks.setdefault(t.name, asyncio.Lock()):
            await self._close_and_release(t, release)

    async def _close_and_release(self, t: OpenTopic, release: bool) -> None:
        if self._topics.get(t.name) is t:
            del self._topics[t.name]
        t.moved = True
        t.notifier.notify()
        t.quota.changed()  # a held produce goes on, and its append finds the topic closed (503)
        for ml in t.mls:
            try:
                await asyncio.wait_for(ml.close(), CLOSE_TIMEOUT_S)
            except Exception as exc:  # a stale or unreachable ledger: the next owner recovers it
                log.warning("closing %s while dropping topic %s: %s", ml.name, t.name, exc)
        own = self._ownership
        if own is None:
            return
        if release:
            try:
                await own.release(t.name)
            except MetadataError as exc:  # the lease then lapses instead
                log.warning("releasing topic %s: %s", t.name, exc)
        else:
            own.forget(t.name)

    async def _drop_all(self) -> None:
        """Every open topic is dropped (this broker lost its lease)."""
        topics = list(self._topics.values())
        await asyncio.gather(*(self._drop(t, release=False) for t in topics))

    async def _create_topic_record(self, name: str, partitions: int, exist_ok: bool = True) -> TopicMetadata:
        await self._check_partition_clash(name, partitions)
        record = TopicMetadata(name=name, partitions=partitions, created_ms=self._clock.now_ms())
        try:
            return await self._call(self._store.create_topic, record)
        except AlreadyExistsError:
            existing = await self._call(self._store.get_topic, name)
            if not exist_ok or existing is None:
                raise
            return existing
        except NotFoundError as exc:
            raise NamespaceNotFoundError(names.namespace_of(name)) from exc

    async def _check_partition_clash(self, name: str, partitions: int) -> None:
        """Managed ledger names must not collide: `x-partition-0` is partition 0 of a partitioned
        `x`, so it can be neither a topic of its own nor the base of a partitioned topic."""
        parsed = names.partition_index(name)
        if parsed is not None:
            if partitions > 0:
                raise InvalidNameError(name, "a partitioned topic's name may not end in -partition-N")
            base = await self._call(self._store.get_topic, parsed[0])
            if base is not None and base.partitions > 0:
                raise InvalidNameError(name, f"it is a partition of the partitioned topic {parsed[0]}")
        if partitions > 0:
            for i in range(partitions):
                if await self._call(self._store.get_topic, names.partition_name(name, i)) is not None:
                    raise InvalidNameError(name, f"topic {names.partition_name(name, i)} exists")

    async def _load(self, meta: TopicMetadata) -> OpenTopic:
        effective = await self._resolve_policies(meta.name)
        config = policies.ledger_config(effective, self._config)
        mls = [await self._factory.open(n, config) for n in names.ledger_names(meta.name, meta.partitions)]
        return OpenTopic(meta, mls, effective)

    async def _resolve_policies(self, topic: str) -> TopicPolicies:
        namespace = await self._call(self._store.get_policies, names.namespace_of(topic))
        own = await self._call(self._store.get_policies, topic)
        return policies.resolve(self._defaults, namespace, own)

    # --- partitions and subscriptions ----------------------------------------------------------
    async def _partition_of(self, t: OpenTopic, mid: MessageId) -> int | None:
        """The partition whose managed ledger holds ledger `mid.ledger_id` (ids are unique)."""
        if len(t.mls) == 1:
            return 0
        known = t.ledger_partition.get(mid.ledger_id)
        if known is not None:
            return known
        for i, ml in enumerate(t.mls):
            ledgers: Any = ml.internal_stats().get("ledgers", [])
            for info in ledgers:
                t.ledger_partition[int(info["ledgerId"])] = i
        return t.ledger_partition.get(mid.ledger_id)

    async def _subscription(self, t: OpenTopic, name: str) -> Subscription:
        sub = t.subscriptions.get(name)
        if sub is not None:
            return sub
        first = t.mls[0].cursors.get(name)
        if first is None:
            raise SubscriptionNotFoundError(t.name, name)
        async with t.lock:
            sub = t.subscriptions.get(name)
            if sub is None:
                options = options_from_properties(first.properties)
                # A partition missing the cursor (a crash while creating it) gets it from the start.
                cursors = [ml.cursors.get(name) or await ml.open_cursor(name, "earliest") for ml in t.mls]
                sub = Subscription(
                    name,
                    t.name,
                    t.mls,
                    cursors,
                    options,
                    ack_timeout_ms=options.ack_timeout_ms or self._config.default_ack_timeout_ms,
                    max_unacked=self._config.max_unacked_messages_per_subscription,
                    exclusive_idle_ms=self._config.exclusive_consumer_idle_ms,
                    clock=self._clock,
                    compacted=self._compacted,
                    partition_of=functools.partial(self._partition_of, t),
                    dead_letter=self._dead_letter,
                )
                t.subscriptions[name] = sub
        return sub
