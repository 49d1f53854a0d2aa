"""Errors of the topics layer. Root: `TopicsError`; one class per case, each with a short `title`,
a stable `code`, and the fields that help the caller (`limit`, `topic`, `subscription`, ...).

The domain never raises HTTP errors: each class sets its `kind`, and the HTTP status follows the
kind.
"""

from __future__ import annotations

from common.errors import ErrorKind, QuireError


class TopicsError(QuireError):
    """Root of the topics layer's errors."""

    title = "Topics error"
    code = "topics-error"
    kind = ErrorKind.internal


# --- bad input --------------------------------------------------------------------------------
class InvalidArgumentError(TopicsError):
    title = "Invalid argument"
    code = "invalid-argument"
    kind = ErrorKind.invalid


class InvalidNameError(InvalidArgumentError):
    title = "Invalid name"
    code = "invalid-name"

    def __init__(self, name: str, reason: str) -> None:
        super().__init__(f"invalid name {name!r}: {reason}")
        self.name = name
        self.reason = reason


class InvalidMessageIdError(InvalidArgumentError):
    title = "Invalid message id"
    code = "invalid-message-id"


class InvalidPolicyError(InvalidArgumentError):
    title = "Invalid policy"
    code = "invalid-policy"

    def __init__(self, policy: str, reason: str) -> None:
        super().__init__(f"invalid policy {policy}: {reason}")
        self.policy = policy
        self.reason = reason


# --- a read asks for more than its cap (400) ---------------------------------------------------
class WaitTooLongError(TopicsError):
    """`wait_ms` over the cap: a well-formed request the broker refuses rather than shortens."""

    title = "Wait too long"
    code = "wait-too-long"
    kind = ErrorKind.bad_request

    def __init__(self, wait_ms: int, limit: int) -> None:
        super().__init__(f"wait_ms={wait_ms} is over the cap of {limit} ms (setting max_wait_ms)")
        self.wait_ms = wait_ms
        self.limit = limit


class TooManyMessagesRequestedError(TopicsError):
    """`max_messages` over the cap: refused, never silently clamped, so a caller learns the cap."""

    title = "Too many messages requested"
    code = "too-many-messages-requested"
    kind = ErrorKind.bad_request

    def __init__(self, max_messages: int, limit: int) -> None:
        super().__init__(
            f"max_messages={max_messages} is over the cap of {limit} (setting max_messages_per_read)"
        )
        self.max_messages = max_messages
        self.limit = limit


# --- not found (404) --------------------------------------------------------------------------
class TenantNotFoundError(TopicsError):
    title = "Tenant not found"
    code = "tenant-not-found"
    kind = ErrorKind.not_found

    def __init__(self, tenant: str) -> None:
        super().__init__(f"tenant {tenant} does not exist")
        self.tenant = tenant


class NamespaceNotFoundError(TopicsError):
    title = "Namespace not found"
    code = "namespace-not-found"
    kind = ErrorKind.not_found

    def __init__(self, namespace: str) -> None:
        super().__init__(f"namespace {namespace} does not exist")
        self.namespace = namespace


class TopicNotFoundError(TopicsError):
    title = "Topic not found"
    code = "topic-not-found"
    kind = ErrorKind.not_found

    def __init__(self, topic: str, why: str = "") -> None:
        super().__init__(f"topic {topic} does not exist{': ' + why if why else ''}")
        self.topic = topic


class SubscriptionNotFoundError(TopicsError):
    title = "Subscription not found"
    code = "subscription-not-found"
    kind = ErrorKind.not_found

    def __init__(self, topic: str, subscription: str) -> None:
        super().__init__(f"subscription {subscription} of topic {topic} does not exist")
        self.topic = topic
        self.subscription = subscription


class MessageNotFoundError(TopicsError):
    title = "Message not found"
    code = "message-not-found"
    kind = ErrorKind.not_found

    def __init__(self, topic: str, message_id: str) -> None:
        super().__init__(f"no message {message_id} in topic {topic} (never written, or trimmed)")
        self.topic = topic
        self.message_id = message_id


class GroupNotFoundError(TopicsError):
    """A Kafka consumer group with no committed offset (and no member on this broker)."""

    title = "Group not found"
    code = "group-not-found"
    kind = ErrorKind.not_found

    def __init__(self, group: str) -> None:
        super().__init__(f"Kafka consumer group {group!r} has no committed offsets and no members")
        self.group = group


# --- conflicts --------------------------------------------------------------------------------
class GroupNotEmptyError(TopicsError):
    """Deleting a Kafka consumer group that still has members (its coordinator knows them)."""

    title = "Group not empty"
    code = "group-not-empty"
    kind = ErrorKind.conflict

    def __init__(self, group: str, members: int) -> None:
        super().__init__(
            f"Kafka consumer group {group!r} still has {members} member(s); stop its consumers first"
        )
        self.group = group
        self.members = members


class TenantExistsError(TopicsError):
    title = "Tenant already exists"
    code = "tenant-exists"
    kind = ErrorKind.conflict


class NamespaceExistsError(TopicsError):
    title = "Namespace already exists"
    code = "namespace-exists"
    kind = ErrorKind.conflict


class TopicExistsError(TopicsError):
    title = "Topic already exists"
    code = "topic-exists"
    kind = ErrorKind.conflict

    def __init__(self, topic: str) -> None:
        super().__init__(f"topic {topic} already exists")
        self.topic = topic


class PartitionCountError(TopicsError):
    """A partition count that cannot be set: the topic is not partitioned, or the count would
    not grow (partitions are never removed, as in Pulsar)."""

    title = "Partition count cannot change so"
    code = "partitions-not-increased"
    kind = ErrorKind.conflict


class SubscriptionExistsError(TopicsError):
    title = "Subscription already exists"
    code = "subscription-exists"
    kind = ErrorKind.conflict

    def __init__(self, topic: str, subscription: str) -> None:
        super().__init__(f"subscription {subscription} of topic {topic} already exists")
        self.topic = topic
        self.subscription = subscription


class TenantNotEmptyError(TopicsError):
    title = "Tenant not empty"
    code = "tenant-not-empty"
    kind = ErrorKind.conflict


class NamespaceNotEmptyError(TopicsError):
    title = "Namespace not empty"
    code = "namespace-not-empty"
    kind = ErrorKind.conflict


class TopicBusyError(TopicsError):
    """Deleting a topic that still has subscriptions, without force."""

    title = "Topic has subscriptions"
    code = "topic-busy"
    kind = ErrorKind.conflict

    def __init__(self, topic: str, subscriptions: list[str]) -> None:
        super().__init__(
            f"topic {topic} still has subscriptions {subscriptions}; delete them or pass force=true"
        )
        self.topic = topic
        self.subscriptions = subscriptions


class ConsumerBusyError(TopicsError):
    title = "Exclusive subscription busy"
    code = "consumer-busy"
    kind = ErrorKind.conflict

    def __init__(self, topic: str, subscription: str, owner: str, reason: str | None = None) -> None:
        if reason is None:
            text = f"subscription {subscription} of topic {topic} is exclusive and consumer {owner!r}"
            text += " holds it"
        else:  # key_shared: the live consumers' policy differs
            text = f"subscription {subscription} of topic {topic}: consumer {owner!r} has {reason}"
        super().__init__(text)
        self.topic = topic
        self.subscription = subscription


class ConsumerAssignError(TopicsError):
    """A key_shared consumer's hash ranges cannot be given it (Pulsar's ConsumerAssignError):
    out of bounds, none for a sticky consumer, or overlapping another live consumer's."""

    title = "Key_shared hash ranges refused"
    code = "consumer-assign"
    kind = ErrorKind.conflict


class ConsumerIdRequiredError(InvalidArgumentError):
    title = "Consumer id required"
    code = "consumer-id-required"

    def __init__(self, topic: str, subscription: str, kind: str) -> None:
        super().__init__(
            f"subscription {subscription} of topic {topic} is {kind}: it hands messages to consumers "
            "by id, so pass consumer_id"
        )
        self.topic = topic
        self.subscription = subscription


class CompactionConflictError(TopicsError):
    title = "Compaction already running"
    code = "compaction-running"
    kind = ErrorKind.conflict

    def __init__(self, topic: str) -> None:
        super().__init__(f"a compaction of topic {topic} is already running")
        self.topic = topic


# --- too large --------------------------------------------------------------------------------
class MessageTooLargeError(TopicsError):
    title = "Message too large"
    code = "message-too-large"
    kind = ErrorKind.too_large

    def __init__(self, index: int, size: int, limit: int) -> None:
        super().__init__(
            f"messages[{index}] is {size} bytes, over the limit of {limit} (setting max_message_size_bytes)"
        )
        self.index = index
        self.size = size
        self.limit = limit


class BatchTooLargeError(TopicsError):
    title = "Batch too large"
    code = "batch-too-large"
    kind = ErrorKind.too_large

    def __init__(self, what: str, size: int, limit: int, setting: str) -> None:
        super().__init__(f"batch is {size} {what}, over the limit of {limit} (setting {setting})")
        self.size = size
        self.limit = limit


# --- over a limit on the state a request would add to (429) -------------------------------------
class BacklogQuotaExceededError(TopicsError):
    """A produce refused by a backlog quota (`producer_exception`, or `producer_request_hold`
    after its hold timed out): nothing of the batch was written. Retry once consumers caught up."""

    title = "Backlog quota exceeded"
    code = "backlog-quota-exceeded"
    kind = ErrorKind.throttled
    retriable = True

    def __init__(self, topic: str, quota_type: str, policy: str, limit: int, what: str) -> None:
        super().__init__(
            f"topic {topic} is over its {quota_type} backlog quota of {limit} {what} "
            f"(policy {policy}); nothing of this batch was written; retry once consumers catch up"
        )
        self.topic = topic
        self.quota_type = quota_type
        self.policy = policy
        self.limit = limit


# --- the storage below failed -------------------------------------------------------------------
class DeadLetterForwardError(TopicsError):
    """The broker that owns a dead-letter topic did not take the messages (tried again later)."""

    title = "Dead-letter topic unavailable"
    code = "dead-letter-unavailable"
    kind = ErrorKind.unavailable
    retriable = True


class StorageUnavailableError(TopicsError):
    title = "Storage unavailable"
    code = "storage-unavailable"
    kind = ErrorKind.unavailable
    retriable = True


class WriteInFlightError(TopicsError):
    """With dedup on, a produce batch holds a sequence id whose earlier write is in flight, or
    failed and is not yet resolved: whether that message is stored is not known yet. The whole
    batch is refused and nothing is written; a retry later is answered stored or duplicate."""

    title = "Write in flight"
    code = "write-in-flight"
    kind = ErrorKind.unavailable
    retriable = True

    def __init__(self, topic: str, producer_name: str, sequence_id: int) -> None:
        super().__init__(
            f"a write of sequence id {sequence_id} of producer {producer_name!r} to topic {topic} is "
            "in flight or not yet resolved; nothing of this batch was written; retry later"
        )
        self.topic = topic
        self.producer_name = producer_name
        self.sequence_id = sequence_id


# --- ownership: another broker serves the topic (307), or none can now (503) -------------------
class NotOwnerError(TopicsError):
    """The topic is owned by another broker: the request goes to `owner_url` (same path)."""

    title = "Topic owned by another broker"
    code = "not-owner"
    kind = ErrorKind.elsewhere

    def __init__(self, topic: str, owner_id: str, owner_url: str) -> None:
        super().__init__(f"topic {topic} is served by broker {owner_id} at {owner_url}")
        self.topic = topic
        self.owner_id = owner_id
        self.owner_url = owner_url


class OwnershipUnavailableError(TopicsError):
    """This broker cannot take topics now (its lease lapsed and it is registering again, or it
    is shutting down and no other broker is live): retry, here or at another broker."""

    title = "Ownership unavailable"
    code = "ownership-unavailable"
    kind = ErrorKind.unavailable
    retriable = True


# --- terminate and truncate-before (topics.topic_ops) -------------------------------------------
class TopicTerminatedError(TopicsError):
    """The topic was terminated (Pulsar's TopicTerminatedError): it takes no message again."""

    title = "Topic terminated"
    code = "topic-terminated"
    kind = ErrorKind.conflict

    def __init__(self, topic: str) -> None:
        super().__init__(f"topic {topic} is terminated: it takes no new message")
        self.topic = topic


class MessageIdBeyondEndError(InvalidArgumentError):
    """truncateBefore past the end of the topic (Kafka's OFFSET_OUT_OF_RANGE)."""

    title = "Message id beyond the end"
    code = "message-id-beyond-end"

    def __init__(self, topic: str, message_id: str, end: str) -> None:
        super().__init__(
            f"message id {message_id} is beyond the end of topic {topic} (the next message would be {end})"
        )
        self.topic = topic
        self.message_id = message_id


# --- the Kafka listener's cases (topics.kafka_ops) ------------------------------------------------
class UnknownPartitionError(TopicsError):
    """A Kafka partition the topic does not have (UNKNOWN_TOPIC_OR_PARTITION)."""

    title = "Unknown partition"
    code = "unknown-partition"
    kind = ErrorKind.not_found

    def __init__(self, topic: str, partition: int) -> None:
        super().__init__(f"topic {topic} has no partition {partition}")
        self.topic = topic
        self.partition = partition


class OffsetOutOfRangeError(InvalidArgumentError):
    """A Kafka offset outside [log start, high watermark] (OFFSET_OUT_OF_RANGE)."""

    title = "Offset out of range"
    code = "offset-out-of-range"

    def __init__(self, topic: str, partition: int, offset: int, start: int, end: int) -> None:
        super().__init__(
            f"offset {offset} is outside partition {partition} of topic {topic} "
            f"(its offsets are {start}..{end})"
        )
        self.offset = offset
        self.start = start
        self.end = end


class KafkaSequenceError(TopicsError):
    """An idempotent producer's batch out of turn: `reason` is "epoch" (an older producer epoch:
    INVALID_PRODUCER_EPOCH), "duplicate" (written before: DUPLICATE_SEQUENCE_NUMBER) or "gap"
    (a sequence skipped: OUT_OF_ORDER_SEQUENCE_NUMBER) or "unknown" (before anything this
    owner knows stored, e.g. a batch lost in an owner change with dedup off:
    OUT_OF_ORDER_SEQUENCE_NUMBER, never a duplicate). Nothing of the batch was written."""

    title = "Producer sequence out of turn"
    code = "producer-sequence"
    kind = ErrorKind.conflict

    def __init__(self, reason: str, producer: str, value: int) -> None:
        super().__init__(f"{producer}: {reason} at {value}; nothing of the batch was written")
        self.reason = reason


# --- schemas (topics.schemas) -------------------------------------------------------------------
class SchemaNotFoundError(TopicsError):
    title = "Schema not found"
    code = "schema-not-found"
    kind = ErrorKind.not_found

    def __init__(self, topic: str, version: int | None = None) -> None:
        which = "a schema" if version is None else f"schema version {version}"
        super().__init__(f"topic {topic} has no {which}")
        self.topic = topic
        self.version = version


class InvalidSchemaError(InvalidArgumentError):
    """The definition is not a schema of its declared type, or the type is unknown."""

    title = "Invalid schema"
    code = "invalid-schema"


class IncompatibleSchemaError(TopicsError):
    """A new schema the namespace's schemaCompatibilityStrategy refuses (Pulsar's
    IncompatibleSchema)."""

    title = "Incompatible schema"
    code = "incompatible-schema"
    kind = ErrorKind.conflict

    def __init__(self, topic: str, strategy: str, reason: str) -> None:
        super().__init__(f"schema of {topic} refused by {strategy}: {reason}")
        self.topic = topic
        self.strategy = strategy
        self.reason = reason
