"""The API contract (docs/rest-api.md) through the generated client against a live bookie + broker.

Each test uses its own topic, so the module shares one stack. Bad input cases also check that
nothing was written (the topic's last message id is unchanged).
"""

from __future__ import annotations

import base64
import time
import uuid
from typing import Any

import httpx
import pytest
from quire_client import Client
from quire_client.api.admin import (
    create_namespace,
    create_partitioned_topic,
    create_tenant,
    create_topic,
    delete_namespace,
    delete_tenant,
    delete_topic,
    get_compaction_status,
    get_deduplication_enabled,
    get_internal_stats,
    get_partitions,
    get_retention,
    get_rollover_policy,
    get_topic_stats,
    list_namespaces,
    list_subscriptions,
    list_tenants,
    list_topics,
    remove_retention,
    reset_cursor,
    set_deduplication_enabled,
    set_retention,
    unload_topic,
)
from quire_client.api.data import (
    ack_messages,
    create_subscription,
    delete_subscription,
    get_last_message_id,
    get_message,
    nack_messages,
    produce,
    read_messages,
    receive,
    seek_subscription,
)
from quire_client.api.ops import healthz, metrics, readyz
from quire_client.models import (
    AckRequest,
    MessageOut,
    NackRequest,
    Problem,
    ProduceMessage,
    ProduceRequest,
    RetentionPolicy,
    SeekRequest,
    SubscriptionRequest,
    ValueEncoding,
)
from quire_client.models.subscription_request_initial_position import SubscriptionRequestInitialPosition
from quire_client.models.subscription_request_type import SubscriptionRequestType

from tests.api.conftest import Stack

NS = ("public", "default")
WAIT_BOUND_S = 20.0


def new_topic() -> str:
    return f"t-{uuid.uuid4().hex[:10]}"


def send(api: Client, topic: str, *messages: ProduceMessage, producer: str | None = "p1") -> list[str]:
    r = produce.sync_detailed(
        *NS, topic, client=api, body=ProduceRequest(messages=list(messages), producer_name=producer)
    )
    assert r.status_code == 200, r.content
    assert r.parsed is not None and not isinstance(r.parsed, Problem)
    return [str(x.message_id) for x in r.parsed.results]


def texts(*values: str) -> list[ProduceMessage]:
    return [ProduceMessage(value=v) for v in values]


def subscribe(api: Client, topic: str, sub: str, **kwargs: Any) -> int:
    body = SubscriptionRequest(initial_position=SubscriptionRequestInitialPosition.EARLIEST, **kwargs)
    return create_subscription.sync_detailed(*NS, topic, sub, client=api, body=body).status_code


def pull(api: Client, topic: str, sub: str, n: int = 100, wait_ms: int = 0, **kw: Any) -> list[MessageOut]:
    r = receive.sync_detailed(*NS, topic, sub, client=api, max_messages=n, wait_ms=wait_ms, **kw)
    assert r.status_code == 200, r.content
    assert r.parsed is not None and not isinstance(r.parsed, Problem)
    return list(r.parsed.messages)


def pull_until(api: Client, topic: str, sub: str, count: int) -> list[MessageOut]:
    got: list[MessageOut] = []
    deadline = time.monotonic() + WAIT_BOUND_S
    while len(got) < count and time.monotonic() < deadline:
        got += pull(api, topic, sub, count - len(got), wait_ms=500)
    return got


def last_id(api: Client, topic: str) -> str | None:
    r = get_last_message_id.sync_detailed(*NS, topic, client=api)
    assert r.status_code == 200 and r.parsed is not None and not isinstance(r.parsed, Problem)
    mid = r.parsed.message_id
    return mid if isinstance(mid, str) else None


def problem_of(r: Any, status: int, *words: str) -> Problem:
    assert r.status_code == status, r.content
    assert r.headers["content-type"] == "application/problem+json"
    assert isinstance(r.parsed, Problem), r.parsed
    for w in words:
        assert w in r.parsed.detail, r.parsed.detail
    return r.parsed


def test_ops(api: Client) -> None:
    assert healthz.sync(client=api).status == "ok"  # type: ignore[union-attr]
    ready = readyz.sync_detailed(client=api)
    assert ready.status_code == 200
    assert metrics.sync_detailed(client=api).status_code == 200


def test_produce_and_read_round_trip_text_and_binary(api: Client) -> None:
    topic = new_topic()
    binary = bytes(range(256)) + b"\xff\xfe"
    ids = send(
        api,
        topic,
        ProduceMessage(
            key="AAPL", value="189.20 €", properties={"src": "feed"}, event_time=1763700000000, sequence_id=17
        ),  # type: ignore[arg-type]
        ProduceMessage(
            key="bin", value=base64.b64encode(binary).decode(), value_encoding=ValueEncoding.BASE64
        ),
        ProduceMessage(key="gone"),
    )
    assert len(ids) == 3 and ids[0].endswith(":0") and ids[1].endswith(":1") and ids[2].endswith(":2")
    assert len({i.rsplit(":", 1)[0] for i in ids}) == 1, "one batch is one entry"
    page = read_messages.sync(*NS, topic, client=api, start="earliest")
    assert page is not None and not isinstance(page, Problem)
    a, b, c = page.messages
    assert (a.key, a.value, a.value_encoding, a.event_time, a.sequence_id) == (
        "AAPL",
        "189.20 €",
        ValueEncoding.TEXT,
        1763700000000,
        17,
    )
    assert a.properties.to_dict() == {"src": "feed"} and a.producer_name == "p1" and a.publish_time > 0
    assert b.value_encoding == ValueEncoding.BASE64 and base64.b64decode(b.value) == binary
    assert c.value == "" and c.key == "gone"
    forced = get_message.sync(*NS, topic, ids[0], client=api, value_encoding=ValueEncoding.BASE64)
    assert isinstance(forced, MessageOut) and base64.b64decode(forced.value) == "189.20 €".encode()
    assert last_id(api, topic) == ids[2]


def test_reader_pages_with_next(api: Client) -> None:
    topic = new_topic()
    for i in range(7):
        send(api, topic, *texts(f"m{i}"))
    start, seen = "earliest", []
    for _ in range(20):
        page = read_messages.sync(*NS, topic, client=api, start=start, max_messages=3)
        assert page is not None and not isinstance(page, Problem)
        if not isinstance(page.next_, str):
            break
        seen += [m.value for m in page.messages]
        start = page.next_
    assert seen == [f"m{i}" for i in range(7)]
    latest = read_messages.sync(*NS, topic, client=api, start="latest")
    assert latest is not None and not isinstance(latest, Problem) and latest.messages == []


def test_subscription_ack_nack_seek(api: Client) -> None:
    topic, sub = new_topic(), "s1"
    assert subscribe(api, topic, sub) == 201
    assert subscribe(api, topic, sub) == 200
    send(api, topic, *texts("a", "b", "c", "d"))
    got = pull_until(api, topic, sub, 4)
    assert [m.value for m in got] == ["a", "b", "c", "d"]
    assert all(m.redelivery_count == 0 for m in got)
    assert (
        ack_messages.sync_detailed(
            *NS, topic, sub, client=api, body=AckRequest(message_ids=[got[0].message_id])
        ).status_code
        == 204
    )
    assert (
        nack_messages.sync_detailed(
            *NS, topic, sub, client=api, body=NackRequest(message_ids=[got[1].message_id])
        ).status_code
        == 204
    )
    again = pull_until(api, topic, sub, 1)
    assert [(m.value, m.redelivery_count) for m in again] == [("b", 1)]
    ack = AckRequest(cumulative=got[3].message_id)
    assert ack_messages.sync_detailed(*NS, topic, sub, client=api, body=ack).status_code == 204
    assert pull(api, topic, sub) == []
    stats = get_topic_stats.sync(*NS, topic, client=api)
    assert stats is not None and not isinstance(stats, Problem)
    assert stats.subscriptions[sub].msg_backlog == 0 and stats.msg_in_counter == 4
    seek = SeekRequest(message_id="earliest")
    assert seek_subscription.sync_detailed(*NS, topic, sub, client=api, body=seek).status_code == 204
    assert [m.value for m in pull_until(api, topic, sub, 4)] == ["a", "b", "c", "d"]
    assert (
        seek_subscription.sync_detailed(
            *NS, topic, sub, client=api, body=SeekRequest(timestamp=0)
        ).status_code
        == 204
    )
    assert reset_cursor.sync_detailed(*NS, topic, sub, 0, client=api).status_code == 204
    assert list_subscriptions.sync(*NS, topic, client=api) == [sub]
    assert delete_subscription.sync_detailed(*NS, topic, sub, client=api).status_code == 204
    problem_of(receive.sync_detailed(*NS, topic, sub, client=api), 404, sub)


def test_unacked_messages_come_back_after_the_ack_timeout(api: Client) -> None:
    topic, sub = new_topic(), "slow"
    assert subscribe(api, topic, sub, ack_timeout_ms=300) == 201
    send(api, topic, *texts("x"))
    first = pull_until(api, topic, sub, 1)
    assert [m.redelivery_count for m in first] == [0]
    again = pull_until(api, topic, sub, 1)
    assert [(m.value, m.message_id, m.redelivery_count) for m in again] == [("x", first[0].message_id, 1)]


def test_exclusive_subscription_refuses_a_second_consumer(api: Client) -> None:
    topic, sub = new_topic(), "ex"
    assert subscribe(api, topic, sub, type_=SubscriptionRequestType.EXCLUSIVE) == 201
    send(api, topic, *texts("1"))
    assert len(pull(api, topic, sub, consumer_id="c1", wait_ms=1000)) == 1
    problem_of(receive.sync_detailed(*NS, topic, sub, client=api, consumer_id="c2"), 409)


def test_long_poll_returns_when_a_message_arrives_or_empty(api: Client) -> None:
    topic, sub = new_topic(), "lp"
    subscribe(api, topic, sub)
    assert pull(api, topic, sub, wait_ms=200) == []


def test_bad_input_is_4xx_problem_and_writes_nothing(api: Client, stack: Stack) -> None:
    topic = new_topic()
    send(api, topic, *texts("seed"))
    before = last_id(api, topic)
    url = f"{stack.base_url}/v1/topics/public/default/{topic}/messages"
    cases: list[tuple[bytes, int, str]] = [
        (b"{oops", 422, "JSON"),
        (b'{"messages": [{"value": "ok"}, {"value": 5}]}', 422, "messages[1].value"),
        (b'{"messages": [{"value": "!!", "value_encoding": "base64"}]}', 422, "base64"),
        (b'{"messages": [{"value": "' + b"x" * 10_001 + b'"}]}', 413, "max_message_size_bytes"),
        (b'{"messages": [' + b",".join([b"{}"] * 1001) + b"]}", 413, "max_batch_messages"),
    ]
    with httpx.Client(timeout=30) as http:
        for body, status, word in cases:
            r = http.post(url, content=body, headers={"content-type": "application/json"})
            assert r.status_code == status, (body[:60], r.text)
            assert r.headers["content-type"] == "application/problem+json"
            assert word in r.json()["detail"]
        assert http.get(f"{url}?wait_ms=999999").status_code == 400
        assert "max_wait_ms" in http.get(f"{url}?wait_ms=999999").json()["detail"]
        assert http.get(f"{url}/not-an-id").status_code == 422
        assert (
            http.post(
                f"{stack.base_url}/v1/topics/public/default/b@d/messages", json={"messages": [{}]}
            ).status_code
            == 422
        )
    assert last_id(api, topic) == before
    problem_of(get_message.sync_detailed(*NS, topic, "999999:0:0", client=api), 404)
    problem_of(receive.sync_detailed(*NS, topic, "nobody", client=api), 404)
    problem_of(get_topic_stats.sync_detailed(*NS, new_topic(), client=api), 404)
    bad_ack = AckRequest(message_ids=["1:2:x"])
    problem_of(
        ack_messages.sync_detailed(*NS, topic, "nobody", client=api, body=bad_ack), 422, "message_ids[0]"
    )


def test_admin_topics_and_stats(api: Client) -> None:
    topic = new_topic()
    assert create_topic.sync_detailed(*NS, topic, client=api).status_code == 204
    problem_of(create_topic.sync_detailed(*NS, topic, client=api), 409)
    assert f"persistent://public/default/{topic}" in (list_topics.sync(*NS, client=api) or [])
    send(api, topic, *texts("a", "b"))
    assert unload_topic.sync_detailed(*NS, topic, client=api).status_code == 204
    send(api, topic, *texts("c"))
    internal = get_internal_stats.sync(*NS, topic, client=api)
    assert internal is not None and not isinstance(internal, Problem)
    assert internal.number_of_entries == 2 and len(internal.ledgers) >= 2, "unload closes the ledger"
    assert internal.compacted_ledger.ledger_id == -1
    status = get_compaction_status.sync(*NS, topic, client=api)
    assert status is not None and not isinstance(status, Problem) and status.status.value == "NOT_RUN"
    parted = new_topic()
    assert create_partitioned_topic.sync_detailed(*NS, parted, client=api, body=3).status_code == 204
    partitions = get_partitions.sync(*NS, parted, client=api)
    assert partitions is not None and not isinstance(partitions, Problem) and partitions.partitions == 3
    ids = send(api, parted, *[ProduceMessage(key=f"k{i}", value=str(i)) for i in range(6)])
    assert len(ids) == 6
    assert delete_topic.sync_detailed(*NS, topic, client=api, force=True).status_code == 204
    problem_of(get_topic_stats.sync_detailed(*NS, topic, client=api), 404)


def test_policies(api: Client) -> None:
    topic = new_topic()
    send(api, topic, *texts("a"))
    policy = RetentionPolicy(retention_time_in_minutes=60, retention_size_in_mb=-1)
    assert set_retention.sync_detailed(*NS, topic, client=api, body=policy).status_code == 204
    got = get_retention.sync(*NS, topic, client=api)
    assert (
        isinstance(got, RetentionPolicy)
        and got.retention_time_in_minutes == 60
        and got.retention_size_in_mb == -1
    )
    assert remove_retention.sync_detailed(*NS, topic, client=api).status_code == 204
    assert set_deduplication_enabled.sync_detailed(*NS, topic, client=api, body=True).status_code == 204
    assert get_deduplication_enabled.sync(*NS, topic, client=api) is True
    rollover = get_rollover_policy.sync(*NS, topic, client=api)
    assert rollover is not None and not isinstance(rollover, Problem) and rollover.max_entries_per_ledger > 0


def test_dedup_reports_duplicates_and_stores_nothing(api: Client) -> None:
    topic = new_topic()
    send(api, topic, *texts("seed"))
    set_deduplication_enabled.sync_detailed(*NS, topic, client=api, body=True)
    first = produce.sync(
        *NS,
        topic,
        client=api,
        body=ProduceRequest(producer_name="d", messages=[ProduceMessage(value="1", sequence_id=1)]),
    )
    assert first is not None and not isinstance(first, Problem) and first.results[0].duplicate is False
    before = last_id(api, topic)
    again = produce.sync(
        *NS,
        topic,
        client=api,
        body=ProduceRequest(producer_name="d", messages=[ProduceMessage(value="1", sequence_id=1)]),
    )
    assert again is not None and not isinstance(again, Problem)
    assert again.results[0].duplicate is True and again.results[0].message_id is None
    assert last_id(api, topic) == before


def test_tenants_and_namespaces(api: Client) -> None:
    tenant = f"ten-{uuid.uuid4().hex[:8]}"
    assert "public" in (list_tenants.sync(client=api) or [])
    assert create_tenant.sync_detailed(tenant, client=api).status_code == 204
    problem_of(create_tenant.sync_detailed(tenant, client=api), 409)
    assert create_namespace.sync_detailed(tenant, "ns", client=api).status_code == 204
    assert list_namespaces.sync(tenant, client=api) == [f"{tenant}/ns"]
    assert delete_namespace.sync_detailed(tenant, "ns", client=api).status_code == 204
    assert delete_tenant.sync_detailed(tenant, client=api).status_code == 204
    problem_of(list_namespaces.sync_detailed(tenant, client=api), 404)


@pytest.mark.parametrize("n", [1000])
def test_large_batch_and_large_pull(api: Client, n: int) -> None:
    topic, sub = new_topic(), "bulk"
    subscribe(api, topic, sub)
    ids = send(api, topic, *texts(*[f"{i:0100d}" for i in range(n)]))
    assert len(ids) == n
    got = pull_until(api, topic, sub, n)
    assert [m.message_id for m in got] == ids
    body = AckRequest(message_ids=[m.message_id for m in got])
    assert ack_messages.sync_detailed(*NS, topic, sub, client=api, body=body).status_code == 204
    assert pull(api, topic, sub) == []
