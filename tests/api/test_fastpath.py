"""The raw-ASGI dispatcher and FastAPI, both generated from the hot-route table, answer alike.

Every hot route has a list of requests, valid and not. Each list runs twice, each time on a fresh
app over a fresh real TopicService with a manual clock: once with the dispatcher on, once with it
off (FastAPI serves everything). Every response must be identical (status, raw headers in order,
body), and the dispatcher must have served exactly the requests marked `fast` (it hands the rest,
such as names or query values it does not judge itself, to FastAPI).
"""

from __future__ import annotations

import base64
from dataclasses import dataclass
from typing import Any

import orjson
import pytest

from app.routes.table import HOT_ROUTES, RECEIVE, bind
from tests.api.conftest import served
from topics.errors import StorageUnavailableError

T = "/v1/topics/public/default/prices"
S = f"{T}/subscriptions/s"
BINARY = base64.b64encode(bytes(range(256))).decode()


@dataclass(frozen=True)
class Req:
    method: str
    path: str
    body: Any = None  # JSON-encoded unless bytes
    fast: bool = True  # whether the dispatcher serves it (False: it must fall through to FastAPI)


MESSAGES = [
    {"key": "k", "value": "a", "properties": {"x": "y"}, "event_time": 5, "sequence_id": 1},
    {"value": BINARY, "value_encoding": "base64"},
    {"value": None},
]
# Run before every route's cases; `{L}` in a later request is the ledger id these landed in.
SETUP = [
    Req("PUT", S, {"initial_position": "earliest"}, fast=False),
    Req("POST", f"{T}/messages", {"producer_name": "p", "messages": MESSAGES}),
]

CASES: dict[str, list[Req]] = {
    "produce": [
        Req("POST", f"{T}/messages", {"messages": [{"value": "more"}]}),
        Req("POST", f"{T}/messages", b"{nope"),
        Req("POST", f"{T}/messages", b""),
        Req("POST", f"{T}/messages", {"messages": [{"value": "x", "value_encoding": "hex"}]}),
        Req("POST", f"{T}/messages", {"messages": [{"value": "x" * 1001}]}),
        Req("POST", f"{T}/messages", {"messages": [{"value": "x"}] * 21}),
        Req("POST", f"{T}/messages", {"messages": [{"value": "x" * 900}] * 6}),
        Req("POST", "/v1/topics/public/nowhere/prices/messages", {"messages": [{}]}),
        Req("POST", "/v1/topics/public/default/bad%20name/messages", {"messages": [{}]}, fast=False),
        Req("POST", "/v1/topics/public/default/prices%0A/messages", {"messages": [{}]}, fast=False),
        Req("POST", "/v1/topics/public/default/a%2Fb/messages", {"messages": [{}]}, fast=False),
        Req("POST", "/v1/topics/public/%2E%2E/prices/messages", {"messages": [{}]}, fast=False),
        Req("POST", "/v1/topics/public/default/%2E/messages", {"messages": [{}]}, fast=False),
        Req("POST", "/v1/topics/public/default/.../messages", {"messages": [{"value": "dots"}]}),
        Req("POST", f"/v1/topics/public/default/{'x' * 129}/messages", {"messages": [{}]}, fast=False),
        Req("POST", f"{T}/messages/", {"messages": [{}]}, fast=False),
        Req("PUT", f"{T}/messages", {"messages": [{}]}, fast=False),
    ],
    "receive": [
        Req("GET", f"{S}/messages?max_messages=1"),
        Req("GET", f"{S}/messages?value_encoding=base64&max_messages=1&consumer_id=c1"),
        Req("GET", f"{S}/messages"),
        Req("GET", f"{S}/messages?wait_ms=501"),
        Req("GET", f"{S}/messages?max_messages=10001"),
        Req("GET", f"{S}/messages?max_messages=5&max_messages=007"),
        Req("GET", f"{T}/subscriptions/nobody/messages"),
        Req("GET", "/v1/topics/public/default/elsewhere/subscriptions/s/messages"),
        Req("GET", f"{S}/messages?max_messages=0", fast=False),
        Req("GET", f"{S}/messages?max_messages=%2B5", fast=False),
        Req("GET", f"{S}/messages?wait_ms=soon", fast=False),
        Req("GET", f"{S}/messages?wait_ms=", fast=False),
        Req("GET", f"{S}/messages?value_encoding=hex", fast=False),
        Req("GET", f"{S}/messages?consumer_id={'c' * 201}", fast=False),
        Req("GET", f"{T}/subscriptions/b$d/messages", fast=False),
    ],
    "ackMessages": [
        Req("GET", f"{S}/messages"),
        Req("POST", f"{S}/ack", {"message_ids": ["{L}:0:0"]}),
        Req("POST", f"{S}/ack", {"cumulative": "{L}:0:2"}),
        Req("POST", f"{S}/ack", {"message_ids": ["1:x:0"]}),
        Req("POST", f"{S}/ack", {"message_ids": ["1:2:0"], "cumulative": "1:2:0"}),
        Req("POST", f"{S}/ack", {"cumulative": 12}),
        Req("POST", f"{S}/ack", b"not json"),
        Req("POST", f"{T}/subscriptions/nobody/ack", {"message_ids": ["{L}:0:0"]}),
        Req("GET", f"{S}/ack", fast=False),
    ],
    "nackMessages": [
        Req("GET", f"{S}/messages"),
        Req("POST", f"{S}/nack", {"message_ids": ["{L}:0:1"]}),
        Req("GET", f"{S}/messages"),
        Req("POST", f"{S}/nack", {"message_ids": []}),
        Req("POST", f"{S}/nack", b"[]"),
        Req("POST", f"{T}/subscriptions/nobody/nack", {"message_ids": ["{L}:0:0"]}),
    ],
    "readMessages": [
        Req("GET", f"{T}/messages"),
        Req("GET", f"{T}/messages?start=earliest&max_messages=2"),
        Req("GET", f"{T}/messages?start=after:{{L}}:0:0&read_compacted=true&value_encoding=base64"),
        Req("GET", f"{T}/messages?start=latest&read_compacted=0"),
        Req("GET", f"{T}/messages?start=after:bogus"),
        Req("GET", f"{T}/messages?wait_ms=501"),
        Req("GET", f"{T}/messages?max_messages=10001"),
        Req("GET", "/v1/topics/public/default/unknown/messages"),
        Req("GET", f"{T}/messages?read_compacted=yes", fast=False),
        Req("GET", f"{T}/messages?max_messages=-1", fast=False),
        Req("GET", f"{T}/messages/{{L}}:0:0", fast=False),
    ],
}


def test_every_hot_route_has_cases() -> None:
    assert sorted(CASES) == sorted(route.operation_id for route in HOT_ROUTES)


def test_a_handler_that_drifted_from_its_row_is_refused() -> None:
    """Arguments go by position: a handler whose parameters differ from its row must not bind."""

    class Drifted:
        async def receive(  # max_messages and wait_ms swapped
            self, topic: str, subscription: str, wait_ms: int, max_messages: int, consumer_id: str, enc: str
        ) -> None: ...

    with pytest.raises(TypeError, match="receive"):
        bind(RECEIVE, Drifted())


async def run(
    requests: list[Req], fast: bool, fail_produce: Exception | None = None
) -> list[tuple[Any, ...]]:
    """Each request's (method, path, status, raw headers, body), on a fresh app and service."""
    async with served() as (env, app, client):
        if fail_produce is not None:

            async def fail(*args: object) -> None:
                raise fail_produce

            env.service.produce = fail  # type: ignore[method-assign, assignment]
        path = app.fast_path
        assert path is not None
        path.enabled = fast
        served_by_fast: list[bool] = []
        handle = path.handle

        async def spy(scope: Any, receive: Any, send: Any) -> bool:
            result: bool = await handle(scope, receive, send)
            served_by_fast.append(result)
            return result

        path.handle = spy  # type: ignore[method-assign]
        out: list[tuple[Any, ...]] = []
        ledger = ""
        for req in requests:
            body = req.body if isinstance(req.body, bytes) or req.body is None else orjson.dumps(req.body)
            target = req.path.replace("{L}", ledger)
            content = None if body is None else body.replace(b"{L}", ledger.encode())
            headers = {"content-type": "application/json"} if content is not None else {}
            r = await client.request(req.method, target, content=content, headers=headers)
            if not ledger and r.status_code == 200 and "results" in r.json():
                ledger = r.json()["results"][0]["message_id"].split(":")[0]
            out.append((req.method, target, r.status_code, r.headers.raw, r.content))
    assert served_by_fast == [req.fast and fast for req in requests]
    return out


@pytest.mark.parametrize("operation", sorted(CASES))
async def test_dispatcher_and_fastapi_answer_byte_for_byte(operation: str) -> None:
    requests = SETUP + CASES[operation]
    fast = await run(requests, fast=True)
    slow = await run(requests, fast=False)
    for a, b in zip(fast, slow, strict=True):
        assert a == b
    statuses = {status for _, _, status, _, _ in fast}
    assert 200 in statuses or 204 in statuses, "every route is served at least once"
    assert statuses & {400, 404, 413, 422}, "every route exercises errors"


@pytest.mark.parametrize(
    ("exc", "status"),
    [(RuntimeError("bug"), 500), (StorageUnavailableError("bookies down"), 503)],
)
async def test_unexpected_and_unavailable_errors_are_identical(exc: Exception, status: int) -> None:
    request = [Req("POST", f"{T}/messages", {"messages": [{"value": "a"}]})]
    fast, slow = [await run(request, on, fail_produce=exc) for on in (True, False)]
    assert fast == slow
    assert fast[0][2] == status


async def test_the_dispatcher_counts_errors_in_metrics() -> None:
    async with served() as s:
        r = await s.client.post(f"{T}/messages", content=b"{nope")
        assert r.status_code == 422
        metrics = (await s.client.get("/metrics")).text
    assert 'quire_http_errors_total{status="422"} 1.0' in metrics
