"""The broker's background work and its lifecycle: start and close, the handover of every
topic (SIGTERM), readiness, and the periodic checks (message TTL, backlog quotas, namespace
policies changed by another broker, compaction triggers, the stats tick)."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable

from bookie.metadata_calls import call_store
from common.errors import QuireError
from managed_ledger.api import ManagedLedger
from managed_ledger.entry_format import batch_publish_time
from managed_ledger.errors import EntryNotFoundError
from managed_ledger.metadata.api import CompactionState, MetadataError
from topics import compaction_check, compaction_lease, names
from topics.admin import close_current_ledger
from topics.backlog import BacklogAdmin
from topics.idle import IdleUnloader
from topics.quota_ops import QuotaAdmin
from topics.registry import TopicRegistry
from topics.stats import TopicStats
from topics.topic import Topic

log = logging.getLogger("quire.topics")


class Maintenance:
    """The broker's lifecycle and background loops over the topic registry."""

    def __init__(
        self, registry: TopicRegistry, backlog: BacklogAdmin, quota: QuotaAdmin, stats: TopicStats
    ) -> None:
        self._r = registry
        self._backlog = backlog
        self._quota = quota
        self._stats = stats
        self._compaction_task: asyncio.Task[None] | None = None
        self._ttl_task: asyncio.Task[None] | None = None
        self._quota_task: asyncio.Task[None] | None = None
        self._stats_task: asyncio.Task[None] | None = None
        self.idle = IdleUnloader(registry)
        registry.on_open = self.idle.opened

    # --- lifecycle -----------------------------------------------------------------------------
    async def start(self) -> None:
        """Start background work: the compaction-threshold check (Pulsar's auto-compaction) and
        the message TTL check, the backlog quota check, the stats tick."""
        if self._r.ownership is not None:
            await self._r.ownership.start()
        if self._compaction_task is None:
            self._compaction_task = asyncio.create_task(self._compaction_loop(), name="quire-auto-compaction")
        if self._ttl_task is None:
            self._ttl_task = asyncio.create_task(self._ttl_loop(), name="quire-message-ttl")
        if self._quota_task is None:
            self._quota_task = asyncio.create_task(self._quota_loop(), name="quire-backlog-quota")
        if self._stats_task is None:
            self._stats_task = asyncio.create_task(self._stats.stats_loop(), name="quire-stats")

    async def close(self) -> None:
        """Close every topic, then give up its ownership (a handover: the next owner finds
        closed ledgers and flushed cursors), then leave the cluster."""
        tasks = [self._compaction_task, self._ttl_task, self._quota_task, self._stats_task]
        self._compaction_task = self._ttl_task = self._quota_task = self._stats_task = None
        for task in tasks:
            if task is not None:
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task
        await self.idle.close()
        await self.handover()
        if self._r.ownership is not None:
            await self._r.ownership.close()
        if self._r.close_dependencies:
            await self._r.factory.close()
            await self._r.client.close()
            await call_store(self._r.store.close)

    async def handover(self) -> None:
        """Stop taking topics and hand every open one over: close it, then release it (SIGTERM).
        Requests that arrive meanwhile are redirected to the broker each topic goes to."""
        own = self._r.ownership
        if own is not None:
            own.draining = True
        for t in list(self._r.topics.values()):
            await self._r.drop(t, release=True)
        if own is not None:
            # Topics assigned to this broker by a lookup that it never opened go too.
            for name in own.owned:
                with contextlib.suppress(MetadataError):
                    await own.release(name)

    async def ready(self) -> dict[str, bool]:
        try:
            await call_store(self._r.store.list_tenants)
            metadata = True
        except Exception:  # any failure means: not ready
            metadata = False
        try:
            # The bookies that serve now (the registry's live ones), not the configured list: a
            # bookie replaced for good must not keep a broker unready for ever.
            serving = await call_store(self._r.factory.placement.serving_bookies)
            bookies = await self._r.client.healthy(serving)
        except Exception:  # any failure means: not ready
            bookies = False
        return {"metadata": metadata, "bookies": bookies}

    async def _ttl_loop(self) -> None:
        await _every(self._r.config.message_ttl_check_interval_ms, self._backlog.expire_by_ttl, "message TTL")

    async def _quota_loop(self) -> None:
        interval_ms = self._r.config.backlog_quota_check_interval_ms
        await _every(interval_ms, self._quota.check_backlog_quotas, "backlog quota")

    async def _compaction_loop(self) -> None:
        await _every(self._r.config.compaction_check_interval_ms, self._compaction_tick, "auto-compaction")

    async def _compaction_tick(self) -> None:
        if self._r.ownership is not None:  # alone, this broker applied every change itself
            await self.refresh_namespace_policies()
        await self.check_compaction_thresholds()

    async def refresh_namespace_policies(self) -> None:
        """Re-apply namespace policies another broker changed to the topics open here (a topic's
        own policies are set through its owner, which applies them at once)."""
        for namespace in sorted({names.namespace_of(t.name) for t in self._r.topics.values()}):
            stored = await call_store(self._r.store.get_policies, namespace)
            if self._r.namespace_policies.get(namespace) == stored:
                continue
            self._r.namespace_policies[namespace] = stored
            for t in list(self._r.topics.values()):
                if names.namespace_of(t.name) == namespace:
                    await self._r.apply_policies(t)

    async def check_compaction_thresholds(self) -> list[str]:
        """For every topic marked since the last check (`topics.activity`) whose compaction is
        on (a threshold, maxLagMs or minCleanableDirtyRatio): tell each managed ledger its
        compaction horizon (retention keeps what lies after it), and request a run where a
        trigger fires (topics.compaction_check). Returns the managed ledgers requested.

        A topic is looked at again without a new mark while a run is requested or running (a
        compactor moves its horizon, or its lease lapses) or while maxLagMs waits for data after
        the horizon to age; otherwise the next produce or policy change marks it."""
        requested = []
        activity = self._r.activity
        for name in activity.take("compaction"):
            t = self._r.topics.get(name)
            if t is None or not t.policies.compaction_on:
                continue
            for partition, ml in enumerate(t.mls):
                now = await call_store(self._r.lease_clock.now_ms)
                state = await call_store(compaction_lease.observe, self._r.store, ml.name, now)
                horizon = compaction_check.horizon_position(state)
                if horizon != ml.compacted_through:
                    ml.compacted_through = horizon
                    await _trim(ml)  # retention may delete what the horizon passed
                if state.requested or compaction_lease.live(state, now) or _lag_pending(t, ml, state):
                    activity.keep("compaction", name)
                if compaction_lease.live(state, now):
                    continue
                # The lag since the first publish: on this broker's clock, as publish times are.
                reason = await self._compaction_trigger(t, partition, ml, state, self._r.clock.now_ms())
                if reason is None:
                    continue
                lease_ms = self._r.config.compaction_lease_ms
                await close_current_ledger(ml)
                if await call_store(compaction_lease.request, self._r.store, ml.name, now, lease_ms):
                    log.info("compaction of %s requested: %s", ml.name, reason)
                    requested.append(ml.name)
                activity.keep("compaction", name)  # requested (or lost the race): watch the run
        return requested

    async def _compaction_trigger(
        self, t: Topic, partition: int, ml: ManagedLedger, state: CompactionState, now: int
    ) -> str | None:
        """Why a run of this managed ledger is due, or None."""
        reason = compaction_check.size_trigger(
            t.policies, compaction_check.bytes_since_horizon(ml, state), state
        )
        if reason is None and t.policies.compaction.max_lag_ms > 0:
            first = await self._first_publish_after_horizon(t, partition, ml, state)
            reason = compaction_check.lag_trigger(t.policies, first, now)
        return reason

    async def _first_publish_after_horizon(
        self, t: Topic, partition: int, ml: ManagedLedger, state: CompactionState
    ) -> int | None:
        """The publish time of the first entry after the horizon: read once, then kept on the
        topic until the horizon moves (one entry read per run, not one per check)."""
        first = compaction_check.first_after_horizon(ml, state)
        if first is None:
            return None
        known = t.first_after_horizon.get(partition)
        if known is None or known[0] != first:
            try:
                known = (first, batch_publish_time(await ml.read_entry(first)))
            except EntryNotFoundError:  # trimmed meanwhile: the next check finds the new first
                return None
            t.first_after_horizon[partition] = known
        return known[1]


async def _trim(ml: ManagedLedger) -> None:
    """Retention now (an idle managed ledger has no timer pass to do it); a closed or fenced
    managed ledger is left to its next owner."""
    if ml.config.retain_uncompacted:
        try:
            await ml.trim()
        except QuireError as exc:
            log.warning("trimming %s after its compaction horizon moved: %s", ml.name, exc)


def _lag_pending(t: Topic, ml: ManagedLedger, state: CompactionState) -> bool:
    """maxLagMs is on and data lies after the horizon: the lag trigger has a deadline."""
    return (
        t.policies.compaction.max_lag_ms > 0 and compaction_check.first_after_horizon(ml, state) is not None
    )


async def _every(interval_ms: int, check: Callable[[], Awaitable[object]], what: str) -> None:
    """Run `check` every `interval_ms` for ever; a failing tick is logged and the next retries
    (the loop must outlive one bad topic)."""
    while True:
        await asyncio.sleep(interval_ms / 1000)
        try:
            await check()
        except Exception:
            log.exception("%s check failed", what)
