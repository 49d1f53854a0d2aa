"""What each operation of the REST API needs, by operation id: one table, Pulsar's rules.

Pulsar's authorization provider (PulsarAuthorizationProvider) decides the same way:

- a super-user (QUIRE_SUPER_USER_ROLES) may do everything;
- a tenant's admin (its `adminRoles`) may do everything in the tenant: namespaces, topics,
  policies, compaction, truncation, subscriptions, permissions;
- any other role needs a permission on the namespace: `produce` to produce; `consume` for
  everything that reads or moves a subscription or reads messages (Pulsar's CONSUME, SUBSCRIBE,
  UNSUBSCRIBE, PEEK_MESSAGES, SKIP, EXPIRE_MESSAGES, RESET_CURSOR, GET_SUBSCRIPTIONS; a reader is
  a consumer without a subscription); either of the two to look a topic up, list the
  namespace's topics or read a topic's stats (Pulsar's LOOKUP, GET_TOPICS, GET_STATS);
- the rest is administration: tenant-admin (topics' lifecycle, policies, compaction, truncation,
  namespaces, permissions) or super-user only (tenants, brokers, bookies, Kafka consumer groups,
  whose offsets may span namespaces).

Every operation the app serves must have a row (app.auth.gate refuses to build otherwise, and
tests/api/test_auth_matrix.py checks each row against the spec), so a new route cannot be served
without a decision about who may call it.
"""

from __future__ import annotations

from enum import StrEnum


class Need(StrEnum):
    OPEN = "open"  # no token: health, readiness
    METRICS = "metrics"  # open, or super-user with QUIRE_METRICS_REQUIRE_TOKEN
    PRODUCE = "produce"  # on the namespace
    CONSUME = "consume"  # on the namespace
    LOOKUP = "produce-or-consume"  # either, on the namespace
    TENANT_ADMIN = "tenant-admin"
    SUPER_USER = "super-user"


NAMESPACE_NEEDS = frozenset({Need.PRODUCE, Need.CONSUME, Need.LOOKUP})

_CONSUME = (
    # data plane
    "readMessages getMessage getLastMessageId createSubscription deleteSubscription receive "
    "ackMessages nackMessages seekSubscription "
    # Pulsar's subscription admin: a consumer's operations on its subscriptions
    "listSubscriptions adminCreateSubscription adminDeleteSubscription resetCursor "
    "resetCursorToMessageId skipMessages skipAllMessages expireMessages expireMessagesAllSubscriptions "
    "peekMessage examineMessage"
)
_LOOKUP = (
    "lookupTopic getPartitions listTopics getNamespace getTopicStats getPartitionedStats getInternalStats "
    "getSchema getSchemaVersion getAllSchemas"
)
_TOPIC_POLICIES = (
    "Retention RolloverPolicy CompactionThreshold CompactionPolicy DeduplicationEnabled MessageTTL"
)
_NAMESPACE_POLICIES = "Retention RolloverPolicy CompactionThreshold CompactionPolicy Deduplication MessageTTL"
_TENANT_ADMIN = (
    "createTopic deleteTopic createPartitionedTopic updatePartitionedTopic unloadTopic "
    "triggerCompaction getCompactionStatus terminateTopic truncateTopic truncateTopicBefore "
    "getBacklogQuotaMap setBacklogQuota removeBacklogQuota "
    "getTenant listNamespaces createNamespace deleteNamespace "
    "getNamespaceBacklogQuotaMap setNamespaceBacklogQuota removeNamespaceBacklogQuota "
    "getPermissions grantPermission revokePermission "
    "postSchema deleteSchema getSchemaCompatibilityStrategy setSchemaCompatibilityStrategy"
)
_SUPER_USER = (
    "listTenants createTenant updateTenant deleteTenant "
    "listBrokers listBookies listUnderReplicatedLedgers decommissionBookie cancelBookieDecommission "
    "listKafkaGroups getKafkaGroup deleteKafkaGroup"
)


def _rows() -> dict[str, Need]:
    rows = {"healthz": Need.OPEN, "readyz": Need.OPEN, "metrics": Need.METRICS, "produce": Need.PRODUCE}
    groups = [(_CONSUME, Need.CONSUME), (_LOOKUP, Need.LOOKUP), (_TENANT_ADMIN, Need.TENANT_ADMIN)]
    groups.append((_SUPER_USER, Need.SUPER_USER))
    for names, need in groups:
        rows.update(dict.fromkeys(names.split(), need))
    for verb in ("get", "set", "remove"):
        rows.update({f"{verb}{p}": Need.TENANT_ADMIN for p in _TOPIC_POLICIES.split()})
        rows.update({f"{verb}Namespace{p}": Need.TENANT_ADMIN for p in _NAMESPACE_POLICIES.split()})
    return rows


NEEDS: dict[str, Need] = _rows()

# Operations after which this broker forgets the grants it cached (app.auth.authorizer).
CHANGES_GRANTS = frozenset(
    {
        "createTenant",
        "updateTenant",
        "deleteTenant",
        "createNamespace",
        "deleteNamespace",
        "grantPermission",
        "revokePermission",
    }
)
