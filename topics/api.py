"""The topics service: what the REST API (app/) calls. Domain only: no HTTP here.

The API is split by consumer, each a Protocol: `DataApi` (clients), `AdminApi`
(administration), `ClusterApi` (the broker process and its cluster), `KafkaApi` (the Kafka
listener); `TopicsApi` is all of them, and `topics.service.TopicService` implements it over the
managed ledger. Errors are the types in `topics.errors`; app/ maps each to a problem+json
status in one table. Topic names are full `tenant/namespace/topic` strings validated by
`topics.names`.
"""

from __future__ import annotations

import asyncio
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

from managed_ledger.entry_format import Message, StoredMessage
from managed_ledger.metadata.api import BrokerRecord, GroupOffset, NamespaceGrants, SchemaVersion, TenantInfo
from managed_ledger.position import MessageId
from topics.ownership import BrokerInfo

SubscriptionType = Literal["shared", "exclusive", "failover", "key_shared"]


@dataclass(frozen=True, slots=True)
class SubscriptionOptions:
    initial_position: Literal["earliest", "latest"] = "latest"
    type: SubscriptionType = "shared"
    read_compacted: bool = False
    ack_timeout_ms: int | None = None  # None: the broker's default
    # Pulsar's DeadLetterPolicy: at most max_redeliveries + 1 deliveries (0: no limit), then the
    # message goes to dead_letter_topic (None: "{topic}-{subscription}-DLQ").
    max_redeliveries: int = 0
    dead_letter_topic: str | None = None


@dataclass(frozen=True, slots=True)
class KeySharedPolicy:
    """A key_shared consumer's policy (Pulsar's KeySharedMeta): AUTO_SPLIT (`sticky` False: the
    broker divides the hash slots) or STICKY (`ranges`: the inclusive slot ranges, 0..65535, the
    consumer takes); `allow_out_of_order`: a key moves to its new consumer at once when
    consumers change, not once its messages out with the old one are acked."""

    sticky: bool = False
    ranges: tuple[tuple[int, int], ...] = ()
    allow_out_of_order: bool = False


@dataclass(frozen=True, slots=True)
class Delivery:
    message: StoredMessage
    redelivery_count: int = 0


@dataclass(frozen=True, slots=True)
class ReadPage:
    messages: list[StoredMessage]
    next: str | None  # "after:L:E:B", or None when nothing was read and the reader is at the end
    end_of_topic: bool = False  # terminated, and this page reached its last message


@dataclass(frozen=True, slots=True)
class Terminated:
    """What terminate answers: the last message id (None: the topic held none, or it is
    partitioned) and, for a partitioned topic, each partition's."""

    message_id: MessageId | None
    partitions: Mapping[str, MessageId | None]


# "earliest" | "latest" | MessageId (inclusive) | ("after", MessageId) (exclusive), or over a
# partitioned topic ("after", one slot per partition: MessageId | None = from its beginning), the
# form `topics.names.parse_start` makes of a partitioned reader's `next` token.
StartPosition = (
    Literal["earliest", "latest"]
    | MessageId
    | tuple[Literal["time"], int]  # the first message published at or after this time (ms)
    | tuple[Literal["after"], MessageId]
    | tuple[Literal["after"], tuple[MessageId | None, ...]]
)
SeekTarget = Literal["earliest", "latest"] | MessageId | int  # int = publish timestamp ms


@dataclass(frozen=True, slots=True)
class KafkaBatch:
    """One produced record batch (magic 2), already validated by the listener."""

    data: bytes
    count: int
    producer_id: int = -1
    producer_epoch: int = -1
    base_sequence: int = -1


@dataclass(slots=True)
class KafkaFetched:
    """What a fetch found: compacted messages (each with its offset) first, then stored entries
    as (base offset, entry payload); the partition's bounds."""

    high_watermark: int
    log_start_offset: int
    compacted: list[StoredMessage] = field(default_factory=list)
    entries: list[tuple[int, bytes]] = field(default_factory=list)


@dataclass(frozen=True, slots=True)
class ProduceResult:
    message_id: MessageId | None  # None: a duplicate, not stored
    duplicate: bool = False


QuotaType = Literal["destination_storage", "message_age"]
QuotaPolicy = Literal["producer_request_hold", "producer_exception", "consumer_backlog_eviction"]


@dataclass(frozen=True, slots=True)
class BacklogQuota:
    """Pulsar's backlog quota of one type: `destination_storage` limits the slowest
    subscription's backlog in bytes (`limit_size`), `message_age` the age in seconds of its
    oldest unacked message (`limit_time`); `policy` says what happens past it."""

    policy: QuotaPolicy
    limit_size: int | None = None
    limit_time: int | None = None


@dataclass(frozen=True, slots=True)
class SubscriptionSample:
    """One subscription's figures for the metrics endpoint (summed over partitions)."""

    name: str
    backlog: int  # messages
    unacked: int
    consumers: int
    out: tuple[int, int, float, float]  # messages, bytes, msg/s, bytes/s
    redelivered: tuple[int, float]  # messages, msg/s
    expired: int
    dead_lettered: int


@dataclass(frozen=True, slots=True)
class TopicSample:
    """One open topic's figures for the metrics endpoint (a partitioned topic as a whole)."""

    topic: str
    namespace: str
    inbound: tuple[int, int, float, float]  # messages, bytes, msg/s, bytes/s
    outbound: tuple[int, int, float, float]
    storage_bytes: int
    backlog_bytes: int
    backlog: int  # messages, the largest subscription backlog
    producers: int
    subscriptions: tuple[SubscriptionSample, ...]
    quota_events: dict[str, int]


KeylessPolicy = Literal["drop", "keep"]


@dataclass(frozen=True, slots=True)
class CompactionPolicy:
    """A topic's effective `compactionPolicy` (topics.policies resolves it field by field): what
    a run does with key-less messages, how long a tombstone stays in the compacted view after it
    was published (Kafka's delete.retention.ms; 0: dropped at once, Pulsar's rule), and two
    triggers besides the threshold: the oldest message after the horizon is older than
    `max_lag_ms` (RocketMQ's time dimension), or the bytes after the horizon pass this share of
    the compacted view plus them (Kafka's min.cleanable.dirty.ratio). 0 = off for each trigger."""

    keyless_policy: KeylessPolicy = "drop"
    delete_retention_ms: int = 0
    max_lag_ms: int = 0
    min_cleanable_dirty_ratio: float = 0.0


@dataclass(frozen=True, slots=True)
class TopicPolicies:
    """Effective policies of a topic (topic > namespace > settings)."""

    retention_time_minutes: int
    retention_size_mb: int
    compaction_threshold_bytes: int
    deduplication_enabled: bool
    max_entries_per_ledger: int
    max_size_per_ledger_bytes: int
    min_rollover_time_ms: int
    max_rollover_time_ms: int
    compaction: CompactionPolicy = CompactionPolicy()
    message_ttl_seconds: int = 0
    # Only the types set somewhere (settings: none); topics.backlog_quota enforces them.
    backlog_quotas: Mapping[QuotaType, BacklogQuota] = field(default_factory=dict)
    extra: Mapping[str, Any] = field(default_factory=dict)

    @property
    def compaction_on(self) -> bool:
        """Some trigger requests runs on its own (threshold, time or ratio): then retention keeps
        what compaction has not read yet, as Pulsar's `__compaction` cursor does."""
        c = self.compaction
        return self.compaction_threshold_bytes > 0 or c.max_lag_ms > 0 or c.min_cleanable_dirty_ratio > 0


PolicyName = Literal[
    "retention",
    "compactionThreshold",
    "deduplicationEnabled",
    "rolloverPolicy",
    "messageTTL",
    "compactionPolicy",
]


class DataApi(Protocol):
    """What clients call: produce, subscriptions, readers (the REST data routes).

    `partition` (produce, receive, read, last_sequence_id, last_message_id) addresses one partition
    of a partitioned topic, as the Pulsar door's `<topic>-partition-<n>` does: produce stores
    on it alone (no routing), receive hands out only its messages (shared; the door applies
    Pulsar's per-partition subscription rules), the others look at its managed ledger only.
    None: the topic as a whole. Acks, nacks and seeks by id need none (an id names its ledger).
    """

    async def produce(
        self, topic: str, producer_name: str | None, messages: list[Message], partition: int | None = None
    ) -> list[ProduceResult]: ...

    async def last_sequence_id(
        self, topic: str, producer_name: str, partition: int | None = None
    ) -> int | None:
        """The highest sequence id stored for the producer by the dedup `produce` applies (the
        Pulsar listener's PRODUCER_SUCCESS.last_sequence_id); None when the topic's
        deduplication is off or the producer stored nothing."""
        ...

    async def create_subscription(self, topic: str, subscription: str, options: SubscriptionOptions) -> bool:
        """True when created, False when it already existed."""
        ...

    async def delete_subscription(self, topic: str, subscription: str) -> None: ...

    async def list_subscriptions(self, topic: str) -> list[str]: ...

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
        """`partition`: that partition's messages only; `whole_entries`: the last entry is
        handed out whole, past max_messages (a push consumer's permits: Pulsar sends a batch
        whole, and its client acks a batch as one)."""
        ...

    async def ack(self, topic: str, subscription: str, message_ids: list[MessageId]) -> None: ...

    async def ack_cumulative(self, topic: str, subscription: str, message_id: MessageId) -> None: ...

    async def nack(self, topic: str, subscription: str, message_ids: list[MessageId]) -> None: ...

    async def key_shared_consumer(
        self, topic: str, subscription: str, consumer_id: str, policy: KeySharedPolicy
    ) -> None:
        """A consumer of a key_shared subscription declares its policy (a Pulsar SUBSCRIBE's
        keySharedMeta) and joins now: ConsumerAssignError for STICKY ranges out of bounds or
        overlapping a live consumer's, ConsumerBusyError for a policy unlike the live
        consumers'. Nothing for a subscription of another type."""
        ...

    async def consumer_left(self, topic: str, subscription: str, consumer_id: str) -> None:
        """A consumer of a failover or key_shared subscription says it is gone (a Pulsar consumer
        closing): it leaves now rather than after the consumer idle time, so that failover's
        active consumer and key_shared's keys move at once."""
        ...

    async def seek(self, topic: str, subscription: str, target: SeekTarget) -> None: ...

    async def read(
        self,
        topic: str,
        start: StartPosition,
        max_messages: int,
        read_compacted: bool,
        wait_ms: int,
        partition: int | None = None,
    ) -> ReadPage: ...

    async def get_message(self, topic: str, message_id: MessageId) -> StoredMessage: ...

    async def last_message_id(
        self, topic: str, read_compacted: bool, partition: int | None = None
    ) -> MessageId | None: ...

    async def reached_end_of_topic(self, topic: str, subscription: str) -> bool:
        """The topic is terminated and the subscription acked all of it."""
        ...


class AdminApi(Protocol):
    """Tenants, namespaces, topics, policies, backlogs, stats and group offsets (the admin
    routes, the admin CLI through them, the authorizer)."""

    async def list_tenants(self) -> list[str]: ...

    async def create_tenant(self, tenant: str, info: TenantInfo | None = None) -> None:
        """Create the tenant, with `info`'s admin roles and allowed clusters."""
        ...

    async def get_tenant(self, tenant: str) -> TenantInfo: ...

    async def update_tenant(self, info: TenantInfo) -> None:
        """Replace the tenant's admin roles and allowed clusters."""
        ...

    async def delete_tenant(self, tenant: str) -> None: ...

    async def list_namespaces(self, tenant: str) -> list[str]: ...

    async def create_namespace(self, namespace: str) -> None: ...

    async def delete_namespace(self, namespace: str) -> None: ...

    async def get_permissions(self, namespace: str) -> dict[str, list[str]]:
        """Role -> the actions (`produce`, `consume`) granted to it on the namespace."""
        ...

    async def grant_permission(self, namespace: str, role: str, actions: list[str]) -> None:
        """Grant `actions` to `role` on the namespace, replacing what it had."""
        ...

    async def revoke_permission(self, namespace: str, role: str) -> None: ...

    async def grants(self, tenant: str, namespace: str | None) -> NamespaceGrants:
        """The tenant's admin roles and the namespace's permissions (`tenant/ns`), as
        authorization reads them: names that do not exist grant nothing, and are no error."""
        ...

    async def list_topics(self, namespace: str) -> list[str]:
        """Full names `persistent://tenant/ns/topic`."""
        ...

    async def create_topic(self, topic: str, partitions: int = 0) -> None: ...

    async def get_partitions(self, topic: str) -> int: ...

    async def delete_topic(self, topic: str, force: bool = False) -> None: ...

    async def unload(self, topic: str) -> None: ...

    async def stats(self, topic: str) -> dict[str, Any]: ...

    async def partitioned_stats(self, topic: str) -> dict[str, Any]:
        """The sum (`stats`) and each partition's own under `partitions` (404: not partitioned)."""
        ...

    async def internal_stats(self, topic: str) -> dict[str, Any]: ...

    async def get_policies(self, topic: str) -> TopicPolicies: ...

    async def set_policy(self, topic: str, name: PolicyName, value: Any) -> None: ...

    async def delete_policy(self, topic: str, name: PolicyName) -> None: ...

    # --- backlog quotas (topics.backlog_quota) and namespace policies ----------------------------
    async def get_backlog_quotas(self, topic: str) -> dict[QuotaType, BacklogQuota]:
        """The topic's effective quotas, only the types set (topic > namespace)."""
        ...

    async def set_backlog_quota(self, topic: str, quota_type: QuotaType, value: Any) -> None:
        """Set one type of quota on the topic; `value` is the API's body."""
        ...

    async def delete_backlog_quota(self, topic: str, quota_type: QuotaType) -> None: ...

    async def get_namespace_policies(self, namespace: str) -> TopicPolicies:
        """The namespace's effective policies (its own, else the settings')."""
        ...

    async def set_namespace_policy(self, namespace: str, name: str, value: Any) -> None:
        """Set a policy on the namespace; an object policy may carry some fields only (the
        others keep the namespace's own value, else the settings')."""
        ...

    async def delete_namespace_policy(self, namespace: str, name: str) -> None: ...

    async def set_namespace_backlog_quota(
        self, namespace: str, quota_type: QuotaType, value: Any
    ) -> None: ...

    async def delete_namespace_backlog_quota(self, namespace: str, quota_type: QuotaType) -> None: ...

    async def reset_cursor(self, topic: str, subscription: str, timestamp_ms: int) -> None: ...

    async def update_partitions(self, topic: str, partitions: int) -> None:
        """Grow a partitioned topic (PartitionCountError when not partitioned or not more)."""
        ...

    # --- a subscription's backlog (Pulsar's peek, skip, clear-backlog, expire) ---------------------
    async def peek(self, topic: str, subscription: str, n: int) -> StoredMessage:
        """The n-th (1-based) message the subscription has not acked, delivered or not;
        MessageNotFoundError when the backlog is shorter."""
        ...

    async def examine_message(
        self, topic: str, initial_position: Literal["earliest", "latest"], n: int
    ) -> StoredMessage:
        """The first message of the n-th (1-based) entry from the oldest stored or the newest."""
        ...

    async def skip(self, topic: str, subscription: str, n: int) -> None:
        """Ack the next n messages the subscription has not acked (each partition's n)."""
        ...

    async def skip_all(self, topic: str, subscription: str) -> None:
        """Ack everything stored so far (Pulsar's clear-backlog)."""
        ...

    async def expire_messages(self, topic: str, subscription: str | None, seconds: int) -> None:
        """Ack every message published more than `seconds` ago, on one subscription or (None)
        on all of them."""
        ...

    # --- whole-topic operations (topics.topic_ops) ----------------------------------------------
    async def terminate(self, topic: str) -> Terminated:
        """Pulsar's terminate (every partition of a partitioned topic); idempotent."""
        ...

    async def truncate(self, topic: str) -> None:
        """Pulsar's truncate: every subscription at the end, every closed ledger deleted."""
        ...

    async def truncate_before(self, topic: str, message_id: MessageId) -> None:
        """Kafka's DeleteRecords: the log start moves to `message_id` (never back);
        MessageIdBeyondEndError past the end."""
        ...

    async def trigger_compaction(self, topic: str) -> None:
        """Ask for a run; raises CompactionConflictError while one is running."""
        ...

    async def compaction_status(self, topic: str) -> dict[str, Any]:
        """{"status": NOT_RUN|RUNNING|SUCCESS|ERROR, "lastError": str, ...times and counts}."""
        ...

    # --- Kafka consumer groups' committed offsets (topics.group_offsets) --------------------------
    async def commit_group_offsets(self, offsets: Sequence[GroupOffset]) -> None:
        """Store the offsets (topics `tenant/ns/topic`), all in one transaction; last writer wins."""
        ...

    async def group_offsets(self, group: str, topics: Collection[str] | None = None) -> list[GroupOffset]:
        """The group's committed offsets, of every topic or of `topics`, by topic and partition."""
        ...

    async def list_groups(self) -> list[str]:
        """Every group with a committed offset, sorted."""
        ...

    async def delete_group_offsets(self, group: str) -> int:
        """Delete the group's offsets; how many there were."""
        ...

    # --- schemas (topics.schemas) -------------------------------------------------------------------
    async def get_schema(self, topic: str, version: int | None = None) -> SchemaVersion:
        """The topic's latest live schema, or that version (SchemaNotFoundError: none)."""
        ...

    async def schema_versions(self, topic: str) -> list[SchemaVersion]:
        """The topic's live schema versions, oldest first."""
        ...

    async def put_schema(
        self, topic: str, schema_type: str, data: bytes, properties: Mapping[str, str]
    ) -> int:
        """The schema's version: an equal live one's, or a new one the namespace's strategy lets
        in (IncompatibleSchemaError: refused; InvalidSchemaError: not a schema)."""
        ...

    async def check_schema(self, topic: str, schema_type: str, data: bytes) -> None:
        """IncompatibleSchemaError when the strategy would refuse this schema (nothing stored)."""
        ...

    async def delete_schema(self, topic: str) -> int:
        """Mark the topic's schema deleted; the mark's version."""
        ...

    async def get_schema_compatibility(self, namespace: str) -> str:
        """The namespace's schemaCompatibilityStrategy (FULL when unset)."""
        ...

    async def set_schema_compatibility(self, namespace: str, strategy: str) -> None: ...


class ClusterApi(Protocol):
    """The broker as a member of its cluster and a process: ownership, the metrics snapshot,
    readiness and lifecycle."""

    async def lookup(self, topic: str) -> BrokerInfo | None:
        """The owner of the topic (assigned now if none); None: this broker."""
        ...

    async def brokers(self) -> list[BrokerRecord]: ...

    async def handover(self) -> None:
        """Hand every topic over to other brokers (close, then release): a graceful stop."""
        ...

    def ownership_stats(self) -> dict[str, int]: ...

    def metrics_snapshot(self) -> Sequence[TopicSample]:
        """Every open topic's figures for the metrics endpoint, read without I/O."""
        ...

    async def ready(self) -> dict[str, bool]:
        """{"metadata": bool, "bookies": bool} for /readyz."""
        ...

    async def start(self) -> None:
        """Start background work; the app calls it once before serving (a second call does nothing)."""
        ...

    async def close(self) -> None: ...


class KafkaApi(Protocol):
    """What the Kafka listener's data and offset handlers ask of topics (topics.kafka_ops)."""

    async def kafka_partitions(self, topic: str) -> int:
        """The topic's Kafka partition count (a non-partitioned topic has one); TopicNotFoundError."""
        ...

    async def kafka_policies(self, topic: str) -> TopicPolicies:
        """The topic's effective policies (DescribeConfigs shows them as Kafka configs)."""
        ...

    async def kafka_produce(self, topic: str, partition: int, batch: KafkaBatch) -> int:
        """Store the batch through the topic's one publish path; its first record's offset."""
        ...

    async def kafka_fetch(self, topic: str, partition: int, offset: int, max_bytes: int) -> KafkaFetched: ...

    def kafka_arm(self, topic: str) -> asyncio.Future[None] | None:
        """A future that completes at the topic's next produce (None: not open here)."""
        ...

    async def kafka_list_offset(self, topic: str, partition: int, timestamp_ms: int) -> tuple[int, int]: ...

    async def kafka_delete_records(self, topic: str, partition: int, offset: int) -> int: ...


class TopicsApi(DataApi, AdminApi, ClusterApi, KafkaApi, Protocol):
    """The whole topics service, for the process that serves every door
    (`topics.service.TopicService` implements it)."""
