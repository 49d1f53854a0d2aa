"""The per-topic and per-subscription series on /metrics, parsed by the Prometheus client's own
parser: the expected series with the expected values, and label cardinality bounded by the caps
(topics and subscriptions past them summed under `_others`), on both produce entry points."""

from __future__ import annotations

from collections.abc import AsyncIterator

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from app.main import create_app
from app.topic_metrics import SUB_SERIES, TOPIC_SERIES
from managed_ledger.metadata.memory import InMemoryMetadataStore
from tests.api.conftest import LIMITS
from tests.topics.conftest import Env, make_env

V1 = "/v1/topics/public/default"
MAX_TOPICS = 3
MAX_SUBS = 2


@pytest.fixture(params=[True, False], ids=["fast-path", "fastapi"])
async def capped(request: pytest.FixtureRequest) -> AsyncIterator[tuple[httpx.AsyncClient, Env]]:
    env = await make_env(InMemoryMetadataStore(), LIMITS)
    app = create_app(
        env.service,
        close_topics=False,
        metrics_max_topics=MAX_TOPICS,
        metrics_max_subscriptions_per_topic=MAX_SUBS,
    )
    app.state.fast_path.enabled = request.param
    transport = httpx.ASGITransport(app=app, raise_app_exceptions=False)
    try:
        async with httpx.AsyncClient(transport=transport, base_url="http://quire") as client:
            yield client, env
    finally:
        await env.service.close()
        await env.factory.close()


def samples(text: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    out = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            out[(s.name, tuple(sorted(s.labels.items())))] = s.value
    return out


def labels_of(
    parsed: dict[tuple[str, tuple[tuple[str, str], ...]], float], name: str, label: str
) -> set[str]:
    return {dict(labels)[label] for (n, labels), _ in parsed.items() if n == name}


async def _produce(client: httpx.AsyncClient, topic: str, n: int, producer: str) -> None:
    body = {
        "producer_name": producer,
        "messages": [{"key": f"k{i}", "value": "0123456789"} for i in range(n)],
    }
    r = await client.post(f"{V1}/{topic}/messages", json=body)
    assert r.status_code == 200, r.text


async def test_series_and_values(capped: tuple[httpx.AsyncClient, Env]) -> None:
    client, env = capped
    for sub in ("a", "b"):
        r = await client.put(f"{V1}/t0/subscriptions/{sub}", json={"initial_position": "earliest"})
        assert r.status_code in (200, 201), r.text
    await _produce(client, "t0", 5, "p1")
    r = await client.get(f"{V1}/t0/subscriptions/a/messages", params={"max_messages": 3, "consumer_id": "c1"})
    assert len(r.json()["messages"]) == 3
    await env.service.tick_stats(1.0)
    parsed = samples((await client.get("/metrics")).text)
    t0 = (("namespace", "public/default"), ("topic", "public/default/t0"))
    assert parsed[("quire_in_messages_total", t0)] == 5
    assert parsed[("quire_in_bytes_total", t0)] == 60  # 10-byte value + 2-byte key
    assert parsed[("quire_rate_in", t0)] == 5.0
    assert parsed[("quire_out_messages_total", t0)] == 3
    assert parsed[("quire_msg_backlog", t0)] == 5
    assert parsed[("quire_producers_count", t0)] == 1
    assert parsed[("quire_subscriptions_count", t0)] == 2
    assert parsed[("quire_storage_size", t0)] > 0
    sub_a = (*t0[:1], ("subscription", "a"), t0[1])
    assert parsed[("quire_subscription_back_log", sub_a)] == 5
    assert parsed[("quire_subscription_unacked_messages", sub_a)] == 3
    assert parsed[("quire_subscription_out_messages_total", sub_a)] == 3
    assert parsed[("quire_subscription_consumers_count", sub_a)] == 1
    names = {n for n, _ in parsed}
    for name, (_, counter) in {**TOPIC_SERIES, **SUB_SERIES}.items():
        assert (name + "_total" if counter else name) in names, name
    assert parsed[("quire_metrics_folded_topics", ())] == 0


async def test_label_cardinality_is_bounded(capped: tuple[httpx.AsyncClient, Env]) -> None:
    client, env = capped
    # Ten topics, topic i with a backlog of i + 1 messages and four subscriptions.
    for i in range(10):
        for sub in ("s0", "s1", "s2", "s3"):
            r = await client.put(f"{V1}/t{i}/subscriptions/{sub}", json={"initial_position": "earliest"})
            assert r.status_code in (200, 201), r.text
        await _produce(client, f"t{i}", i + 1, f"p{i}")
    await env.service.tick_stats(1.0)
    parsed = samples((await client.get("/metrics")).text)
    topics = labels_of(parsed, "quire_msg_backlog", "topic")
    # The largest backlogs keep their own series; the others are summed.
    assert topics == {"public/default/t9", "public/default/t8", "public/default/t7", "_others"}
    others = (("namespace", "_others"), ("topic", "_others"))
    assert parsed[("quire_in_messages_total", others)] == sum(range(1, 8))
    assert parsed[("quire_metrics_folded_topics", ())] == 7
    assert labels_of(parsed, "quire_subscription_back_log", "subscription") == {"s0", "s1", "_others"}
    t9_others = (("namespace", "public/default"), ("subscription", "_others"), ("topic", "public/default/t9"))
    assert parsed[("quire_subscription_back_log", t9_others)] == 2 * 10
    # Many more topics add no series.
    for i in range(10, 40):
        await _produce(client, f"t{i}", 1, "p")
    again = samples((await client.get("/metrics")).text)
    assert labels_of(again, "quire_rate_in", "topic") == topics
    assert len([k for k in again if k[0] == "quire_subscription_back_log"]) == len(
        [k for k in parsed if k[0] == "quire_subscription_back_log"]
    )
