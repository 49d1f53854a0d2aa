"""The admin side of the topics service: tenants, namespaces, topics, policies, internal stats,
compaction requests (Pulsar's admin v2 semantics; docs/rest-api.md). A plain class over the
topic registry (`topics.registry`); the periodic checks are `topics.maintenance`'s."""

from __future__ import annotations

import contextlib
import logging
from dataclasses import replace
from typing import Any

from bookie.metadata_calls import call_store
from managed_ledger.api import ManagedLedger
from managed_ledger.metadata.api import (
    AlreadyExistsError,
    BrokerRecord,
    CompactionState,
    CompactionStatus,
    NotEmptyError,
    NotFoundError,
    TenantInfo,
)
from managed_ledger.position import MessageId
from topics import compaction_lease, names, policies
from topics.api import PolicyName, TopicPolicies
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
from topics.ownership import BrokerInfo
from topics.registry import TopicRegistry
from topics.tenancy import tenant_info

log = logging.getLogger("quire.topics")


class TopicAdmin:
    """Tenants, namespaces, topics, policies, internal stats and compaction requests."""

    def __init__(self, registry: TopicRegistry) -> None:
        self._r = registry

    # --- tenants and namespaces ----------------------------------------------------------------
    async def list_tenants(self) -> list[str]:
        return await call_store(self._r.store.list_tenants)

    async def create_tenant(self, tenant: str, info: TenantInfo | None = None) -> None:
        names.validate_tenant(tenant)
        checked = tenant_info(tenant, info.admin_roles, info.allowed_clusters) if info else None
        try:
            await call_store(self._r.store.create_tenant, tenant, checked)
        except AlreadyExistsError as exc:
            raise TenantExistsError(f"tenant {tenant} already exists") from exc

    async def delete_tenant(self, tenant: str) -> None:
        names.validate_tenant(tenant)
        try:
            await call_store(self._r.store.delete_tenant, tenant)
        except NotFoundError as exc:
            raise TenantNotFoundError(tenant) from exc
        except NotEmptyError as exc:
            raise TenantNotEmptyError(f"tenant {tenant} still has namespaces; delete them first") from exc

    async def list_namespaces(self, tenant: str) -> list[str]:
        names.validate_tenant(tenant)
        if tenant not in await call_store(self._r.store.list_tenants):
            raise TenantNotFoundError(tenant)
        return await call_store(self._r.store.list_namespaces, tenant)

    async def create_namespace(self, namespace: str) -> None:
        names.validate_namespace(namespace)
        try:
            await call_store(self._r.store.create_namespace, namespace)
        except AlreadyExistsError as exc:
            raise NamespaceExistsError(f"namespace {namespace} already exists") from exc
        except NotFoundError as exc:
            raise TenantNotFoundError(names.tenant_of(namespace)) from exc

    async def delete_namespace(self, namespace: str) -> None:
        names.validate_namespace(namespace)
        try:
            await call_store(self._r.store.delete_namespace, namespace)
        except NotFoundError as exc:
            raise NamespaceNotFoundError(namespace) from exc
        except NotEmptyError as exc:
            raise NamespaceNotEmptyError(
                f"namespace {namespace} still has topics; delete them first"
            ) from exc

    # --- topics --------------------------------------------------------------------------------
    async def list_topics(self, namespace: str) -> list[str]:
        await self._r.check_namespace(namespace)
        return [
            names.PERSISTENT_PREFIX + t.name for t in await call_store(self._r.store.list_topics, namespace)
        ]

    async def create_topic(self, topic: str, partitions: int = 0) -> None:
        name = names.validate_topic(topic)
        if not 0 <= partitions <= self._r.config.max_partitions:
            raise InvalidArgumentError(
                f"partitions must be between 0 and {self._r.config.max_partitions} (setting max_partitions)"
            )
        await self._r.check_namespace(names.namespace_of(name))
        if await call_store(self._r.store.get_topic, name) is not None:
            raise TopicExistsError(name)
        try:
            await self._r.create_topic_record(name, partitions, exist_ok=False)
        except AlreadyExistsError as exc:
            raise TopicExistsError(name) from exc

    async def update_partitions(self, topic: str, partitions: int) -> None:
        """Grow a partitioned topic to `partitions`. The new partitions get every subscription's
        cursor (at their start) before the count is raised, so no subscription misses what is
        produced there; then the topic is reopened here with all of them (its subscriptions'
        in-memory delivery state goes: unacked messages come again, as after a restart)."""
        t = await self._r.topic(topic)
        if not t.partitions:
            raise PartitionCountError(f"topic {t.name} is not partitioned")
        if partitions <= t.partitions:
            raise PartitionCountError(
                f"topic {t.name} has {t.partitions} partitions: the count can only grow"
            )
        if partitions > self._r.config.max_partitions:
            raise InvalidArgumentError(
                f"partitions must be at most {self._r.config.max_partitions} (max_partitions)"
            )
        async with t.lock:
            meta = await call_store(self._r.store.get_topic, t.name)
            if meta is None:
                raise TopicNotFoundError(t.name)
            config = policies.ledger_config(t.policies, self._r.config)
            subscriptions = {name: c.properties for name, c in t.mls[0].cursors.items()}
            for index in range(t.partitions, partitions):
                ml = await self._r.factory.open(names.partition_name(t.name, index), config)
                for name, properties in subscriptions.items():
                    cursor = await ml.open_cursor(name, "earliest")
                    await cursor.set_properties(dict(properties))
                    await cursor.flush()
            await call_store(self._r.store.update_topic, replace(meta, partitions=partitions))
        await self._r.drop(t, release=False)

    async def get_partitions(self, topic: str) -> int:
        meta = await call_store(self._r.store.get_topic, names.validate_topic(topic))
        if meta is None:
            raise TopicNotFoundError(topic)
        return meta.partitions

    async def delete_topic(self, topic: str, force: bool = False) -> None:
        """Its managed ledgers (ledgers and cursors), compacted ledgers, policies and record."""
        t = await self._r.topic(topic)
        subscriptions = sorted(t.mls[0].cursors)
        if subscriptions and not force:
            raise TopicBusyError(t.name, subscriptions)
        self._r.topics.pop(t.name, None)
        t.notifier.notify()
        t.quota.changed()
        for ml in t.mls:
            name = ml.name
            await ml.close()
            await self._r.factory.delete(name)
            await self._delete_compacted_ledger(name)
        with contextlib.suppress(NotFoundError):
            await call_store(self._r.store.delete_topic, t.name)
        if self._r.ownership is not None:
            await self._r.ownership.release(t.name)

    async def _delete_compacted_ledger(self, ml_name: str) -> None:
        state = await call_store(self._r.store.get_compaction, ml_name)
        # the view's layers, and what no view references yet: a fold's replaced layers and the
        # ledger of a run that died (no sweep finds it once the state's row is gone)
        for ledger_id in (*state.layer_ledger_ids, *state.leftover_ledger_ids):
            await self._r.ledger_manager.delete(ledger_id)

    async def unload(self, topic: str) -> None:
        """Pulsar's unload: close the topic here (its current ledger is closed; the next write
        opens a new one) and release its ownership, so the next request may land elsewhere."""
        await self._r.drop(await self._r.topic(topic), release=True)

    # --- cluster -------------------------------------------------------------------------------
    async def lookup(self, topic: str) -> BrokerInfo | None:
        """The broker that owns `topic`, assigning one if none does; None: this broker (or the
        only one). The topic must exist, or be one that a produce may create."""
        name = names.validate_topic(topic)
        if (
            await call_store(self._r.store.get_topic, name) is None
            and not self._r.config.allow_auto_topic_creation
        ):
            raise TopicNotFoundError(name, "automatic topic creation is off")
        if self._r.ownership is None:
            return None
        return await self._r.ownership.owner(name) or self._r.ownership.me

    async def brokers(self) -> list[BrokerRecord]:
        """The live brokers, with the number of topics each owns."""
        if self._r.ownership is None:
            return []
        return await call_store(self._r.store.list_brokers, None)  # live by the store's clock

    def ownership_stats(self) -> dict[str, int]:
        own = self._r.ownership
        if own is None:
            return {
                "owned_topics": len(self._r.topics),
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
        t = await self._r.topic(topic)
        per_ledger = {
            ml.name: await self._ledger_internal_stats(ml.name, ml.internal_stats()) for ml in t.mls
        }
        if t.partitions == 0:
            return per_ledger[t.name]
        return {"metadata": {"partitions": t.partitions}, "partitions": per_ledger}

    async def _ledger_internal_stats(self, name: str, stats: dict[str, object]) -> dict[str, Any]:
        state = await call_store(self._r.store.get_compaction, name)
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
        under = {r.ledger_id for r in await call_store(self._r.store.list_underreplicated)}
        out = []
        for info in ledgers:
            ledger_id = int(info["ledgerId"])
            try:
                meta = await call_store(self._r.store.get_ledger, ledger_id)
            except NotFoundError:  # deleted since the ledger list was read
                out.append({**info, "underReplicated": ledger_id in under, "ensembles": {}})
                continue
            ensembles = {str(first): list(bookies) for first, bookies in meta.history()}
            quorums = {"writeQuorum": meta.write_quorum, "ackQuorum": meta.ack_quorum}
            out.append({**info, "underReplicated": ledger_id in under, "ensembles": ensembles, **quorums})
        return out

    # --- policies ------------------------------------------------------------------------------
    async def get_policies(self, topic: str) -> TopicPolicies:
        t = await self._r.topic(topic)
        return await self._r.resolve_policies(t.name)

    async def set_policy(self, topic: str, name: PolicyName, value: Any) -> None:
        """Set a policy on the topic; an object policy given in part keeps the topic's own other
        fields (those it never set fall back to the namespace, then the settings)."""
        stored_value = policies.validate(name, value)
        t = await self._r.topic(topic)
        own = await call_store(self._r.store.get_policies, t.name)
        changes = policies.scope_changes(name, stored_value, own, await self._r.resolve_policies(t.name))
        await call_store(self._r.store.update_policies, t.name, changes)
        await self._r.apply_policies(t)

    async def delete_policy(self, topic: str, name: PolicyName) -> None:
        policies.api_value(self._r.defaults, name)  # unknown names are an error
        t = await self._r.topic(topic)
        await call_store(self._r.store.update_policies, t.name, policies.removal(name))
        await self._r.apply_policies(t)

    # --- compaction ----------------------------------------------------------------------------
    async def trigger_compaction(self, topic: str) -> None:
        """Request a run of every managed ledger of the topic: RUNNING from now on. A run still
        requested or running under a live lease is a conflict; a lapsed one is ERROR first."""
        t = await self._r.topic(topic)
        now = await call_store(self._r.lease_clock.now_ms)
        for ml in t.mls:
            state = await call_store(compaction_lease.observe, self._r.store, ml.name, now)
            if compaction_lease.live(state, now):
                raise CompactionConflictError(t.name)
        lease_ms = self._r.config.compaction_lease_ms
        for ml in t.mls:
            await close_current_ledger(ml)
            if await call_store(compaction_lease.request, self._r.store, ml.name, now, lease_ms) is None:
                raise CompactionConflictError(t.name)
        self._r.compacted.invalidate()

    async def compaction_status(self, topic: str) -> dict[str, Any]:
        t = await self._r.topic(topic)
        now = await call_store(self._r.lease_clock.now_ms)
        states = [await call_store(compaction_lease.observe, self._r.store, ml.name, now) for ml in t.mls]
        out = _status_dict(_overall(states))
        if t.partitions:
            out["partitions"] = {s.topic: _status_dict(s) for s in states}
        return out


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


async def close_current_ledger(ml: ManagedLedger) -> None:
    """Close the ledger being written before a run is requested. A run reads an open ledger
    only up to the LAC its bookies hold, one entry behind the last acknowledged
    (compactor/plan.py); a closed ledger's end is in its metadata, so the run then covers every
    message acknowledged before it was requested."""
    if ml.last_confirmed_position is not None:
        await ml.rollover()
