"""Stats and metrics through the generated client against a real bookie and broker on
PostgreSQL: a partitioned topic's counters, rates, publishers, consumers and message backlog in
`stats` and `partitioned-stats`; /metrics parsed by the Prometheus client's parser with the
topic's series, and label cardinality held at the caps while topics keep coming."""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families
from quire_client import Client
from quire_client.api.admin import (
    create_namespace,
    create_partitioned_topic,
    get_partitioned_stats,
    get_topic_stats,
)
from quire_client.api.data import ack_messages, create_subscription, produce, receive
from quire_client.models import (
    AckRequest,
    MessageList,
    ProduceMessage,
    ProduceRequest,
    SubscriptionRequest,
    SubscriptionRequestInitialPosition,
)

from tests.api.conftest import Stack, postgres_stack

BOUND_S = 30.0
MAX_TOPICS = 3
# A rate is the last stats interval's: it shows from the first tick after a produce until the
# next. Long enough that a loaded machine's slow poll still lands inside it.
STATS_INTERVAL_MS = 5_000


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory, postgres_url: str) -> Iterator[Stack]:
    with postgres_stack(
        tmp_path_factory.mktemp("stats"),
        postgres_url,
        QUIRE_STATS_INTERVAL_MS=str(STATS_INTERVAL_MS),
        QUIRE_METRICS_MAX_TOPICS=str(MAX_TOPICS),
        QUIRE_METRICS_MAX_SUBSCRIPTIONS_PER_TOPIC="1",
    ) as s:
        yield s


@pytest.fixture
def client(stack: Stack) -> Iterator[Client]:
    with Client(base_url=stack.base_url, timeout=httpx.Timeout(BOUND_S)) as c:
        yield c


def _json(response: Any) -> Any:
    assert response.status_code == 200, response.content
    return json.loads(response.content)


def _metrics(stack: Stack) -> dict[tuple[str, frozenset[tuple[str, str]]], float]:
    text = httpx.get(f"{stack.base_url}/metrics", timeout=BOUND_S).text
    return {
        (s.name, frozenset(s.labels.items())): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }


@pytest.fixture(scope="module")
def orders(stack: Stack) -> tuple[str, str]:
    """A partitioned topic of 2 partitions: 30 messages from producer p1 in 3 batches, 15 of
    them delivered to consumer c1 of subscription s, the first 5 of those acked; then a fourth
    batch of 10, last, so that the rates of the stats tick after it are there to see."""
    ns = ("public", f"ns-{uuid.uuid4().hex[:8]}")
    with Client(base_url=stack.base_url, timeout=httpx.Timeout(BOUND_S)) as client:
        assert create_namespace.sync_detailed(*ns, client=client).status_code == 204
        assert create_partitioned_topic.sync_detailed(*ns, "orders", client=client, body=2).status_code == 204
        sub = SubscriptionRequest(initial_position=SubscriptionRequestInitialPosition.EARLIEST)
        assert create_subscription.sync_detailed(*ns, "orders", "s", client=client, body=sub).status_code in (
            200,
            201,
        )
        # Batches of 10 keyed messages of 12 bytes (10-byte value, 2-byte key).
        body = ProduceRequest(
            producer_name="p1", messages=[ProduceMessage(key=f"k{i}", value="0123456789") for i in range(10)]
        )
        for _ in range(3):
            assert produce.sync_detailed(*ns, "orders", client=client, body=body).status_code == 200
        got: list[Any] = []
        while len(got) < 15:
            page = receive.sync_detailed(
                *ns, "orders", "s", client=client, max_messages=15 - len(got), wait_ms=1000, consumer_id="c1"
            )
            assert isinstance(page.parsed, MessageList), page.content
            got += page.parsed.messages
        ack = AckRequest(message_ids=[m.message_id for m in got[:5]])
        assert ack_messages.sync_detailed(*ns, "orders", "s", client=client, body=ack).status_code == 204
        assert produce.sync_detailed(*ns, "orders", client=client, body=body).status_code == 200
    return ns


def test_stats_and_partitioned_stats(client: Client, orders: tuple[str, str]) -> None:
    ns = orders
    # Rates come from the broker's stats tick: the tick after a produce shows them until the
    # next one (the fixture's last batch was its last step); poll, bounded, until one did.
    deadline = time.monotonic() + BOUND_S
    while True:
        stats = _json(get_topic_stats.sync_detailed(*ns, "orders", client=client))
        if stats["msgRateIn"] > 0 or time.monotonic() > deadline:
            break
        time.sleep(0.05)
    assert stats["msgRateIn"] > 0 and stats["msgThroughputIn"] > 0
    assert (stats["msgInCounter"], stats["bytesInCounter"], stats["msgOutCounter"]) == (40, 480, 15)
    assert [p["producerName"] for p in stats["publishers"]] == ["p1"]
    s = stats["subscriptions"]["s"]
    assert (s["msgBacklog"], s["unackedMessages"], s["msgOutCounter"]) == (35, 10, 15)
    assert [c["consumerName"] for c in s["consumers"]] == ["c1"]

    pstats = _json(get_partitioned_stats.sync_detailed(*ns, "orders", client=client))
    parts = pstats["partitions"]
    topic = f"{ns[0]}/{ns[1]}/orders"
    assert sorted(parts) == [f"{topic}-partition-0", f"{topic}-partition-1"]
    for key in ("msgInCounter", "bytesInCounter", "msgOutCounter", "storageSize"):
        assert pstats[key] == sum(p[key] for p in parts.values()) == stats[key], key
    assert sum(p["subscriptions"]["s"]["msgBacklog"] for p in parts.values()) == 35
    assert sum(p["subscriptions"]["s"]["unackedMessages"] for p in parts.values()) == 10
    assert get_partitioned_stats.sync_detailed(*ns, "orders-partition-0", client=client).status_code == 404


def test_metrics_series_and_their_caps(client: Client, stack: Stack, orders: tuple[str, str]) -> None:
    ns = orders
    metrics = _metrics(stack)
    topic = f"{ns[0]}/{ns[1]}/orders"
    mine = frozenset({("namespace", f"{ns[0]}/{ns[1]}"), ("topic", topic)})
    assert metrics[("quire_in_messages_total", mine)] == 40
    assert metrics[("quire_msg_backlog", mine)] == 35
    assert metrics[("quire_subscription_unacked_messages", mine | {("subscription", "s")})] == 10

    # Twenty more topics with a larger backlog: the series stay at the caps.
    sub = SubscriptionRequest(initial_position=SubscriptionRequestInitialPosition.EARLIEST)
    for i in range(20):
        name = f"more-{i}"
        assert create_subscription.sync_detailed(*ns, name, "a", client=client, body=sub).status_code in (
            200,
            201,
        )
        assert create_subscription.sync_detailed(*ns, name, "b", client=client, body=sub).status_code in (
            200,
            201,
        )
        body = ProduceRequest(messages=[ProduceMessage(value="x") for _ in range(40 + i)])
        assert produce.sync_detailed(*ns, name, client=client, body=body).status_code == 200
    metrics = _metrics(stack)
    topics = {dict(labels)["topic"] for (name, labels) in metrics if name == "quire_msg_backlog"}
    assert len(topics) == MAX_TOPICS + 1 and "_others" in topics
    assert {f"{ns[0]}/{ns[1]}/more-{i}" for i in (19, 18, 17)} == topics - {"_others"}
    subs = {
        dict(labels)["subscription"] for (name, labels) in metrics if name == "quire_subscription_back_log"
    }
    assert subs == {"a", "_others"}
    assert metrics[("quire_metrics_folded_topics", frozenset())] >= 18
