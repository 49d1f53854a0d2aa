"""The admin plane of the topics service: tenants, namespaces, topics, policies, stats,
compaction triggers (Pulsar's admin v2 semantics; docs/rest-api.md). Built on `topics.base`."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from dataclasses import replace
from typing import Any

from managed_ledger.api import ManagedLedger
from managed_ledger.entry_format import batch_publish_time
from managed_ledger.errors import EntryNotFoundError
from managed_ledger.metadata.api import (
    AlreadyExistsError,
    BrokerRecord,
    CompactionState,
    CompactionStatus,
    MetadataError,
    NotEmptyError,
    NotFoundError,
    TenantInfo,
)
from managed_ledger.position import MessageId
from topics import compaction_check, compaction_lease, names, policies
from topics.api import PolicyName, TopicPolicies
from topics.base import OpenTopic
from topics.errors import (
    CompactionConflictError,
    InvalidArgumentError,
    NamespaceExistsError,
    NamespaceNotEmptyError,
    NamespaceNotFoundError,
    PartitionCountError,
    TenantExistsError,
    TenantNotEmptyError,
    TenantNotFoundError,
    TopicBusyError,
    TopicExistsError,
    TopicNotFoundError,
)
from topics.group_offsets import GroupOffsetOps
from topics.ownership import BrokerInfo
from topics.tenancy import tenant_info

log = logging.getLogger("quire.topics")


class AdminPlane(GroupOffsetOps):
    _compaction_task: asyncio.Task[None] | None = None
    _ttl_task: asyncio.Task[None] | None = None
    _quota_task: asyncio.Task[None] | None = None

    # --- lifecycle -----------------------------------------------------------------------------
    async def start(self) -> None:
        """Start background work: the compaction-threshold check (Pulsar's auto-compaction) and
        the message TTL check, the backlog quota check, the stats tick."""
        if self._ownership is not None:
            await self._ownership.start()
        if self._compaction_task is None:
            self._compaction_task = asyncio.create_task(self._compaction_loop(), name="quire-auto-compaction")
        if self._ttl_task is None:
            self._ttl_task = asyncio.create_task(self._ttl_loop(), name="quire-message-ttl")
        if self._quota_task is None:
            self._quota_task = asyncio.create_task(self._quota_loop(), name="quire-backlog-quota")
        if self._stats_task is None:
            self._stats_task = asyncio.create_task(self._stats_loop(), name="quire-stats")

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
        await self.handover()
        if self._ownership is not None:
            await self._ownership.close()
        if self._close_dependencies:
            await self._factory.close()
            await self._client.close()
            await self._call(self._store.close)

    async def handover(self) -> None:
        """Stop taking topics and hand every open one over: close it, then release it (SIGTERM).
        Requests that arrive meanwhile are redirected to the broker each topic goes to."""
        own = self._ownership
        if own is not None:
            own.draining = True
        for t in list(self._topics.values()):
            await self._drop(t, release=True)
        if own is not None:
            # Topics assigned to this broker by a lookup that it never opened go too.
            for name in own.owned:
                with contextlib.suppress(MetadataError):
                    await own.release(name)

    async def ready(self) -> dict[str, bool]:
        try:
            await self._call(self._store.list_tenants)
            metadata = True
        except Exception:  # any failure means: not ready
            metadata = False
        try:
            bookies = await self._client.healthy()
        except Exception:  # any failure means: not ready
            bookies = False
        return {"metadata": metadata, "bookies": bookies}

    # --- tenants and namespaces ----------------------------------------------------------------
    async def list_tenants(self) -> list[str]:
        return await self._call(self._store.list_tenants)

    async def create_tenant(self, tenant: str, info: TenantInfo | None = None) -> None:
        names.validate_tenant(tenant)
        checked = tenant_info(tenant, info.admin_roles, info.allowed_clusters) if info else None
        try:
            await self._call(self._store.create_tenant, tenant, checked)
        except AlreadyExistsError as exc:
            raise TenantExistsError(f"tenant {tenant} already exists") from exc

    async def delete_tenant(self, tenant: str) -> None:
        names.validate_tenant(tenant)
        try:
            await self._call(self._store.delete_tenant, tenant)
        except NotFoundError as exc:
            raise TenantNotFoundError(tenant) from exc
        except NotEmptyError as exc:
            raise TenantNotEmptyError(f"tenant {tenant} still has namespaces; delete them first") from exc

    async def list_namespaces(self, tenant: str) -> list[str]:
        names.validate_tenant(tenant)
        if tenant not in await self._call(self._store.list_tenants):
            raise TenantNotFoundError(tenant)
        return await self._call(self._store.list_namespaces, tenant)

    async def create_namespace(self, namespace: str) -> None:
        names.validate_namespace(namespace)
        try:
            await self._call(self._store.create_namespace, namespace)
        except AlreadyExistsError as exc:
            raise NamespaceExistsError(f"namespace {namespace} already exists") from exc
        except NotFoundError as exc:
            raise TenantNotFoundError(names.tenant_of(namespace)) from exc

    async def delete_namespace(self, namespace: str) -> None:
        names.validate_namespace(namespace)
        try:
            await self._call(self._store.delete_namespace, namespace)
        except NotFoundError as exc:
            raise NamespaceNotFoundError(namespace) from exc
        except NotEmptyError as exc:
            raise NamespaceNotEmptyError(
                f"namespace {namespace} still has topics; delete them first"
            ) from exc

    # --- topics --------------------------------------------------------------------------------
    async def list_topics(self, namespace: str) -> list[str]:
        await self._check_namespace(namespace)
        return [
            names.PERSISTENT_PREFIX + t.name for t in await self._call(self._store.list_topics, namespace)
        ]

    async def create_topic(self, topic: str, partitions: int = 0) -> None:
        name = names.validate_topic(topic)
        if not 0 <= partitions <= self._config.max_partitions:
            raise InvalidArgumentError(
                f"partitions must be between 0 and {self._config.max_partitions} (setting max_partitions)"
            )
        await self._check_namespace(names.namespace_of(name))
        if await self._call(self._store.get_topic, name) is not None:
            raise TopicExistsError(name)
        try:
            await self._create_topic_record(name, partitions, exist_ok=False)
        except AlreadyExistsError as exc:
            raise TopicExistsError(name) from exc

    async def update_partitions(self, topic: str, partitions: int) -> None:
        """Grow a partitioned topic to `partitions`. The new partitions get every subscription's
        cursor (at their start) before the count is raised, so no subscription misses what is
        produced there; then the topic is reopened here with all of them (its subscriptions'
        in-memory delivery state goes: unacked messages come again, as after a restart)."""
        t = await self._topic(topic)
        if not t.partitions:
            raise PartitionCountError(f"topic {t.name} is not partitioned")
        if partitions <= t.partitions:
            raise PartitionCountError(
                f"topic {t.name} has {t.partitions} partitions: the count can only grow"
            )
        if partitions > self._config.max_partitions:
            raise InvalidArgumentError(
                f"partitions must be at most {self._config.max_partitions} (max_partitions)"
            )
        async with t.lock:
            meta = await self._call(self._store.get_topic, t.name)
            if meta is None:
                raise TopicNotFoundError(t.name)
            config = policies.ledger_config(t.policies, self._config)
            subscriptions = {name: c.properties for name, c in t.mls[0].cursors.items()}
            for index in range(t.partitions, partitions):
                ml = await self._factory.open(names.partition_name(t.name, index), config)
                for name, properties in subscriptions.items():
                    cursor = await ml.open_cursor(name, "earliest")
                    await cursor.set_properties(dict(properties))
                    await cursor.flush()
            await self._call(self._store.update_topic, replace(meta, partitions=partitions))
        await self._drop(t, release=False)

    async def get_partitions(self, topic: str) -> int:
        meta = await self._call(self._store.get_topic, names.validate_topic(topic))
        if meta is None:
            raise TopicNotFoundError(topic)
        return meta.partitions

    async def delete_topic(self, topic: str, force: bool = False) -> None:
        """Its managed ledgers (ledgers and cursors), compacted ledgers, policies and record."""
        t = await self._topic(topic)
        subscriptions = sorted(t.mls[0].cursors)
        if subscriptions and not force:
            raise TopicBusyError(t.name, subscriptions)
        self._topics.pop(t.name, None)
        t.notifier.notify()
        t.quota.changed()
        for ml in t.mls:
            name = ml.name
            await ml.close()
            await self._factory.delete(name)
            await self._delete_compacted_ledger(name)
        with contextlib.suppress(NotFoundError):
            await self._call(self._store.delete_topic, t.name)
        if self._ownership is not None:
            await self._ownership.release(t.name)

    async def _delete_compacted_ledger(self, ml_name: str) -> None:
        state = await self._call(self._store.get_compaction, ml_name)
        # the view's layers, and what no view references yet: a fold's replaced layers and the
        # ledger of a run that died (no sweep finds it once the state's row is gone)
        for ledger_id in (*state.layer_ledger_ids, *state.leftover_ledger_ids):
            await self._ledger_manager.delete(ledger_id)

    async def unload(self, topic: str) -> None:
        """Pulsar's unload: close the topic here (its current ledger is closed; the next write
        opens a new one) and release its ownership, so the next request may land elsewhere."""
        await self._drop(await self._topic(topic), release=True)

    # --- cluster -------------------------------------------------------------------------------
    async def lookup(self, topic: str) -> BrokerInfo | None:
        """The broker that owns `topic`, assigning one if none does; None: this broker (or the
        only one). The topic must exist, or be one that a produce may create."""
        name = names.validate_topic(topic)
        if (
            await self._call(self._store.get_topic, name) is None
            and not self._config.allow_auto_topic_creation
        ):
            raise TopicNotFoundError(name, "automatic topic creation is off")
        if self._ownership is None:
            return None
        return await self._ownership.owner(name) or self._ownership.me

    async def brokers(self) -> list[BrokerRecord]:
        """The live brokers, with the number of topics each owns."""
        if self._ownership is None:
            return []
        return await self._call(self._store.list_brokers, None)  # live by the store's clock

    def ownership_stats(self) -> dict[str, int]:
        own = self._ownership
        if own is None:
            return {
                "owned_topics": len(self._topics),
                "lease_renewals": 0,
                "lease_renewal_failures": 0,
                "sessions_lost": 0,
            }
        return {
            "owned_topics": len(own.owned),
            "lease_renewals": own.renewals,
            "lease_renewal_failures": own.renewal_failures,
            "sessions_lost": own.sessions_lost,
        }

    # --- stats ---------------------------------------------------------------------------------
    async def internal_stats(self, topic: str) -> dict[str, Any]:
        t = await self._topic(topic)
        per_ledger = {
            ml.name: await self._ledger_internal_stats(ml.name, ml.internal_stats()) for ml in t.mls
        }
        if t.partitions == 0:
            return per_ledger[t.name]
        return {"metadata": {"partitions": t.partitions}, "partitions": per_ledger}

    async def _ledger_internal_stats(self, name: str, stats: dict[str, object]) -> dict[str, Any]:
        state = await self._call(self._store.get_compaction, name)
        out: dict[str, Any] = dict(stats)
        if state.compacted_ledger_id is None:
            out["compactedLedger"] = {"ledgerId": -1, "entries": -1, "size": -1}
        else:
            out["compactedLedger"] = {
                "ledgerId": state.compacted_ledger_id,
                "entries": state.compacted_entries,
                "size": state.compacted_size_bytes,
                "deltaLedgerIds": list(state.delta_ledger_ids),
                "deltaSize": state.delta_size_bytes,
            }
        out["compactionHorizon"] = str(MessageId(*state.horizon)) if state.horizon is not None else None
        out["ledgers"] = await self._with_replication(out.get("ledgers", []))
        return out

    async def _with_replication(self, ledgers: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """Each ledger with its ensemble history (`{"firstEntryId": [bookie, ...]}`, from its
        metadata) and whether auto-recovery still has copies of it to replace."""
        under = {r.ledger_id for r in await self._call(self._store.list_underreplicated)}
        out = []
        for info in ledgers:
            ledger_id = int(info["ledgerId"])
            try:
                meta = await self._call(self._store.get_ledger, ledger_id)
            except NotFoundError:  # deleted since the ledger list was read
                out.append({**info, "underReplicated": ledger_id in under, "ensembles": {}})
                continue
            ensembles = {str(first): list(bookies) for first, bookies in meta.history()}
            quorums = {"writeQuorum": meta.write_quorum, "ackQuorum": meta.ack_quorum}
            out.append({**info, "underReplicated": ledger_id in under, "ensembles": ensembles, **quorums})
        return out

    # --- policies ------------------------------------------------------------------------------
    async def get_policies(self, topic: str) -> TopicPolicies:
        t = await self._topic(topic)
        return await self._resolve_policies(t.name)

    async def set_policy(self, topic: str, name: PolicyName, value: Any) -> None:
        """Set a policy on the topic; an object policy given in part keeps the topic's own other
        fields (those it never set fall back to the namespace, then the settings)."""
        stored_value = policies.validate(name, value)
        t = await self._topic(topic)
        own = await self._call(self._store.get_policies, t.name)
        changes = policies.scope_changes(name, stored_value, own, await self._resolve_policies(t.name))
        await self._call(self._store.update_policies, t.name, changes)
        await self._apply_policies(t)

    async def delete_policy(self, topic: str, name: PolicyName) -> None:
        policies.api_value(self._defaults, name)  # unknown names are an error
        t = await self._topic(topic)
        await self._call(self._store.update_policies, t.name, policies.removal(name))
        await self._apply_policies(t)

    # --- compaction ----------------------------------------------------------------------------
    async def trigger_compaction(self, topic: str) -> None:
        """Request a run of every managed ledger of the topic: RUNNING from now on. A run still
        requested or running under a live lease is a conflict; a lapsed one is ERROR first."""
        t = await self._topic(topic)
        now = await self._call(self._lease_clock.now_ms)
        for ml in t.mls:
            state = await self._call(compaction_lease.observe, self._store, ml.name, now)
            if compaction_lease.live(state, now):
                raise CompactionConflictError(t.name)
        lease_ms = self._config.compaction_lease_ms
        for ml in t.mls:
            await _close_current_ledger(ml)
            if await self._call(compaction_lease.request, self._store, ml.name, now, lease_ms) is None:
                raise CompactionConflictError(t.name)
        invalidate = getattr(self._compacted, "invalidate", None)
        if callable(invalidate):
            invalidate()

    async def compaction_status(self, topic: str) -> dict[str, Any]:
        t = await self._topic(topic)
        now = await self._call(self._lease_clock.now_ms)
        states = [await self._call(compaction_lease.observe, self._store, ml.name, now) for ml in t.mls]
        out = _status_dict(_overall(states))
        if t.partitions:
            out["partitions"] = {s.topic: _status_dict(s) for s in states}
        return out

    async def _ttl_loop(self) -> None:
        interval_s = self._config.message_ttl_check_interval_ms / 1000
        while True:
            await asyncio.sleep(interval_s)
            try:
                await self.expire_by_ttl()
            except Exception:  # the loop must outlive one bad topic; the next tick retries
                log.exception("message TTL check failed")

    async def _quota_loop(self) -> None:
        interval_s = self._config.backlog_quota_check_interval_ms / 1000
        while True:
            await asyncio.sleep(interval_s)
            try:
                await self.check_backlog_quotas()
            except Exception:  # the loop must outlive one bad topic; the next tick retries
                log.exception("backlog quota check failed")

    async def _compaction_loop(self) -> None:
        interval_s = self._config.compaction_check_interval_ms / 1000
        while True:
            await asyncio.sleep(interval_s)
            try:
                if self._ownership is not None:  # alone, this broker applied every change itself
                    await self.refresh_namespace_policies()
                await self.check_compaction_thresholds()
            except Exception:  # the loop must outlive one bad topic; the next tick retries
                log.exception("auto-compaction check failed")

    async def refresh_namespace_policies(self) -> None:
        """Re-apply namespace policies another broker changed to the topics open here (a topic's
        own policies are set through its owner, which applies them at once)."""
        for namespace in sorted({names.namespace_of(t.name) for t in self._topics.values()}):
            stored = await self._call(self._store.get_policies, namespace)
            if self._namespace_policies.get(namespace) == stored:
                continue
            self._namespace_policies[namespace] = stored
            for t in list(self._topics.values()):
                if names.namespace_of(t.name) == namespace:
                    await self._apply_policies(t)

    async def check_compaction_thresholds(self) -> list[str]:
        """For every open topic whose compaction is on (a threshold, maxLagMs or
        minCleanableDirtyRatio): tell each managed ledger its compaction horizon (retention keeps
        what lies after it), and request a run where a trigger fires (topics.compaction_check).
        Returns the managed ledgers requested."""
        requested = []
        for t in list(self._topics.values()):
            if not t.policies.compaction_on:
                continue
            for partition, ml in enumerate(t.mls):
                now = await self._call(self._lease_clock.now_ms)
                state = await self._call(compaction_lease.observe, self._store, ml.name, now)
                ml.compacted_through = compaction_check.horizon_position(state)
                if compaction_lease.live(state, now):
                    continue
                # The lag since the first publish: on this broker's clock, as publish times are.
                reason = await self._compaction_trigger(t, partition, ml, state, self._clock.now_ms())
                if reason is None:
                    continue
                lease_ms = self._config.compaction_lease_ms
                await _close_current_ledger(ml)
                if await self._call(compaction_lease.request, self._store, ml.name, now, lease_ms):
                    log.info("compaction of %s requested: %s", ml.name, reason)
                    requested.append(ml.name)
        return requested

    async def _compaction_trigger(
        self, t: OpenTopic, partition: int, ml: ManagedLedger, state: CompactionState, now: int
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
        self, t: OpenTopic, partition: int, ml: ManagedLedger, state: CompactionState
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


def _overall(states: list[CompactionState]) -> CompactionState:
    """One status for a partitioned topic: RUNNING, else ERROR, else SUCCESS, else NOT_RUN."""
    for status in (CompactionStatus.RUNNING, CompactionStatus.ERROR, CompactionStatus.SUCCESS):
        for s in states:
            if s.status == status:
                return s
    return states[0]


def _status_dict(state: CompactionState) -> dict[str, Any]:
    return {
        "status": str(state.status),
        "lastError": state.last_error,
        "requested": state.requested,
        "startedMs": state.started_ms,
        "endedMs": state.ended_ms,
        "messagesIn": state.messages_in,
        "messagesOut": state.messages_out,
        "horizon": str(MessageId(*state.horizon)) if state.horizon is not None else None,
    }


async def _close_current_ledger(ml: ManagedLedger) -> None:
    """Close the ledger being written before a run is requested. A run reads an open ledger
    only up to the LAC its bookies hold, one entry behind the last acknowledged
    (compactor/plan.py); a closed ledger's end is in its metadata, so the run then covers every
    message acknowledged before it was requested."""
    if ml.last_confirmed_position is not None:
        await ml.rollover()
