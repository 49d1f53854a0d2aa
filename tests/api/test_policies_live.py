"""Backlog quotas and namespace policies through the generated client against a real bookie and
broker on PostgreSQL: producer_exception's 429 problem (nothing stored), a held produce timing
out with the same 429 and one going through after an ack; every namespace policy's fallback
(set on the namespace, a topic without its own value sees it at once, the topic's own value
wins, DELETE falls back). The model-based checks are tests/topics/test_backlog_quota.py."""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import httpx
import pytest
from quire_client import Client
from quire_client.api.admin import (
    create_namespace,
    create_topic,
    get_backlog_quota_map,
    get_compaction_threshold,
    get_deduplication_enabled,
    get_message_ttl,
    get_namespace_backlog_quota_map,
    get_namespace_compaction_threshold,
    get_namespace_deduplication,
    get_namespace_message_ttl,
    get_namespace_retention,
    get_namespace_rollover_policy,
    get_retention,
    get_rollover_policy,
    get_topic_stats,
    remove_backlog_quota,
    remove_compaction_threshold,
    remove_deduplication_enabled,
    remove_message_ttl,
    remove_namespace_backlog_quota,
    remove_namespace_compaction_threshold,
    remove_namespace_deduplication,
    remove_namespace_message_ttl,
    remove_namespace_retention,
    remove_namespace_rollover_policy,
    remove_retention,
    remove_rollover_policy,
    set_backlog_quota,
    set_compaction_threshold,
    set_deduplication_enabled,
    set_message_ttl,
    set_namespace_backlog_quota,
    set_namespace_compaction_threshold,
    set_namespace_deduplication,
    set_namespace_message_ttl,
    set_namespace_retention,
    set_namespace_rollover_policy,
    set_retention,
    set_rollover_policy,
)
from quire_client.api.data import ack_messages, create_subscription, produce, read_messages, receive
from quire_client.models import (
    AckRequest,
    BacklogQuota,
    BacklogQuotaPolicy,
    MessageList,
    Problem,
    ProduceMessage,
    ProduceRequest,
    ReadPage,
    RetentionPolicy,
    RetentionPolicyUpdate,
    RolloverPolicy,
    RolloverPolicyUpdate,
    SubscriptionRequest,
    SubscriptionRequestInitialPosition,
)
from quire_client.types import Response

from tests.api.conftest import Stack, postgres_stack

HOLD_MS = 400
BOUND_S = 30.0


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory, postgres_url: str) -> Iterator[Stack]:
    with postgres_stack(
        tmp_path_factory.mktemp("policies"),
        postgres_url,
        QUIRE_BACKLOG_QUOTA_HOLD_TIMEOUT_MS=str(HOLD_MS),
        QUIRE_BACKLOG_QUOTA_CHECK_INTERVAL_MS="60000",
    ) as s:
        yield s


@pytest.fixture
def client(stack: Stack) -> Iterator[Client]:
    with Client(base_url=stack.base_url, timeout=httpx.Timeout(BOUND_S)) as c:
        yield c


def _namespace(client: Client) -> tuple[str, str]:
    ns = ("public", f"ns-{uuid.uuid4().hex[:8]}")
    assert create_namespace.sync_detailed(*ns, client=client).status_code == 204
    return ns


def _produce(client: Client, ns: tuple[str, str], topic: str) -> Response[Any]:
    body = ProduceRequest(messages=[ProduceMessage(value="x" * 100)])
    return produce.sync_detailed(*ns, topic, client=client, body=body)


def _stats(client: Client, ns: tuple[str, str], topic: str) -> dict[str, Any]:
    got = get_topic_stats.sync_detailed(*ns, topic, client=client)
    assert got.status_code == 200, got.content
    stats: dict[str, Any] = json.loads(got.content)
    return stats


def _assert_refused(got: Response[Any]) -> None:
    assert got.status_code == 429 and isinstance(got.parsed, Problem), got.content
    assert got.headers["content-type"] == "application/problem+json"
    assert got.headers["retry-after"] == "1"
    assert got.parsed.type_ == "https://quire.dev/problems/backlog-quota-exceeded"


def _quota(policy: BacklogQuotaPolicy, size: int) -> BacklogQuota:
    return BacklogQuota(policy=policy, limit_size=size)


def test_producer_exception_refuses_and_a_hold_waits_then_refuses(client: Client) -> None:
    ns, topic = _namespace(client), "quota"
    sub = SubscriptionRequest(initial_position=SubscriptionRequestInitialPosition.EARLIEST)
    assert create_subscription.sync_detailed(*ns, topic, "s", client=client, body=sub).status_code == 201
    assert _produce(client, ns, topic).status_code == 200
    entry = _stats(client, ns, topic)["storageSize"]
    quota = _quota(BacklogQuotaPolicy.PRODUCER_EXCEPTION, entry)
    assert set_backlog_quota.sync_detailed(*ns, topic, client=client, body=quota).status_code == 204
    got = get_backlog_quota_map.sync_detailed(*ns, topic, client=client)
    assert json.loads(got.content) == {
        "destination_storage": {"limitSize": entry, "limitTime": None, "policy": "producer_exception"}
    }
    assert _produce(client, ns, topic).status_code == 200  # exactly at the limit: taken
    _assert_refused(_produce(client, ns, topic))  # one entry over
    quota = _quota(BacklogQuotaPolicy.PRODUCER_REQUEST_HOLD, entry)
    assert set_backlog_quota.sync_detailed(*ns, topic, client=client, body=quota).status_code == 204
    started = time.monotonic()
    _assert_refused(_produce(client, ns, topic))  # held, then refused
    assert HOLD_MS / 1000 * 0.9 <= time.monotonic() - started < BOUND_S
    stats = _stats(client, ns, topic)
    assert stats["msgInCounter"] == 2  # nothing of the refused ones stored
    assert stats["backlogQuotaEvents"] == {"held": 1, "refused": 2, "evicted": 0}
    got_messages = receive.sync_detailed(*ns, topic, "s", client=client, max_messages=1)
    assert isinstance(got_messages.parsed, MessageList)
    ack = AckRequest(message_ids=[m.message_id for m in got_messages.parsed.messages])
    assert ack_messages.sync_detailed(*ns, topic, "s", client=client, body=ack).status_code == 204
    assert _produce(client, ns, topic).status_code == 200  # back at the limit
    assert remove_backlog_quota.sync_detailed(*ns, topic, client=client).status_code == 204
    assert json.loads(get_backlog_quota_map.sync_detailed(*ns, topic, client=client).content) == {}


def _ok(got: Response[Any]) -> Any:
    assert got.status_code in (200, 204), got.content
    return json.loads(got.content) if got.content.strip() else None


Call = Callable[..., Response[Any]]

# name: (topic get, set, remove; namespace get, set, remove; namespace value; topic value), the
# set calls taking (tenant, namespace[, topic], client) and giving the value.
POLICIES: dict[str, tuple[Any, ...]] = {
    "retention": (
        lambda *a, client: get_retention.sync_detailed(*a, client=client),
        lambda *a, client: set_retention.sync_detailed(
            *a, client=client, body=RetentionPolicy(retention_time_in_minutes=5, retention_size_in_mb=5)
        ),
        remove_retention.sync_detailed,
        get_namespace_retention.sync_detailed,
        lambda *a, client: set_namespace_retention.sync_detailed(
            *a, client=client, body=RetentionPolicyUpdate(retention_time_in_minutes=60)
        ),
        remove_namespace_retention.sync_detailed,
        {"retentionTimeInMinutes": 60, "retentionSizeInMB": 0},
        {"retentionTimeInMinutes": 5, "retentionSizeInMB": 5},
    ),
    "messageTTL": (
        get_message_ttl.sync_detailed,
        lambda *a, client: set_message_ttl.sync_detailed(*a, client=client, message_ttl=30),
        remove_message_ttl.sync_detailed,
        get_namespace_message_ttl.sync_detailed,
        lambda *a, client: set_namespace_message_ttl.sync_detailed(*a, client=client, message_ttl=3600),
        remove_namespace_message_ttl.sync_detailed,
        3600,
        30,
    ),
    "compactionThreshold": (
        get_compaction_threshold.sync_detailed,
        lambda *a, client: set_compaction_threshold.sync_detailed(*a, client=client, body=1000),
        remove_compaction_threshold.sync_detailed,
        get_namespace_compaction_threshold.sync_detailed,
        lambda *a, client: set_namespace_compaction_threshold.sync_detailed(*a, client=client, body=10**8),
        remove_namespace_compaction_threshold.sync_detailed,
        10**8,
        1000,
    ),
    "deduplication": (
        get_deduplication_enabled.sync_detailed,
        lambda *a, client: set_deduplication_enabled.sync_detailed(*a, client=client, body=False),
        remove_deduplication_enabled.sync_detailed,
        get_namespace_deduplication.sync_detailed,
        lambda *a, client: set_namespace_deduplication.sync_detailed(*a, client=client, body=True),
        remove_namespace_deduplication.sync_detailed,
        True,
        False,
    ),
    "rolloverPolicy": (
        get_rollover_policy.sync_detailed,
        lambda *a, client: set_rollover_policy.sync_detailed(
            *a,
            client=client,
            body=RolloverPolicy(
                max_entries_per_ledger=7,
                max_size_per_ledger_bytes=7,
                min_rollover_time_ms=0,
                max_rollover_time_ms=7,
            ),
        ),
        remove_rollover_policy.sync_detailed,
        get_namespace_rollover_policy.sync_detailed,
        lambda *a, client: set_namespace_rollover_policy.sync_detailed(
            *a, client=client, body=RolloverPolicyUpdate(max_entries_per_ledger=100)
        ),
        remove_namespace_rollover_policy.sync_detailed,
        {
            "maxEntriesPerLedger": 100,
            "maxSizePerLedgerBytes": 2 * 1024**3,
            "minRolloverTimeMs": 600_000,
            "maxRolloverTimeMs": 14_400_000,
        },
        {
            "maxEntriesPerLedger": 7,
            "maxSizePerLedgerBytes": 7,
            "minRolloverTimeMs": 0,
            "maxRolloverTimeMs": 7,
        },
    ),
    "backlogQuota": (
        get_backlog_quota_map.sync_detailed,
        lambda *a, client: set_backlog_quota.sync_detailed(
            *a, client=client, body=_quota(BacklogQuotaPolicy.CONSUMER_BACKLOG_EVICTION, 10**9)
        ),
        remove_backlog_quota.sync_detailed,
        get_namespace_backlog_quota_map.sync_detailed,
        lambda *a, client: set_namespace_backlog_quota.sync_detailed(
            *a, client=client, body=_quota(BacklogQuotaPolicy.PRODUCER_EXCEPTION, 0)
        ),
        remove_namespace_backlog_quota.sync_detailed,
        {"destination_storage": {"limitSize": 0, "limitTime": None, "policy": "producer_exception"}},
        {
            "destination_storage": {
                "limitSize": 10**9,
                "limitTime": None,
                "policy": "consumer_backlog_eviction",
            }
        },
    ),
}


@pytest.mark.parametrize("name", sorted(POLICIES))
def test_a_namespace_policy_is_the_fallback_of_its_topics(client: Client, name: str) -> None:
    t_get, t_set, t_remove, n_get, n_set, n_remove, ns_value, topic_value = POLICIES[name]
    ns, topic = _namespace(client), "t"
    assert create_topic.sync_detailed(*ns, topic, client=client).status_code == 204
    default = _ok(n_get(*ns, client=client))
    assert _ok(t_get(*ns, topic, client=client)) == default
    _ok(n_set(*ns, client=client))
    assert _ok(n_get(*ns, client=client)) == ns_value
    assert _ok(t_get(*ns, topic, client=client)) == ns_value  # no own value: the namespace's
    _ok(t_set(*ns, topic, client=client))
    assert _ok(t_get(*ns, topic, client=client)) == topic_value  # its own wins
    assert _ok(n_get(*ns, client=client)) == ns_value
    _ok(t_remove(*ns, topic, client=client))
    assert _ok(t_get(*ns, topic, client=client)) == ns_value
    _ok(n_remove(*ns, client=client))
    assert _ok(n_get(*ns, client=client)) == default
    assert _ok(t_get(*ns, topic, client=client)) == default


def test_a_namespace_quota_applies_at_once_to_an_open_topic(client: Client) -> None:
    ns, topic = _namespace(client), "open"
    sub = SubscriptionRequest(initial_position=SubscriptionRequestInitialPosition.EARLIEST)
    assert create_subscription.sync_detailed(*ns, topic, "s", client=client, body=sub).status_code == 201
    assert _produce(client, ns, topic).status_code == 200  # the topic is open on the broker
    quota = _quota(BacklogQuotaPolicy.PRODUCER_EXCEPTION, 0)
    assert set_namespace_backlog_quota.sync_detailed(*ns, client=client, body=quota).status_code == 204
    _assert_refused(_produce(client, ns, topic))
    assert remove_namespace_backlog_quota.sync_detailed(*ns, client=client).status_code == 204
    assert _produce(client, ns, topic).status_code == 200


def _backlogs(client: Client, ns: tuple[str, str], topic: str) -> dict[str, int]:
    return {name: s["msgBacklog"] for name, s in _stats(client, ns, topic)["subscriptions"].items()}


def test_consumer_backlog_eviction_moves_only_the_slowest_cursor_and_takes_the_produce(
    client: Client,
) -> None:
    ns, topic = _namespace(client), "evict"
    sub = SubscriptionRequest(initial_position=SubscriptionRequestInitialPosition.EARLIEST)
    for name in ("slow", "fast"):
        assert create_subscription.sync_detailed(*ns, topic, name, client=client, body=sub).status_code == 201
    assert _produce(client, ns, topic).status_code == 200
    entry = _stats(client, ns, topic)["storageSize"]  # one entry of one 100-byte message
    quota = _quota(BacklogQuotaPolicy.CONSUMER_BACKLOG_EVICTION, 2 * entry)
    assert set_backlog_quota.sync_detailed(*ns, topic, client=client, body=quota).status_code == 204
    assert _produce(client, ns, topic).status_code == 200  # two entries: at the limit, kept
    assert _backlogs(client, ns, topic) == {"slow": 2, "fast": 2}
    got = receive.sync_detailed(*ns, topic, "fast", client=client, max_messages=10)
    assert isinstance(got.parsed, MessageList) and len(got.parsed.messages) == 2
    ack = AckRequest(message_ids=[m.message_id for m in got.parsed.messages])
    assert ack_messages.sync_detailed(*ns, topic, "fast", client=client, body=ack).status_code == 204
    third = _produce(client, ns, topic)
    assert third.status_code == 200  # eviction never refuses a produce
    # slow was three entries behind: it moved just far enough, past its oldest one.
    assert _backlogs(client, ns, topic) == {"slow": 2, "fast": 1}
    assert _stats(client, ns, topic)["backlogQuotaEvents"] == {"held": 0, "refused": 0, "evicted": 1}
    slow = receive.sync_detailed(*ns, topic, "slow", client=client, max_messages=10)
    assert isinstance(slow.parsed, MessageList)
    stored = read_messages.sync_detailed(*ns, topic, client=client, start="earliest", max_messages=10)
    assert isinstance(stored.parsed, ReadPage) and len(stored.parsed.messages) == 3
    assert [m.message_id for m in slow.parsed.messages] == [m.message_id for m in stored.parsed.messages[1:]]
