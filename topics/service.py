"""`TopicService`: the topics API (`topics.api.TopicsApi`) composed of plain parts over one
topic registry (Pulsar's BrokerService with its per-resource admin).

This module is the composition root of the topics layer: it builds the registry
(`topics.registry`) and the parts that receive it, wires the two hooks the registry's topics
need (the backlog quota's gate on publish, the data plane's produce of dead letters), and
forwards each API call to the one part that serves it. No part inherits from another; a part
that needs another's work receives that part.

| part | module | serves |
|---|---|---|
| `DataPlane` | `topics.data` | produce, subscriptions, readers |
| `TopicAdmin` | `topics.admin` | tenants, namespaces, topics, policies, compaction requests |
| `Tenancy` | `topics.tenancy` | tenants' admin roles, namespaces' permissions |
| `GroupOffsets` | `topics.group_offsets` | Kafka consumer groups' committed offsets |
| `Schemas` | `topics.schemas` | topics' Pulsar schemas, namespaces' compatibility strategy |
| `BacklogAdmin` | `topics.backlog` | peek, skip, expire, message TTL |
| `QuotaAdmin` | `topics.quota_ops` | backlog quotas (and the publish gate), namespace policies |
| `TopicOpsAdmin` | `topics.topic_ops` | terminate, truncate, truncate-before |
| `TopicStats` | `topics.stats` | stats, the metrics snapshot, the stats tick |
| `Maintenance` | `topics.maintenance` | start, close, handover, readiness, the periodic checks |
| `KafkaTopics` | `topics.kafka_ops` | the Kafka listener's produce, fetch and offsets |

Each open topic (`topics.topic.Topic`) owns the one publish path both doors' produce calls go
through.
"""

from __future__ import annotations

import asyncio
from collections.abc import Collection, Mapping, Sequence
from typing import Any, Literal

from bookie.api import LedgerClient
from managed_ledger.api import ManagedLedger, ManagedLedgerFactory
from managed_ledger.clock import Clock
from managed_ledger.entry_format import Message, StoredMessage
from managed_ledger.metadata.api import (
    BrokerRecord,
    GroupOffset,
    MetadataStore,
    NamespaceGrants,
    SchemaVersion,
    TenantInfo,
)
from managed_ledger.position import MessageId
from topics.admin import TopicAdmin
from topics.api import (
    BacklogQuota,
    Delivery,
    KafkaBatch,
    KafkaFetched,
    KeySharedPolicy,
    PolicyName,
    ProduceResult,
    QuotaType,
    ReadPage,
    SeekTarget,
    StartPosition,
    SubscriptionOptions,
    Terminated,
    TopicPolicies,
    TopicSample,
    TopicsApi,
)
from topics.backlog import BacklogAdmin
from topics.config import TopicsConfig
from topics.data import DataPlane
from topics.group_offsets import GroupOffsets
from topics.kafka_ops import KafkaTopics
from topics.maintenance import Maintenance
from topics.ownership import BrokerInfo, Ownership
from topics.quota_ops import QuotaAdmin
from topics.readers import CompactedSource
from topics.registry import TopicRegistry
from topics.schemas import Schemas
from topics.stats import TopicStats
from topics.tenancy import Tenancy
from topics.topic import Topic
from topics.topic_ops import TopicOpsAdmin


class TopicService:
    """The topics service: the registry and its parts (see the module's docstring)."""

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
        """See `TopicRegistry` for the arguments."""
        registry = TopicRegistry(
            store,
            factory,
            client,
            config,
            compacted=compacted,
            clock=clock,
            lease_clock=lease_clock,
            close_dependencies=close_dependencies,
            ownership=ownership,
        )
        self.registry = registry
        self.backlog = BacklogAdmin(registry)
        self.quota = QuotaAdmin(registry, self.backlog)
        self.ops = TopicOpsAdmin(registry)
        self.topic_stats = TopicStats(registry)
        self.tenancy = Tenancy(registry)
        self.groups = GroupOffsets(registry)
        self.schemas = Schemas(registry)
        self.admin = TopicAdmin(registry)
        self.maintenance = Maintenance(registry, self.backlog, self.quota, self.topic_stats)
        self.kafka = KafkaTopics(registry, self.ops)
        self.data = DataPlane(registry, self.ops, self.topic_stats)
        registry.quota_gate = self.quota
        registry.dead_letter = self.data.dead_letter

    # --- what tests of the topics layer reach into ---------------------------------------------
    @property
    def _topics(self) -> dict[str, Topic]:
        return self.registry.topics

    @property
    def _config(self) -> TopicsConfig:
        return self.registry.config

    @_config.setter
    def _config(self, config: TopicsConfig) -> None:
        self.registry.config = config

    @property
    def _compacted(self) -> CompactedSource:
        return self.registry.compacted

    async def _topic(self, topic: str, create: bool = False) -> Topic:
        return await self.registry.topic(topic, create)

    async def _partition_of(self, t: Topic, mid: MessageId) -> int | None:
        return await self.registry.partition_of(t, mid)

    async def _kafka_ml(self, topic: str, partition: int) -> tuple[Topic, ManagedLedger]:
        return await self.kafka._kafka_ml(topic, partition)

    # --- the API, each call forwarded to its part ------------------------------------------------
    async def produce(
        self, topic: str, producer_name: str | None, messages: list[Message], partition: int | None = None
    ) -> list[ProduceResult]:
        return await self.data.produce(topic, producer_name, messages, partition)

    async def create_subscription(self, topic: str, subscription: str, options: SubscriptionOptions) -> bool:
        return await self.data.create_subscription(topic, subscription, options)

    async def delete_subscription(self, topic: str, subscription: str) -> None:
        return await self.data.delete_subscription(topic, subscription)

    async def list_subscriptions(self, topic: str) -> list[str]:
        return await self.data.list_subscriptions(topic)

    async def receive(
        self,
        topic: str,
        subscription: str,
        max_messages: int,
        wait_ms: int,
        consumer_id: str | None,
        partition: int | None = None,
        whole_entries: bool = False,
    ) -> list[Delivery]:
        return await self.data.receive(
            topic, subscription, max_messages, wait_ms, consumer_id, partition, whole_entries
        )

    async def ack(self, topic: str, subscription: str, message_ids: list[MessageId]) -> None:
        return await self.data.ack(topic, subscription, message_ids)

    async def ack_cumulative(self, topic: str, subscription: str, message_id: MessageId) -> None:
        return await self.data.ack_cumulative(topic, subscription, message_id)

    async def nack(self, topic: str, subscription: str, message_ids: list[MessageId]) -> None:
        return await self.data.nack(topic, subscription, message_ids)

    async def seek(self, topic: str, subscription: str, target: SeekTarget) -> None:
        return await self.data.seek(topic, subscription, target)

    async def last_sequence_id(
        self, topic: str, producer_name: str, partition: int | None = None
    ) -> int | None:
        return await self.data.last_sequence_id(topic, producer_name, partition)

    async def key_shared_consumer(
        self, topic: str, subscription: str, consumer_id: str, policy: KeySharedPolicy
    ) -> None:
        return await self.data.key_shared_consumer(topic, subscription, consumer_id, policy)

    async def consumer_left(self, topic: str, subscription: str, consumer_id: str) -> None:
        return await self.data.consumer_left(topic, subscription, consumer_id)

    async def read(
        self,
        topic: str,
        start: StartPosition,
        max_messages: int,
        read_compacted: bool,
        wait_ms: int,
        partition: int | None = None,
    ) -> ReadPage:
        return await self.data.read(topic, start, max_messages, read_compacted, wait_ms, partition)

    async def get_message(self, topic: str, message_id: MessageId) -> StoredMessage:
        return await self.data.get_message(topic, message_id)

    async def last_message_id(
        self, topic: str, read_compacted: bool, partition: int | None = None
    ) -> MessageId | None:
        return await self.data.last_message_id(topic, read_compacted, partition)

    async def reset_cursor(self, topic: str, subscription: str, timestamp_ms: int) -> None:
        return await self.data.reset_cursor(topic, subscription, timestamp_ms)

    async def get_tenant(self, tenant: str) -> TenantInfo:
        return await self.tenancy.get_tenant(tenant)

    async def update_tenant(self, info: TenantInfo) -> None:
        return await self.tenancy.update_tenant(info)

    async def get_permissions(self, namespace: str) -> dict[str, list[str]]:
        return await self.tenancy.get_permissions(namespace)

    async def grant_permission(self, namespace: str, role: str, actions: list[str]) -> None:
        return await self.tenancy.grant_permission(namespace, role, actions)

    async def revoke_permission(self, namespace: str, role: str) -> None:
        return await self.tenancy.revoke_permission(namespace, role)

    async def grants(self, tenant: str, namespace: str | None) -> NamespaceGrants:
        return await self.tenancy.grants(tenant, namespace)

    async def commit_group_offsets(self, offsets: Sequence[GroupOffset]) -> None:
        return await self.groups.commit_group_offsets(offsets)

    async def group_offsets(self, group: str, topics: Collection[str] | None = None) -> list[GroupOffset]:
        return await self.groups.group_offsets(group, topics)

    async def list_groups(self) -> list[str]:
        return await self.groups.list_groups()

    async def delete_group_offsets(self, group: str) -> int:
        return await self.groups.delete_group_offsets(group)

    async def get_schema(self, topic: str, version: int | None = None) -> SchemaVersion:
        return await self.schemas.get_schema(topic, version)

    async def schema_versions(self, topic: str) -> list[SchemaVersion]:
        return await self.schemas.schema_versions(topic)

    async def put_schema(
        self, topic: str, schema_type: str, data: bytes, properties: Mapping[str, str]
    ) -> int:
        return await self.schemas.put_schema(topic, schema_type, data, properties)

    async def check_schema(self, topic: str, schema_type: str, data: bytes) -> None:
        return await self.schemas.check_schema(topic, schema_type, data)

    async def delete_schema(self, topic: str) -> int:
        return await self.schemas.delete_schema(topic)

    async def get_schema_compatibility(self, namespace: str) -> str:
        return await self.schemas.get_compatibility(namespace)

    async def set_schema_compatibility(self, namespace: str, strategy: str) -> None:
        return await self.schemas.set_compatibility(namespace, strategy)

    async def list_tenants(self) -> list[str]:
        return await self.admin.list_tenants()

    async def create_tenant(self, tenant: str, info: TenantInfo | None = None) -> None:
        return await self.admin.create_tenant(tenant, info)

    async def delete_tenant(self, tenant: str) -> None:
        return await self.admin.delete_tenant(tenant)

    async def list_namespaces(self, tenant: str) -> list[str]:
        return await self.admin.list_namespaces(tenant)

    async def create_namespace(self, namespace: str) -> None:
        return await self.admin.create_namespace(namespace)

    async def delete_namespace(self, namespace: str) -> None:
        return await self.admin.delete_namespace(namespace)

    async def list_topics(self, namespace: str) -> list[str]:
        return await self.admin.list_topics(namespace)

    async def create_topic(self, topic: str, partitions: int = 0) -> None:
        return await self.admin.create_topic(topic, partitions)

    async def update_partitions(self, topic: str, partitions: int) -> None:
        return await self.admin.update_partitions(topic, partitions)

    async def get_partitions(self, topic: str) -> int:
        return await self.admin.get_partitions(topic)

    async def delete_topic(self, topic: str, force: bool = False) -> None:
        return await self.admin.delete_topic(topic, force)

    async def unload(self, topic: str) -> None:
        return await self.admin.unload(topic)

    async def lookup(self, topic: str) -> BrokerInfo | None:
        return await self.admin.lookup(topic)

    async def brokers(self) -> list[BrokerRecord]:
        return await self.admin.brokers()

    def ownership_stats(self) -> dict[str, int]:
        return self.admin.ownership_stats()

    async def internal_stats(self, topic: str) -> dict[str, Any]:
        return await self.admin.internal_stats(topic)

    async def get_policies(self, topic: str) -> TopicPolicies:
        return await self.admin.get_policies(topic)

    async def set_policy(self, topic: str, name: PolicyName, value: Any) -> None:
        return await self.admin.set_policy(topic, name, value)

    async def delete_policy(self, topic: str, name: PolicyName) -> None:
        return await self.admin.delete_policy(topic, name)

    async def trigger_compaction(self, topic: str) -> None:
        return await self.admin.trigger_compaction(topic)

    async def compaction_status(self, topic: str) -> dict[str, Any]:
        return await self.admin.compaction_status(topic)

    async def peek(self, topic: str, subscription: str, n: int) -> StoredMessage:
        return await self.backlog.peek(topic, subscription, n)

    async def examine_message(
        self, topic: str, initial_position: Literal["earliest", "latest"], n: int
    ) -> StoredMessage:
        return await self.backlog.examine_message(topic, initial_position, n)

    async def skip(self, topic: str, subscription: str, n: int) -> None:
        return await self.backlog.skip(topic, subscription, n)

    async def skip_all(self, topic: str, subscription: str) -> None:
        return await self.backlog.skip_all(topic, subscription)

    async def expire_messages(self, topic: str, subscription: str | None, seconds: int) -> None:
        return await self.backlog.expire_messages(topic, subscription, seconds)

    async def expire_by_ttl(self) -> list[str]:
        return await self.backlog.expire_by_ttl()

    async def evict_backlog(self, t: Topic) -> int:
        return await self.quota.evict_backlog(t)

    async def check_backlog_quotas(self) -> list[str]:
        return await self.quota.check_backlog_quotas()

    async def get_backlog_quotas(self, topic: str) -> dict[QuotaType, BacklogQuota]:
        return await self.quota.get_backlog_quotas(topic)

    async def set_backlog_quota(self, topic: str, quota_type: QuotaType, value: Any) -> None:
        return await self.quota.set_backlog_quota(topic, quota_type, value)

    async def delete_backlog_quota(self, topic: str, quota_type: QuotaType) -> None:
        return await self.quota.delete_backlog_quota(topic, quota_type)

    async def set_namespace_backlog_quota(self, namespace: str, quota_type: QuotaType, value: Any) -> None:
        return await self.quota.set_namespace_backlog_quota(namespace, quota_type, value)

    async def delete_namespace_backlog_quota(self, namespace: str, quota_type: QuotaType) -> None:
        return await self.quota.delete_namespace_backlog_quota(namespace, quota_type)

    async def get_namespace_policies(self, namespace: str) -> TopicPolicies:
        return await self.quota.get_namespace_policies(namespace)

    async def set_namespace_policy(self, namespace: str, name: str, value: Any) -> None:
        return await self.quota.set_namespace_policy(namespace, name, value)

    async def delete_namespace_policy(self, namespace: str, name: str) -> None:
        return await self.quota.delete_namespace_policy(namespace, name)

    async def terminate(self, topic: str) -> Terminated:
        return await self.ops.terminate(topic)

    async def truncate(self, topic: str) -> None:
        return await self.ops.truncate(topic)

    async def truncate_before(self, topic: str, message_id: MessageId) -> None:
        return await self.ops.truncate_before(topic, message_id)

    async def reached_end_of_topic(self, topic: str, subscription: str) -> bool:
        return await self.ops.reached_end_of_topic(topic, subscription)

    async def tick_stats(self, elapsed_s: float) -> None:
        return await self.topic_stats.tick_stats(elapsed_s)

    async def stats(self, topic: str) -> dict[str, Any]:
        return await self.topic_stats.stats(topic)

    async def partitioned_stats(self, topic: str) -> dict[str, Any]:
        return await self.topic_stats.partitioned_stats(topic)

    def metrics_snapshot(self) -> list[TopicSample]:
        return self.topic_stats.metrics_snapshot()

    async def start(self) -> None:
        return await self.maintenance.start()

    async def close(self) -> None:
        return await self.maintenance.close()

    async def handover(self) -> None:
        return await self.maintenance.handover()

    async def ready(self) -> dict[str, bool]:
        return await self.maintenance.ready()

    async def refresh_namespace_policies(self) -> None:
        return await self.maintenance.refresh_namespace_policies()

    async def check_compaction_thresholds(self) -> list[str]:
        return await self.maintenance.check_compaction_thresholds()

    async def kafka_partitions(self, topic: str) -> int:
        return await self.kafka.kafka_partitions(topic)

    async def kafka_policies(self, topic: str) -> TopicPolicies:
        return await self.kafka.kafka_policies(topic)

    async def kafka_produce(self, topic: str, partition: int, batch: KafkaBatch) -> int:
        return await self.kafka.kafka_produce(topic, partition, batch)

    async def kafka_fetch(self, topic: str, partition: int, offset: int, max_bytes: int) -> KafkaFetched:
        return await self.kafka.kafka_fetch(topic, partition, offset, max_bytes)

    def kafka_arm(self, topic: str) -> asyncio.Future[None] | None:
        return self.kafka.kafka_arm(topic)

    async def kafka_list_offset(self, topic: str, partition: int, timestamp_ms: int) -> tuple[int, int]:
        return await self.kafka.kafka_list_offset(topic, partition, timestamp_ms)

    async def kafka_delete_records(self, topic: str, partition: int, offset: int) -> int:
        return await self.kafka.kafka_delete_records(topic, partition, offset)


def _implements(service: TopicService) -> TopicsApi:
    """Never called: mypy checks here that TopicService implements the TopicsApi protocol."""
    return service
