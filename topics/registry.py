"""The topic registry (Pulsar's BrokerService): the topics this broker has open, opening and
auto-creating them, dropping them when they leave, their policies, and the collaborators every
part of the topics service shares. Each part (`topics.service.TopicService` lists them)
receives the registry; none inherits from another."""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

from bookie.api import LedgerClient
from bookie.ledgers import LedgerManager
from bookie.metadata_calls import call_store
from managed_ledger.api import ManagedLedgerFactory
from managed_ledger.clock import Clock, SystemClock
from managed_ledger.entry_format import Message
from managed_ledger.metadata.api import (
    AlreadyExistsError,
    MetadataError,
    MetadataStore,
    NotFoundError,
    TopicMetadata,
)
from managed_ledger.position import MessageId
from topics import names, policies
from topics.activity import Activity
from topics.api import TopicPolicies
from topics.config import TopicsConfig
from topics.errors import (
    InvalidNameError,
    NamespaceNotFoundError,
    NotOwnerError,
    SubscriptionNotFoundError,
    TopicNotFoundError,
)
from topics.ownership import Ownership
from topics.readers import CompactedSource
from topics.subscription_options import options_from_properties
from topics.subscriptions import Subscription
from topics.topic import QuotaGate, Topic

log = logging.getLogger("quire.topics")
DeadLetter = Callable[[str, list[Message]], Awaitable[None]]
CLOSE_TIMEOUT_S = 10.0  # a managed ledger's close when its topic leaves this broker


class TopicRegistry:
    """The topics this broker has open (Pulsar's BrokerService): opening, auto-creating and
    dropping them, their policies, and the collaborators every part of the topics service
    shares (the metadata store, the managed ledger factory, the clocks, the compacted view).
    The parts (`topics.service.TopicService` composes them) each receive this registry."""

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
        self.store = store
        self.ownership = ownership
        if ownership is not None:
            ownership.on_lost = self.drop_all
            factory.lease = ownership.valid
        self.close_dependencies = close_dependencies
        self.factory = factory
        self.client = client
        self.config = config
        self.clock: Clock = clock or SystemClock()
        self.lease_clock: Clock = lease_clock or self.clock
        self.ledger_manager = LedgerManager(store, client, clock=self.clock.now_ms)
        if compacted is None:
            from topics.compacted import CompactedView

            compacted = CompactedView(store, client)
        self.compacted: CompactedSource = compacted
        self.defaults = policies.defaults(config)
        self.topics: dict[str, Topic] = {}
        self.open_locks: dict[str, asyncio.Lock] = {}  # only while a task holds or awaits one
        self._lock_users: dict[str, int] = {}
        self.on_open: Callable[[Topic], None] = _nothing  # wired by topics.maintenance (idle unload)
        self.namespace_policies: dict[str, dict[str, Any]] = {}  # as last applied (admin)
        self.activity = Activity()  # which topics the periodic checks look at
        # Wired by the composition root (topics.service) once the parts exist: the quota's part
        # in publishing, and the data plane's produce of dead letters.
        self.quota_gate: QuotaGate = _NO_QUOTAS
        self.dead_letter: DeadLetter = _no_dead_letters

    # --- opening topics ------------------------------------------------------------------------
    async def topic(self, topic: str, create: bool = False) -> Topic:
        """The open topic; opened on first use; created first when `create` and allowed.

        With several brokers, only the topic's owner opens it: NotOwnerError names the owner.
        """
        open_topic = self.topics.get(topic)
        own = self.ownership
        if open_topic is not None:
            if own is None or (own.holds(topic) and not open_topic.stale):
                open_topic.last_active_ms = self.clock.now_ms()
                return open_topic
            await self.drop(open_topic, release=False)  # lease lapsed or fenced: look again
        name = names.validate_topic(topic)
        if own is not None:
            elsewhere = own.cached_owner(name)
            if elsewhere is not None:  # a redirect needs no store read and no lock
                raise NotOwnerError(name, elsewhere.broker_id, elsewhere.http_url)
        # One lock per topic: opening one (recovery reads the bookies) never holds up another.
        async with self.open_lock(name):
            open_topic = self.topics.get(name)
            if open_topic is None:
                meta = await call_store(self.store.get_topic, name)
                if meta is None and not create:
                    raise TopicNotFoundError(name)
                if meta is None and not self.config.allow_auto_topic_creation:
                    raise TopicNotFoundError(name, "automatic topic creation is off")
                if own is not None:
                    await own.check(name)
                if meta is None:
                    meta = await self.create_topic_record(name, 0)
                open_topic = await self.load(meta)
                self.topics[name] = open_topic
                open_topic.on_activity = self.activity.touched
                self.activity.touched(name)
                self.on_open(open_topic)
            open_topic.last_active_ms = self.clock.now_ms()
        return open_topic

    @contextlib.asynccontextmanager
    async def open_lock(self, name: str) -> AsyncIterator[None]:
        """The topic's open lock, kept in `open_locks` only while some task holds or awaits it
        (a topic's lock does not outlive its use: tens of thousands of topics leave none)."""
        lock = self.open_locks.get(name)
        if lock is None:
            lock = self.open_locks[name] = asyncio.Lock()
        self._lock_users[name] = self._lock_users.get(name, 0) + 1
        try:
            async with lock:
                yield
        finally:
            users = self._lock_users[name] - 1
            if users:
                self._lock_users[name] = users
            else:
                del self._lock_users[name], self.open_locks[name]

    async def unload(self, t: Topic, still_idle: Callable[[], bool]) -> bool:
        """Close an idle topic here and forget it, keeping this broker's ownership (no release,
        no forget): its next request opens it again. False if it was in use by then. The check
        and the removal are one step; the close runs under the open lock, so that a request
        meanwhile waits for it and then opens the topic afresh."""
        if self.topics.get(t.name) is not t or name_locked(self, t.name) or not still_idle():
            return False
        del self.topics[t.name]
        async with self.open_lock(t.name):
            await self.close_topic(t)
        return True

    async def drop(self, t: Topic, *, release: bool) -> None:
        """Close the topic here and forget it (its waiters answer empty); with `release`, give up
        its ownership afterwards so that another broker may take it at once.

        Under the topic's open lock: a request that comes meanwhile waits and then looks for the
        owner afresh, rather than reopening the topic here while it is being given up."""
        async with self.open_lock(t.name):
            await self.close_and_release(t, release)

    async def close_and_release(self, t: Topic, release: bool) -> None:
        await self.close_topic(t)
        own = self.ownership
        if own is None:
            return
        if release:
            try:
                await own.release(t.name)
            except MetadataError as exc:  # the lease then lapses instead
                log.warning("releasing topic %s: %s", t.name, exc)
        else:
            own.forget(t.name)

    async def close_topic(self, t: Topic) -> None:
        """Close the topic's managed ledgers and forget it here; its ownership is untouched."""
        if self.topics.get(t.name) is t:
            del self.topics[t.name]
        t.moved = True
        t.notifier.notify()
        t.quota.changed()  # a held produce goes on, and its append finds the topic closed (503)
        for ml in t.mls:
            try:
                await asyncio.wait_for(ml.close(), CLOSE_TIMEOUT_S)
            except Exception as exc:  # a stale or unreachable ledger: the next owner recovers it
                log.warning("closing %s while dropping topic %s: %s", ml.name, t.name, exc)

    async def drop_all(self) -> None:
        """Every open topic is dropped (this broker lost its lease)."""
        topics = list(self.topics.values())
        await asyncio.gather(*(self.drop(t, release=False) for t in topics))

    async def create_topic_record(self, name: str, partitions: int, exist_ok: bool = True) -> TopicMetadata:
        await self.check_partition_clash(name, partitions)
        record = TopicMetadata(name=name, partitions=partitions, created_ms=self.clock.now_ms())
        try:
            return await call_store(self.store.create_topic, record)
        except AlreadyExistsError:
            existing = await call_store(self.store.get_topic, name)
            if not exist_ok or existing is None:
                raise
            return existing
        except NotFoundError as exc:
            raise NamespaceNotFoundError(names.namespace_of(name)) from exc

    async def check_partition_clash(self, name: str, partitions: int) -> None:
        """Managed ledger names must not collide: `x-partition-0` is partition 0 of a partitioned
        `x`, so it can be neither a topic of its own nor the base of a partitioned topic."""
        parsed = names.partition_index(name)
        if parsed is not None:
            if partitions > 0:
                raise InvalidNameError(name, "a partitioned topic's name may not end in -partition-N")
            base = await call_store(self.store.get_topic, parsed[0])
            if base is not None and base.partitions > 0:
                raise InvalidNameError(name, f"it is a partition of the partitioned topic {parsed[0]}")
        if partitions > 0:
            for i in range(partitions):
                if await call_store(self.store.get_topic, names.partition_name(name, i)) is not None:
                    raise InvalidNameError(name, f"topic {names.partition_name(name, i)} exists")

    async def load(self, meta: TopicMetadata) -> Topic:
        effective = await self.resolve_policies(meta.name)
        config = policies.ledger_config(effective, self.config)
        mls = [await self.factory.open(n, config) for n in names.ledger_names(meta.name, meta.partitions)]
        return Topic(meta, mls, effective, self.clock, self.quota_gate)

    async def resolve_policies(self, topic: str) -> TopicPolicies:
        namespace = names.namespace_of(topic)
        stored = await call_store(self.store.get_policies_of, [namespace, topic])  # one read
        return policies.resolve(self.defaults, stored[namespace], stored[topic])

    async def apply_policies(self, t: Topic) -> None:
        """Resolve the topic's policies again and apply them to its managed ledgers."""
        t.policies = await self.resolve_policies(t.name)
        config = policies.ledger_config(t.policies, self.config)
        for ml in t.mls:
            ml.update_config(config)
        t.quota.changed()
        self.activity.touched(t.name)

    async def check_namespace(self, namespace: str) -> None:
        names.validate_namespace(namespace)
        if namespace not in await call_store(self.store.list_namespaces, names.tenant_of(namespace)):
            raise NamespaceNotFoundError(namespace)

    # --- partitions and subscriptions ----------------------------------------------------------
    async def partition_of(self, t: Topic, mid: MessageId) -> int | None:
        """The partition whose managed ledger holds ledger `mid.ledger_id` (ids are unique)."""
        if len(t.mls) == 1:
            return 0
        known = t.ledger_partition.get(mid.ledger_id)
        if known is not None:
            return known
        for i, ml in enumerate(t.mls):
            for ledger_id in ml.ledger_list.ids:
                t.ledger_partition[ledger_id] = i
        return t.ledger_partition.get(mid.ledger_id)

    async def subscription(self, t: Topic, name: str) -> Subscription:
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
                    ack_timeout_ms=options.ack_timeout_ms or self.config.default_ack_timeout_ms,
                    max_unacked=self.config.max_unacked_messages_per_subscription,
                    exclusive_idle_ms=self.config.exclusive_consumer_idle_ms,
                    clock=self.clock,
                    compacted=self.compacted,
                    partition_of=functools.partial(self.partition_of, t),
                    dead_letter=self.dead_letter,
                )
                t.subscriptions[name] = sub
        return sub


def name_locked(registry: TopicRegistry, name: str) -> bool:
    """A task holds or awaits the topic's open lock."""
    return name in registry.open_locks


def _nothing(t: Topic) -> None:
    pass


class _NoQuotas:
    async def before_publish(self, t: Topic) -> None:
        pass

    async def after_publish(self, t: Topic) -> None:
        pass


_NO_QUOTAS = _NoQuotas()


async def _no_dead_letters(topic: str, messages: list[Message]) -> None:
    raise AssertionError("the composition root wires the registry's dead-letter producer")
