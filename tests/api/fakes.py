"""A small in-memory TopicsApi for fast unit tests of the routes (the live tests in this package
run the real stack). It keeps just enough of the semantics to check the HTTP mapping: one ledger
per topic, one entry per batch, pending/ack/nack, readers with `next`, and the domain's errors."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

from managed_ledger.entry_format import Message, StoredMessage
from managed_ledger.position import MessageId
from topics import errors
from topics.api import (
    Delivery,
    PolicyName,
    ProduceResult,
    ReadPage,
    SeekTarget,
    StartPosition,
    SubscriptionOptions,
    TopicPolicies,
)
from topics.names import validate_namespace, validate_tenant, validate_topic

LEDGER = 7


@dataclass
class _Sub:
    options: SubscriptionOptions
    next_index: int
    pending: dict[MessageId, int] = field(default_factory=dict)  # id -> redelivery count
    redeliver: list[MessageId] = field(default_factory=list)
    acked: set[MessageId] = field(default_factory=set)


@dataclass
class _Topic:
    messages: list[StoredMessage] = field(default_factory=list)
    entries: int = 0
    partitions: int = 0
    subs: dict[str, _Sub] = field(default_factory=dict)
    policies: dict[str, Any] = field(default_factory=dict)


class FakeTopics:
    def __init__(self, allow_auto_topic_creation: bool = True) -> None:
        self.auto = allow_auto_topic_creation
        self.tenants = {"public"}
        self.namespaces = {"public/default"}
        self.topics: dict[str, _Topic] = {}
        self.compacting: set[str] = set()
        self.calls: list[str] = []
        self.closed = False

    # --- helpers -------------------------------------------------------------------------------
    def _topic(self, name: str, create: bool = False) -> _Topic:
        validate_topic(name)
        if name not in self.topics:
            if not (create and self.auto):
                raise errors.TopicNotFoundError(name)
            self.topics[name] = _Topic()
        return self.topics[name]

    def _sub(self, topic: str, sub: str) -> _Sub:
        t = self._topic(topic)
        if sub not in t.subs:
            raise errors.SubscriptionNotFoundError(topic, sub)
        return t.subs[sub]

    def _by_id(self, t: _Topic) -> dict[MessageId, StoredMessage]:
        return {m.message_id: m for m in t.messages}

    # --- data plane ----------------------------------------------------------------------------
    async def produce(
        self, topic: str, producer_name: str | None, messages: list[Message]
    ) -> list[ProduceResult]:
        self.calls.append("produce")
        t = self._topic(topic, create=True)
        entry, now = t.entries, int(time.time() * 1000)
        t.entries += 1
        out = []
        for i, m in enumerate(messages):
            mid = MessageId(LEDGER, entry, i)
            t.messages.append(
                StoredMessage(
                    mid, m.value, m.key, m.properties, m.event_time, m.sequence_id, now, producer_name
                )
            )
            out.append(ProduceResult(mid))
        return out

    async def create_subscription(self, topic: str, subscription: str, options: SubscriptionOptions) -> bool:
        t = self._topic(topic, create=True)
        if subscription in t.subs:
            return False
        start = 0 if options.initial_position == "earliest" else len(t.messages)
        t.subs[subscription] = _Sub(options, start)
        return True

    async def delete_subscription(self, topic: str, subscription: str) -> None:
        self._sub(topic, subscription)
        del self.topics[topic].subs[subscription]

    async def list_subscriptions(self, topic: str) -> list[str]:
        return sorted(self._topic(topic).subs)

    async def receive(
        self, topic: str, subscription: str, max_messages: int, wait_ms: int, consumer_id: str | None
    ) -> list[Delivery]:
        t, s = self._topic(topic), self._sub(topic, subscription)
        by_id = self._by_id(t)
        out: list[Delivery] = []
        while s.redeliver and len(out) < max_messages:
            mid = s.redeliver.pop(0)
            s.pending[mid] += 1
            out.append(Delivery(by_id[mid], s.pending[mid]))
        while s.next_index < len(t.messages) and len(out) < max_messages:
            m = t.messages[s.next_index]
            s.next_index += 1
            if m.message_id not in s.acked:
                s.pending[m.message_id] = 0
                out.append(Delivery(m, 0))
        return out

    async def ack(self, topic: str, subscription: str, message_ids: list[MessageId]) -> None:
        s = self._sub(topic, subscription)
        for mid in message_ids:
            s.pending.pop(mid, None)
            s.acked.add(mid)

    async def ack_cumulative(self, topic: str, subscription: str, message_id: MessageId) -> None:
        t, s = self._topic(topic), self._sub(topic, subscription)
        await self.ack(topic, subscription, [m.message_id for m in t.messages if m.message_id <= message_id])
        s.redeliver = [m for m in s.redeliver if m > message_id]

    async def nack(self, topic: str, subscription: str, message_ids: list[MessageId]) -> None:
        s = self._sub(topic, subscription)
        s.redeliver.extend(mid for mid in message_ids if mid in s.pending)

    async def seek(self, topic: str, subscription: str, target: SeekTarget) -> None:
        t, s = self._topic(topic), self._sub(topic, subscription)
        if target == "earliest":
            s.next_index = 0
        elif target == "latest":
            s.next_index = len(t.messages)
        elif isinstance(target, int):
            s.next_index = next(
                (i for i, m in enumerate(t.messages) if m.publish_time >= target), len(t.messages)
            )
        else:
            s.next_index = next(
                (i for i, m in enumerate(t.messages) if m.message_id >= target), len(t.messages)
            )
        s.acked, s.pending, s.redeliver = set(), {}, []

    async def read(
        self, topic: str, start: StartPosition, max_messages: int, read_compacted: bool, wait_ms: int
    ) -> ReadPage:
        t = self._topic(topic)
        if start == "earliest":
            msgs = t.messages
        elif start == "latest":
            msgs = []
        elif isinstance(start, tuple) and start[0] == "after":
            msgs = [m for m in t.messages if m.message_id > start[1]]
        else:
            msgs = [m for m in t.messages if m.message_id >= start]
        page = msgs[:max_messages]
        return ReadPage(page, f"after:{page[-1].message_id}" if page else None)

    async def get_message(self, topic: str, message_id: MessageId) -> StoredMessage:
        found = self._by_id(self._topic(topic)).get(message_id)
        if found is None:
            raise errors.MessageNotFoundError(topic, str(message_id))
        return found

    async def last_message_id(self, topic: str, read_compacted: bool) -> MessageId | None:
        t = self._topic(topic)
        return t.messages[-1].message_id if t.messages else None

    # --- admin ---------------------------------------------------------------------------------
    async def list_tenants(self) -> list[str]:
        return sorted(self.tenants)

    async def create_tenant(self, tenant: str) -> None:
        validate_tenant(tenant)
        if tenant in self.tenants:
            raise errors.TenantExistsError(f"tenant {tenant} already exists")
        self.tenants.add(tenant)

    async def delete_tenant(self, tenant: str) -> None:
        if tenant not in self.tenants:
            raise errors.TenantNotFoundError(tenant)
        if any(ns.startswith(tenant + "/") for ns in self.namespaces):
            raise errors.TenantNotEmptyError(f"tenant {tenant} has namespaces")
        self.tenants.discard(tenant)

    async def list_namespaces(self, tenant: str) -> list[str]:
        if tenant not in self.tenants:
            raise errors.TenantNotFoundError(tenant)
        return sorted(ns for ns in self.namespaces if ns.startswith(tenant + "/"))

    async def create_namespace(self, namespace: str) -> None:
        validate_namespace(namespace)
        if namespace.split("/")[0] not in self.tenants:
            raise errors.TenantNotFoundError(namespace.split("/")[0])
        if namespace in self.namespaces:
            raise errors.NamespaceExistsError(f"namespace {namespace} already exists")
        self.namespaces.add(namespace)

    async def delete_namespace(self, namespace: str) -> None:
        if namespace not in self.namespaces:
            raise errors.NamespaceNotFoundError(namespace)
        self.namespaces.discard(namespace)

    async def list_topics(self, namespace: str) -> list[str]:
        if namespace not in self.namespaces:
            raise errors.NamespaceNotFoundError(namespace)
        return sorted(f"persistent://{n}" for n in self.topics if n.startswith(namespace + "/"))

    async def create_topic(self, topic: str, partitions: int = 0) -> None:
        validate_topic(topic)
        if topic in self.topics:
            raise errors.TopicExistsError(topic)
        self.topics[topic] = _Topic(partitions=partitions)

    async def get_partitions(self, topic: str) -> int:
        return self._topic(topic).partitions

    async def delete_topic(self, topic: str, force: bool = False) -> None:
        t = self._topic(topic)
        if t.subs and not force:
            raise errors.TopicBusyError(topic, sorted(t.subs))
        del self.topics[topic]

    async def unload(self, topic: str) -> None:
        self._topic(topic)

    async def stats(self, topic: str) -> dict[str, Any]:
        t = self._topic(topic)
        size = sum(len(m.value) for m in t.messages)
        subs = {
            n: {
                "type": s.options.type,
                "msgBacklog": len(t.messages) - len(s.acked),
                "unackedMessages": len(s.pending),
            }
            for n, s in t.subs.items()
        }
        return {
            "msgInCounter": len(t.messages),
            "bytesInCounter": size,
            "storageSize": size,
            "backlogSize": 0,
            "subscriptions": subs,
            "compaction": {
                "lastCompactionRemovedEventCount": 0,
                "lastCompactionSucceedTimestamp": 0,
                "lastCompactionFailedTimestamp": 0,
                "lastCompactionDurationTimeInMills": 0,
            },
        }

    async def internal_stats(self, topic: str) -> dict[str, Any]:
        t = self._topic(topic)
        size = sum(len(m.value) for m in t.messages)
        return {
            "entriesAddedCounter": t.entries,
            "numberOfEntries": t.entries,
            "totalSize": size,
            "currentLedgerEntries": t.entries,
            "currentLedgerSize": size,
            "lastConfirmedEntry": f"{LEDGER}:{t.entries - 1}",
            "ledgers": [{"ledgerId": LEDGER, "entries": t.entries, "size": size, "timestamp": 0}],
            "cursors": {
                n: {
                    "markDeletePosition": f"{LEDGER}:-1",
                    "readPosition": f"{LEDGER}:0",
                    "individuallyDeletedMessages": "[]",
                }
                for n in t.subs
            },
            "compactedLedger": {"ledgerId": -1, "entries": -1, "size": -1},
            "compactionHorizon": None,
        }

    async def get_policies(self, topic: str) -> TopicPolicies:
        p = self._topic(topic).policies
        retention = p.get("retention", {"retentionTimeInMinutes": 0, "retentionSizeInMB": 0})
        rollover = p.get(
            "rolloverPolicy",
            {
                "maxEntriesPerLedger": 50_000,
                "maxSizePerLedgerBytes": 2 * 1024**3,
                "minRolloverTimeMs": 600_000,
                "maxRolloverTimeMs": 14_400_000,
            },
        )
        return TopicPolicies(
            retention_time_minutes=retention["retentionTimeInMinutes"],
            retention_size_mb=retention["retentionSizeInMB"],
            compaction_threshold_bytes=p.get("compactionThreshold", 0),
            deduplication_enabled=p.get("deduplicationEnabled", False),
            max_entries_per_ledger=rollover["maxEntriesPerLedger"],
            max_size_per_ledger_bytes=rollover["maxSizePerLedgerBytes"],
            min_rollover_time_ms=rollover["minRolloverTimeMs"],
            max_rollover_time_ms=rollover["maxRolloverTimeMs"],
        )

    async def set_policy(self, topic: str, name: PolicyName, value: Any) -> None:
        self._topic(topic).policies[name] = value

    async def delete_policy(self, topic: str, name: PolicyName) -> None:
        self._topic(topic).policies.pop(name, None)

    async def reset_cursor(self, topic: str, subscription: str, timestamp_ms: int) -> None:
        await self.seek(topic, subscription, timestamp_ms)

    async def trigger_compaction(self, topic: str) -> None:
        self._topic(topic)
        if topic in self.compacting:
            raise errors.CompactionConflictError(topic)
        self.compacting.add(topic)

    async def compaction_status(self, topic: str) -> dict[str, Any]:
        self._topic(topic)
        return {"status": "RUNNING" if topic in self.compacting else "NOT_RUN", "lastError": ""}

    async def ready(self) -> dict[str, bool]:
        return {"metadata": True, "bookies": True}

    async def close(self) -> None:
        self.closed = True
