"""Pydantic models of the REST contract (docs/rest-api.md), for the OpenAPI spec and the cold paths.

The hot paths (produce, receive, ack) do not run these models per request: `app.codec` parses
and builds those bodies with orjson, and these models only document them. One model serves as
both input and output schema (`separate_input_output_schemas=False`), so the generated client
has one class per shape.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, StrictFloat, StrictInt


class ValueEncoding(StrEnum):
    """How a value is written in JSON. On reads, `text` means: text when the payload is UTF-8."""

    text = "text"
    base64 = "base64"


MESSAGE_ID_EXAMPLE = "12:40:0"


class Problem(BaseModel):
    """RFC 9457 problem details; extra fields (e.g. `limit`) may follow."""

    model_config = ConfigDict(extra="allow")

    type: str = Field(examples=["https://quire.dev/problems/message-too-large"])
    title: str = Field(examples=["Message too large"])
    status: int = Field(examples=[413])
    detail: str = Field(examples=["message 0 is 6291456 bytes, over the limit of 5242880"])


class ProduceMessage(BaseModel):
    key: str | None = Field(None, examples=["AAPL"], description="absent or null: a key-less message")
    value: str | None = Field(
        None, examples=["189.20"], description="absent or empty: an empty payload (a tombstone for its key)"
    )
    value_encoding: ValueEncoding = Field(ValueEncoding.text, description="how `value` is written")
    properties: dict[str, str] | None = Field(None, examples=[{"src": "feed"}])
    event_time: int | None = Field(None, ge=0, examples=[1763700000000], description="ms since the epoch")
    sequence_id: int | None = Field(None, ge=0, examples=[17], description="for deduplication")


class ProduceRequest(BaseModel):
    model_config = ConfigDict(
        json_schema_extra={
            "examples": [
                {
                    "producer_name": "ticker-1",
                    "messages": [
                        {
                            "key": "AAPL",
                            "value": "189.20",
                            "value_encoding": "text",
                            "properties": {"src": "feed"},
                            "event_time": 1763700000000,
                            "sequence_id": 17,
                        }
                    ],
                }
            ]
        }
    )

    producer_name: str | None = Field(None, examples=["ticker-1"])
    messages: list[ProduceMessage] = Field(min_length=1)


class ProduceResult(BaseModel):
    message_id: str | None = Field(examples=[MESSAGE_ID_EXAMPLE], description="null for a duplicate")
    duplicate: bool = False


class ProduceResponse(BaseModel):
    results: list[ProduceResult]


class MessageOut(BaseModel):
    message_id: str = Field(examples=[MESSAGE_ID_EXAMPLE])
    key: str | None = Field(None, examples=["AAPL"])
    value: str = Field(examples=["189.20"])
    value_encoding: ValueEncoding = ValueEncoding.text
    properties: dict[str, str] = Field(default_factory=dict, examples=[{"src": "feed"}])
    event_time: int | None = Field(None, examples=[1763700000000])
    publish_time: int = Field(examples=[1763700000123])
    producer_name: str | None = Field(None, examples=["ticker-1"])
    sequence_id: int | None = Field(None, examples=[17])
    redelivery_count: int = 0


END_OF_TOPIC = "the topic is terminated and nothing of it is left to receive (or to read)"


class MessageList(BaseModel):
    messages: list[MessageOut]
    end_of_topic: bool = Field(False, description=END_OF_TOPIC)


class ReadPage(BaseModel):
    messages: list[MessageOut]
    next: str | None = Field(examples=["after:12:40:0"], description="pass back as `start`; null at the end")
    end_of_topic: bool = Field(False, description=END_OF_TOPIC)


class LastMessageId(BaseModel):
    message_id: str | None = Field(examples=[MESSAGE_ID_EXAMPLE])


class SubscriptionRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    initial_position: Literal["latest", "earliest"] = "latest"
    type: Literal["shared", "exclusive", "failover", "key_shared"] = Field(
        "shared",
        description="shared: any consumer; exclusive: one consumer_id; failover: one active consumer, "
        "the next takes over when it goes silent; key_shared: each key to one consumer, in order. "
        "All but shared need consumer_id when receiving.",
    )
    read_compacted: bool = False
    ack_timeout_ms: int | None = Field(None, gt=0, examples=[30000], description="default: the broker's")
    max_redeliveries: int = Field(
        0,
        ge=0,
        examples=[3],
        description="a message is delivered at most max_redeliveries + 1 times, then written to the "
        "dead-letter topic and acked here; 0: no limit",
    )
    dead_letter_topic: str | None = Field(
        None,
        examples=["public/default/orders-sub-a-DLQ"],
        description="tenant/namespace/topic; default: {topic}-{subscription}-DLQ",
    )


class SubscriptionCreated(BaseModel):
    subscription: str = Field(examples=["sub-a"])
    created: bool = Field(description="false: it was already there (and is unchanged)")


class AckRequest(BaseModel):
    """Either `message_ids` (individual acks) or `cumulative` (everything up to that id)."""

    message_ids: list[str] | None = Field(None, examples=[["12:40:0", "12:41:0"]])
    cumulative: str | None = Field(None, examples=[MESSAGE_ID_EXAMPLE])


class NackRequest(BaseModel):
    message_ids: list[str] = Field(examples=[["12:40:0"]])


class SeekRequest(BaseModel):
    """Either `message_id` (an id, `earliest` or `latest`) or `timestamp` (publish time, ms)."""

    message_id: str | None = Field(None, examples=["earliest"])
    timestamp: int | None = Field(None, ge=0, examples=[1763700000000])


class Partitions(BaseModel):
    partitions: int = Field(examples=[4])


class RetentionPolicy(BaseModel):
    retentionTimeInMinutes: int = Field(ge=-1, examples=[60])
    retentionSizeInMB: int = Field(ge=-1, examples=[-1])


class RolloverPolicy(BaseModel):
    maxEntriesPerLedger: int = Field(gt=0, examples=[50000])
    maxSizePerLedgerBytes: int = Field(gt=0, examples=[2147483648])
    minRolloverTimeMs: int = Field(ge=0, examples=[600000])
    maxRolloverTimeMs: int = Field(gt=0, examples=[14400000])


class RetentionPolicyUpdate(BaseModel):
    """Retention as posted (topic or namespace): the fields left out keep their effective value.
    Pulsar's ranges: -1 is unlimited, 0 keeps nothing once consumed."""

    model_config = ConfigDict(extra="forbid")

    retentionTimeInMinutes: int | None = Field(None, ge=-1, examples=[60])
    retentionSizeInMB: int | None = Field(None, ge=-1, examples=[-1])


class RolloverPolicyUpdate(BaseModel):
    """A rollover policy as posted (topic or namespace): the fields left out keep their effective
    value."""

    model_config = ConfigDict(extra="forbid")

    maxEntriesPerLedger: int | None = Field(None, gt=0, examples=[50000])
    maxSizePerLedgerBytes: int | None = Field(None, gt=0, examples=[2147483648])
    minRolloverTimeMs: int | None = Field(None, ge=0, examples=[600000])
    maxRolloverTimeMs: int | None = Field(None, gt=0, examples=[14400000])


class KeylessPolicy(StrEnum):
    """What compaction does with key-less messages: drop them all, or keep them all."""

    drop = "drop"
    keep = "keep"


class CompactionPolicy(BaseModel):
    """A topic's compaction policy: key-less messages, tombstone retention in the compacted view
    (Kafka's delete.retention.ms) and two triggers besides the threshold; 0 = off for each."""

    keylessPolicy: KeylessPolicy = Field(
        examples=["drop"], description="key-less messages: dropped by compaction, or all kept"
    )
    deleteRetentionMs: int = Field(
        ge=0,
        examples=[86400000],
        description="a tombstone stays in the compacted view this long after it was published "
        "(0: dropped at once)",
    )
    maxLagMs: int = Field(
        ge=0,
        examples=[600000],
        description="request a run when the oldest message after the horizon is older than this",
    )
    minCleanableDirtyRatio: float = Field(
        ge=0.0,
        le=1.0,
        examples=[0.5],
        description="request a run when the bytes after the horizon pass this share of the "
        "compacted view plus them",
    )


class CompactionPolicyUpdate(BaseModel):
    """A compaction policy as posted: the fields left out (or null) keep the scope's own value,
    else the next level's (topic > namespace > settings). Types are strict: `"5"` is not 5."""

    model_config = ConfigDict(extra="forbid")

    keylessPolicy: KeylessPolicy | None = Field(None, examples=["keep"])
    deleteRetentionMs: StrictInt | None = Field(None, ge=0, le=2**63 - 1, examples=[86400000])
    maxLagMs: StrictInt | None = Field(None, ge=0, le=2**63 - 1, examples=[600000])
    minCleanableDirtyRatio: StrictFloat | None = Field(None, ge=0.0, le=1.0, examples=[0.5])


QuotaPolicy = Literal["producer_request_hold", "producer_exception", "consumer_backlog_eviction"]
BacklogQuotaType = Literal["destination_storage", "message_age"]


class BacklogQuota(BaseModel):
    """Pulsar's backlog quota, as GET answers it. `destination_storage` has `limitSize`,
    `message_age` has `limitTime`; the other limit is kept as given but does not apply to that
    type. A limit that is not set is null."""

    limitSize: int | None = Field(
        None,
        ge=0,
        le=2**63 - 1,
        examples=[10485760],
        description="bytes of the slowest subscription's backlog",
    )
    limitTime: int | None = Field(
        None, ge=0, le=10**10, examples=[3600], description="seconds: age of its oldest unacked message"
    )
    policy: QuotaPolicy = Field(examples=["producer_exception"])


class BacklogQuotaUpdate(BaseModel):
    """A backlog quota as posted, in Pulsar's ranges (what pulsar-admin sends): `limitSize` -1 and
    a `limitTime` of 0 or less mean "no such limit". The fields left out (or null) keep the value
    of the quota of that type in effect (the scope's own, else the namespace's); with none in
    effect, `policy` and the type's own limit are needed."""

    model_config = ConfigDict(extra="forbid")

    limitSize: int | None = Field(
        None, ge=-1, le=2**63 - 1, examples=[10485760],
        description="bytes of the slowest subscription's backlog; -1: no size limit",
    )  # fmt: skip
    limitTime: int | None = Field(
        None, ge=-(2**31), le=10**10, examples=[3600],
        description="seconds: age of its oldest unacked message; 0 or less: no time limit",
    )  # fmt: skip
    policy: QuotaPolicy | None = Field(None, examples=["producer_exception"])


class BacklogQuotaMap(BaseModel):
    """The effective quotas by type; a type not set anywhere is left out."""

    destination_storage: BacklogQuota | None = None
    message_age: BacklogQuota | None = None


class BacklogQuotaEvents(BaseModel):
    """Backlog quota events of the topic since it was opened on this broker: produces held
    (producer_request_hold), produces refused (producer_exception, or a hold that timed out),
    cursors moved forward by consumer_backlog_eviction (one per subscription and partition)."""

    held: int = 0
    refused: int = 0
    evicted: int = 0


class CompactionStatus(BaseModel):
    model_config = ConfigDict(extra="allow")

    status: Literal["NOT_RUN", "RUNNING", "SUCCESS", "ERROR"]
    lastError: str = ""


class ClientStats(BaseModel):
    """A producer (`producerName`) or consumer (`consumerName`) heard within the idle time; over
    HTTP a client is a name, not a connection. Rates are over the last stats interval."""

    model_config = ConfigDict(extra="allow")

    msgCounter: int = Field(description="messages produced (or delivered) since it was first heard")
    bytesCounter: int
    averageMsgSize: float
    connectedSince: int = Field(description="when it was first heard (ms since the epoch)")
    lastSeenTimestamp: int = Field(description="when it was last heard (ms since the epoch)")


class PublisherStats(ClientStats):
    producerName: str
    msgRateIn: float
    msgThroughputIn: float


class ConsumerStats(ClientStats):
    consumerName: str | None = Field(description="its consumer_id; null: requests that sent none")
    msgRateOut: float
    msgThroughputOut: float


class SubscriptionStats(BaseModel):
    model_config = ConfigDict(extra="allow")

    type: str = Field(examples=["shared"])
    msgBacklog: int = Field(description="messages not acked, delivered or not (not entries)")
    unackedMessages: int = Field(description="messages delivered and not acked yet")
    msgRateOut: float = 0.0
    msgThroughputOut: float = 0.0
    msgOutCounter: int = 0
    bytesOutCounter: int = 0
    msgRateRedeliver: float = 0.0
    msgRedeliverCounter: int = 0
    msgRateExpired: float = 0.0
    totalMsgExpired: int = 0
    msgDeadLettered: int = Field(0, description="messages written to its dead-letter topic")
    consumers: list[ConsumerStats] = Field(default_factory=list)


class CompactionStats(BaseModel):
    model_config = ConfigDict(extra="allow")

    lastCompactionRemovedEventCount: int = 0
    lastCompactionSucceedTimestamp: int = 0
    lastCompactionFailedTimestamp: int = 0
    lastCompactionDurationTimeInMills: int = 0


class _RatesAndCounters(BaseModel):
    model_config = ConfigDict(extra="allow")

    msgRateIn: float = Field(0.0, description="messages per second stored, over the last stats interval")
    msgThroughputIn: float = Field(0.0, description="bytes per second stored")
    msgRateOut: float = Field(0.0, description="messages per second delivered to subscriptions and readers")
    msgThroughputOut: float = Field(0.0, description="bytes per second delivered")
    msgInCounter: int
    bytesInCounter: int
    msgOutCounter: int = 0
    bytesOutCounter: int = 0
    averageMsgSize: float = 0.0
    storageSize: int
    backlogSize: int = Field(description="bytes stored after the slowest subscription's position")


class PartitionStats(_RatesAndCounters):
    subscriptions: dict[str, SubscriptionStats] = Field(title="SubscriptionsOfPartition")


class _TopicLevelStats(_RatesAndCounters):
    ownerBroker: str | None = Field(
        None, examples=["127.0.0.1:8080"], description="the broker that owns the topic and answered"
    )
    publishers: list[PublisherStats] = Field(default_factory=list)
    compaction: CompactionStats
    backlogQuotaEvents: BacklogQuotaEvents = Field(default_factory=BacklogQuotaEvents)


class TopicStats(_TopicLevelStats):
    subscriptions: dict[str, SubscriptionStats]
    partitions: int = Field(0, description="number of partitions; 0: not partitioned")


class PartitionedTopicStats(_TopicLevelStats):
    """Pulsar's partitioned-stats: the sum over the partitions, and each partition's own."""

    subscriptions: dict[str, SubscriptionStats] = Field(title="SubscriptionsOfPartitionedTopic")
    metadata: PartitionedMetadata
    partitions: dict[str, PartitionStats] = Field(
        title="StatsByPartition", description="partition name -> stats"
    )


class LedgerInfo(BaseModel):
    model_config = ConfigDict(extra="allow")

    ledgerId: int
    entries: int
    size: int
    timestamp: int
    underReplicated: bool = Field(
        False, description="some of its copies are on a lost or decommissioning bookie (being replaced)"
    )
    ensembles: dict[str, list[str]] = Field(
        default_factory=dict,
        examples=[{"0": ["127.0.0.1:3181", "127.0.0.1:3182"]}],
        description="its ensemble history: first entry id -> the bookies from that entry on",
    )
    writeQuorum: int | None = Field(
        None, examples=[2], description="copies of each entry (absent when the ledger was just deleted)"
    )
    ackQuorum: int | None = Field(None, examples=[2], description="copies that acknowledged each entry")


class CursorStats(BaseModel):
    model_config = ConfigDict(extra="allow")

    markDeletePosition: str
    readPosition: str
    individuallyDeletedMessages: str


class CompactedLedgerInfo(BaseModel):
    model_config = ConfigDict(extra="allow")

    ledgerId: int = -1
    entries: int = -1
    size: int = -1


class InternalStats(BaseModel):
    model_config = ConfigDict(extra="allow")

    entriesAddedCounter: int
    numberOfEntries: int
    totalSize: int
    currentLedgerEntries: int
    currentLedgerSize: int
    lastConfirmedEntry: str
    ledgers: list[LedgerInfo]
    cursors: dict[str, CursorStats]
    compactedLedger: CompactedLedgerInfo
    compactionHorizon: str | None = None


class PartitionedMetadata(BaseModel):
    partitions: int = Field(examples=[4])


class PartitionedInternalStats(BaseModel):
    """A partitioned topic's internalStats, as Pulsar's partitioned-internalStats: one entry per
    partition's managed ledger, keyed by the partition's name."""

    metadata: PartitionedMetadata
    partitions: dict[str, InternalStats] = Field(title="InternalStatsByPartition")


class AuthAction(StrEnum):
    """Pulsar's AuthAction values that mean something in Quire: what a role may do in a namespace."""

    produce = "produce"
    consume = "consume"


class TenantInfo(BaseModel):
    """Pulsar's TenantInfo: the roles that administer the tenant (its namespaces, topics, policies
    and permissions), and the clusters it may use (stored and shown; Quire is one cluster)."""

    model_config = ConfigDict(populate_by_name=True)

    admin_roles: list[str] = Field(
        default_factory=list, alias="adminRoles", max_length=1000, examples=[["acme-admin"]]
    )
    allowed_clusters: list[str] = Field(
        default_factory=list, alias="allowedClusters", max_length=1000, examples=[["standalone"]]
    )


class Tenant(BaseModel):
    model_config = ConfigDict(populate_by_name=True)

    name: str = Field(examples=["public"])
    namespaces: list[str] = Field(examples=[["public/default"]])
    admin_roles: list[str] = Field(default_factory=list, alias="adminRoles", examples=[["acme-admin"]])
    allowed_clusters: list[str] = Field(
        default_factory=list, alias="allowedClusters", examples=[["standalone"]]
    )


class Namespace(BaseModel):
    name: str = Field(examples=["public/default"])
    topics: list[str] = Field(examples=[["persistent://public/default/prices"]])


class Health(BaseModel):
    status: str = Field(examples=["ok"])


class Readiness(BaseModel):
    ready: bool
    checks: dict[str, bool] = Field(examples=[{"metadata": True, "bookies": True}])


class MessageIdBody(BaseModel):
    model_config = ConfigDict(extra="forbid")

    messageId: str = Field(examples=["12:40:0"], description="ledger:entry:batch_index")


class TerminateResult(BaseModel):
    messageId: str | None = Field(
        examples=["12:40:0"], description="the last message's id; null when the topic held none"
    )
    partitions: dict[str, str] = Field(
        default_factory=dict,
        title="PartitionLastMessageIds",
        description="a partitioned topic: each partition's last message id (an empty one is left out)",
    )
