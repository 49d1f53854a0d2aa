"""The REST contract in process: the app over the real TopicService (in-memory ledgers and
metadata, a manual clock), called through httpx's ASGI transport (see tests/api/conftest.py).

The live tests (test_live_*.py) run the contract through the generated client against a real
broker and bookie processes; these are the fast ones: parsing, status codes, problem+json,
limits, and the semantics behind each route.
"""

from __future__ import annotations

import base64

import httpx
import pytest

from managed_ledger.position import MessageId
from tests.api.conftest import served
from tests.topics.conftest import Env
from topics.config import TopicsConfig

T = "/v1/topics/public/default/prices"
ADMIN = "/admin/v2/persistent/public/default"


async def nothing_written(env: Env) -> bool:
    """True when no topic exists: bad input neither wrote nor auto-created anything."""
    return await env.service.list_topics("public/default") == []


def assert_problem(r: httpx.Response, status: int, *words: str) -> dict[str, object]:
    assert r.status_code == status, r.text
    assert r.headers["content-type"] == "application/problem+json"
    body = r.json()
    assert {"type", "title", "status", "detail"} <= body.keys()
    assert body["status"] == status
    for w in words:
        assert w in str(body["detail"]), body
    return dict(body)


async def produce(client: httpx.AsyncClient, *messages: dict[str, object], topic: str = T) -> list[str]:
    r = await client.post(f"{topic}/messages", json={"producer_name": "p", "messages": list(messages)})
    assert r.status_code == 200, r.text
    return [x["message_id"] for x in r.json()["results"]]


async def test_produce_returns_ids_in_order_and_reads_round_trip(client: httpx.AsyncClient) -> None:
    binary = bytes(range(256))
    ids = await produce(
        client,
        {"key": "AAPL", "value": "189.20", "properties": {"src": "feed"}, "event_time": 5, "sequence_id": 1},
        {"value": base64.b64encode(binary).decode(), "value_encoding": "base64"},
        {"key": None},
    )
    parsed = [MessageId.parse(i) for i in ids]
    assert [p.batch_index for p in parsed] == [0, 1, 2]
    assert len({p.position for p in parsed}) == 1  # one batch, one entry
    page = (await client.get(f"{T}/messages", params={"start": "earliest"})).json()
    first, second, third = page["messages"]
    assert first["value"] == "189.20" and first["value_encoding"] == "text"
    assert first["key"] == "AAPL" and first["properties"] == {"src": "feed"}
    assert first["event_time"] == 5 and first["sequence_id"] == 1 and first["producer_name"] == "p"
    assert second["value_encoding"] == "base64" and base64.b64decode(second["value"]) == binary
    assert third["value"] == "" and third["key"] is None
    forced = (await client.get(f"{T}/messages/{ids[0]}", params={"value_encoding": "base64"})).json()
    assert forced["value_encoding"] == "base64" and base64.b64decode(forced["value"]) == b"189.20"
    assert page["next"] == f"after:{ids[2]}"


@pytest.mark.parametrize(
    ("body", "words"),
    [
        (b"{not json", ["not valid JSON"]),
        (b"", ["empty"]),
        (b"[]", ["JSON object"]),
        (b'{"messages": []}', ["non-empty"]),
        (b'{"messages": [{"value": 1}]}', ["messages[0].value"]),
        (
            b'{"messages": [{"value": "x"}, {"value": "x", "value_encoding": "hex"}]}',
            ["messages[1].value_encoding"],
        ),
        (b'{"messages": [{"value": "%%%", "value_encoding": "base64"}]}', ["base64"]),
        (b'{"messages": [{"key": 5}]}', ["messages[0].key"]),
        (b'{"messages": [{"properties": {"a": 1}}]}', ["properties"]),
        (b'{"messages": [{"event_time": "soon"}]}', ["event_time"]),
        (b'{"messages": [{"sequence_id": -1}]}', ["sequence_id"]),
        (b'{"messages": [{"sequence_id": true}]}', ["sequence_id"]),
        (b'{"producer_name": 3, "messages": [{}]}', ["producer_name"]),
    ],
)
async def test_malformed_produce_is_422_and_writes_nothing(
    client: httpx.AsyncClient, env: Env, body: bytes, words: list[str]
) -> None:
    r = await client.post(f"{T}/messages", content=body, headers={"content-type": "application/json"})
    assert_problem(r, 422, *words)
    assert await nothing_written(env)


async def test_limits_are_413_naming_the_limit(client: httpx.AsyncClient, env: Env) -> None:
    r = await client.post(f"{T}/messages", json={"messages": [{"value": "x" * 1001}]})
    assert assert_problem(r, 413, "max_message_size_bytes")["limit"] == 1000
    r = await client.post(f"{T}/messages", json={"messages": [{"value": "x"}] * 21})
    assert assert_problem(r, 413, "max_batch_messages")["limit"] == 20
    r = await client.post(f"{T}/messages", json={"messages": [{"value": "x" * 900}] * 6})
    assert assert_problem(r, 413, "max_batch_size_bytes")["limit"] == 5000
    # A message's size counts its key and properties in UTF-8 bytes, not only its value.
    r = await client.post(f"{T}/messages", json={"messages": [{"key": "\u00e9" * 300, "value": "x" * 401}]})
    assert assert_problem(r, 413, "max_message_size_bytes")["size"] == 1001
    r = await client.post(f"{T}/messages", json={"messages": [{"properties": {"k" * 500: "v" * 501}}]})
    assert assert_problem(r, 413, "max_message_size_bytes")["size"] == 1001
    assert await nothing_written(env)


async def test_bad_names_are_422(client: httpx.AsyncClient) -> None:
    r = await client.post("/v1/topics/public/default/bad%20name/messages", json={"messages": [{}]})
    assert_problem(r, 422, "topic")
    r = await client.get("/v1/topics/public/de$fault/prices/messages")
    assert_problem(r, 422)
    # `.` and `..` are refused as names (percent-encoded, so no client resolves them as a path).
    r = await client.post("/v1/topics/public/default/%2E%2E/messages", json={"messages": [{}]})
    assert_problem(r, 422, "topic")


async def test_auto_creation_off_is_404() -> None:
    async with served(TopicsConfig(allow_auto_topic_creation=False)) as s:
        r = await s.client.post(f"{T}/messages", json={"messages": [{"value": "a"}]})
        assert_problem(r, 404, "public/default/prices")


async def test_subscription_flow(client: httpx.AsyncClient) -> None:
    sub = f"{T}/subscriptions/s1"
    assert (await client.put(sub, json={"initial_position": "earliest"})).status_code == 201
    assert (await client.put(sub)).status_code == 200
    await produce(client, {"value": "a"}, {"value": "b"}, {"value": "c"})
    got = (await client.get(f"{sub}/messages", params={"max_messages": 10})).json()["messages"]
    assert [m["value"] for m in got] == ["a", "b", "c"]
    assert all(m["redelivery_count"] == 0 for m in got)
    assert (await client.post(f"{sub}/ack", json={"message_ids": [got[0]["message_id"]]})).status_code == 204
    assert (await client.post(f"{sub}/nack", json={"message_ids": [got[1]["message_id"]]})).status_code == 204
    again = (await client.get(f"{sub}/messages")).json()["messages"]
    assert [(m["value"], m["redelivery_count"]) for m in again] == [("b", 1)]
    assert (await client.post(f"{sub}/ack", json={"cumulative": got[2]["message_id"]})).status_code == 204
    assert (await client.post(f"{sub}/seek", json={"message_id": "earliest"})).status_code == 204
    assert len((await client.get(f"{sub}/messages")).json()["messages"]) == 3
    assert (await client.post(f"{sub}/seek", json={"timestamp": 0})).status_code == 204
    stats = (await client.get(f"{ADMIN}/prices/stats")).json()
    assert stats["subscriptions"]["s1"]["type"] == "shared"
    assert (await client.delete(sub)).status_code == 204
    assert_problem(await client.get(f"{sub}/messages"), 404, "s1")


@pytest.mark.parametrize(
    ("params", "status", "words"),
    [
        ({"wait_ms": 501}, 400, ["max_wait_ms", "500"]),
        ({"max_messages": 10_001}, 400, ["max_messages_per_read"]),
        ({"max_messages": 0}, 422, ["max_messages"]),
        ({"wait_ms": "soon"}, 422, ["wait_ms"]),
    ],
)
async def test_bad_queries(
    client: httpx.AsyncClient, params: dict[str, object], status: int, words: list[str]
) -> None:
    await client.put(f"{T}/subscriptions/s")
    assert_problem(await client.get(f"{T}/subscriptions/s/messages", params=params), status, *words)
    assert_problem(await client.get(f"{T}/messages", params=params), status, *words)


@pytest.mark.parametrize(
    ("path", "body", "words"),
    [
        ("ack", {"message_ids": ["1:x:0"]}, ["message_ids[0]"]),
        ("ack", {"message_ids": ["1:2:0"], "cumulative": "1:2:0"}, ["exactly one"]),
        ("ack", {}, ["exactly one"]),
        ("ack", {"cumulative": 12}, ["cumulative"]),
        ("nack", {"message_ids": []}, ["message_ids"]),
        ("seek", {"message_id": "nowhere"}, ["message_id"]),
        ("seek", {"timestamp": -5}, ["timestamp"]),
        ("seek", {}, ["exactly one"]),
    ],
)
async def test_bad_bodies_are_422(
    client: httpx.AsyncClient, path: str, body: dict[str, object], words: list[str]
) -> None:
    await client.put(f"{T}/subscriptions/s")
    assert_problem(await client.post(f"{T}/subscriptions/s/{path}", json=body), 422, *words)


async def test_readers_page_with_next(client: httpx.AsyncClient) -> None:
    for i in range(5):
        await produce(client, {"value": str(i)})
    start, seen = "earliest", []
    while True:
        page = (await client.get(f"{T}/messages", params={"start": start, "max_messages": 2})).json()
        if page["next"] is None:
            break
        seen += [m["value"] for m in page["messages"]]
        start = page["next"]
    assert seen == ["0", "1", "2", "3", "4"]
    assert_problem(await client.get(f"{T}/messages", params={"start": "after:bogus"}), 422, "start")
    last = (await client.get(f"{T}/last-message-id")).json()["message_id"]
    assert (await client.get(f"{T}/messages/{last}")).json()["value"] == "4"
    ledger = MessageId.parse(last).ledger_id
    assert_problem(await client.get(f"{T}/messages/{ledger}:9:0"), 404, f"{ledger}:9:0")
    assert_problem(await client.get(f"{T}/messages/seven"), 422, "message_id")
    assert_problem(await client.get("/v1/topics/public/default/none/last-message-id"), 404)


async def test_admin_topics_policies_compaction(client: httpx.AsyncClient) -> None:
    assert (await client.put(f"{ADMIN}/t1")).status_code == 204
    assert_problem(await client.put(f"{ADMIN}/t1"), 409, "already exists")
    assert (await client.put(f"{ADMIN}/t2/partitions", json=4)).status_code == 204
    assert (await client.get(f"{ADMIN}/t2/partitions")).json() == {"partitions": 4}
    assert_problem(await client.put(f"{ADMIN}/t3/partitions", json=0), 422)
    assert (await client.get(ADMIN)).json() == [
        "persistent://public/default/t1",
        "persistent://public/default/t2",
    ]
    internal = (await client.get(f"{ADMIN}/t1/internalStats")).json()
    assert internal["compactedLedger"] == {"ledgerId": -1, "entries": -1, "size": -1}
    assert (await client.get(f"{ADMIN}/t1/retention")).json() == {
        "retentionTimeInMinutes": 0,
        "retentionSizeInMB": 0,
    }
    body = {"retentionTimeInMinutes": 60, "retentionSizeInMB": -1}
    assert (await client.post(f"{ADMIN}/t1/retention", json=body)).status_code == 204
    assert (await client.get(f"{ADMIN}/t1/retention")).json() == body
    assert_problem(await client.post(f"{ADMIN}/t1/retention", json={"retentionTimeInMinutes": -2}), 422)
    assert (await client.post(f"{ADMIN}/t1/deduplicationEnabled", json=True)).status_code == 204
    assert (await client.get(f"{ADMIN}/t1/deduplicationEnabled")).json() is True
    assert (await client.delete(f"{ADMIN}/t1/deduplicationEnabled")).status_code == 204
    assert (await client.get(f"{ADMIN}/t1/deduplicationEnabled")).json() is False
    assert (await client.post(f"{ADMIN}/t1/compactionThreshold", json=1024)).status_code == 204
    assert (await client.get(f"{ADMIN}/t1/compactionThreshold")).json() == 1024
    assert (await client.get(f"{ADMIN}/t1/rolloverPolicy")).json()["maxEntriesPerLedger"] == 50_000
    assert (await client.get(f"{ADMIN}/t1/compaction")).json()["status"] == "NOT_RUN"
    await client.put("/v1/topics/public/default/t1/subscriptions/s")
    assert (await client.get(f"{ADMIN}/t1/subscriptions")).json() == ["s"]
    assert (await client.post(f"{ADMIN}/t1/subscription/s/resetcursor/0")).status_code == 204
    assert_problem(await client.delete(f"{ADMIN}/t1"), 409, "force")
    assert (await client.delete(f"{ADMIN}/t1/subscription/s")).status_code == 204
    assert (await client.delete(f"{ADMIN}/t1", params={"force": "true"})).status_code == 204
    assert_problem(await client.get(f"{ADMIN}/t1/stats"), 404)


async def test_a_second_compaction_trigger_is_409_while_one_is_requested(client: httpx.AsyncClient) -> None:
    """Once a PUT is accepted the run counts as RUNNING, and another PUT is refused until it ends."""
    assert (await client.put(f"{ADMIN}/t1")).status_code == 204
    assert (await client.put(f"{ADMIN}/t1/compaction")).status_code == 204
    assert (await client.get(f"{ADMIN}/t1/compaction")).json()["status"] == "RUNNING"
    assert_problem(await client.put(f"{ADMIN}/t1/compaction"), 409, "already running")


async def test_tenants_and_namespaces(client: httpx.AsyncClient) -> None:
    assert (await client.get("/admin/v2/tenants")).json() == ["public"]
    assert (await client.put("/admin/v2/tenants/acme")).status_code == 204
    assert_problem(await client.put("/admin/v2/tenants/acme"), 409)
    assert (await client.put("/admin/v2/namespaces/acme/ns")).status_code == 204
    assert (await client.get("/admin/v2/namespaces/acme")).json() == ["acme/ns"]
    assert (await client.get("/admin/v2/namespaces/acme/ns")).json() == {"name": "acme/ns", "topics": []}
    assert_problem(await client.delete("/admin/v2/tenants/acme"), 409)
    assert (await client.delete("/admin/v2/namespaces/acme/ns")).status_code == 204
    assert (await client.delete("/admin/v2/tenants/acme")).status_code == 204
    assert_problem(await client.get("/admin/v2/namespaces/acme"), 404, "acme")


async def test_ops_endpoints(client: httpx.AsyncClient) -> None:
    assert (await client.get("/healthz")).json() == {"status": "ok"}
    assert (await client.get("/readyz")).json() == {
        "ready": True,
        "checks": {"metadata": True, "bookies": True},
    }
    await produce(client, {"value": "abc"})
    await client.get("/v1/topics/public/default/none/messages")
    text = (await client.get("/metrics")).text
    assert "quire_messages_in_total 1.0" in text
    assert 'quire_http_errors_total{status="404"} 1.0' in text


async def test_unexpected_error_is_500_problem(client: httpx.AsyncClient, env: Env) -> None:
    async def boom(*args: object) -> None:
        raise RuntimeError("bug")

    env.service.last_message_id = boom  # type: ignore[method-assign, assignment]
    assert_problem(await client.get(f"{T}/last-message-id"), 500, "RuntimeError")


async def test_unknown_path_and_method_are_problems(client: httpx.AsyncClient) -> None:
    assert_problem(await client.get("/nowhere"), 404)
    assert_problem(await client.delete("/healthz"), 405)
