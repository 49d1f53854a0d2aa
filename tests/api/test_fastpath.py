"""The raw-ASGI fast path (app.fastpath) answers byte for byte as the FastAPI routes do.

Each scenario is a sequence of requests run twice, each time on a fresh app over a fresh fake with
a frozen clock: once with the fast path on, once with it off (FastAPI serves everything). Every
response must be identical (status, raw headers in order, body), and the fast path must have
served exactly the requests it claims (the rest fell through to FastAPI).
"""

from __future__ import annotations

import base64
from dataclasses import dataclass
from typing import Any

import httpx
import pytest

from app.codec import Limits, parse_id_list, parse_message_id, parse_produce
from app.errors import ApiError
from app.main import create_app
from managed_ledger.entry_format import Message
from tests.api.fakes import FakeTopics
from topics.errors import StorageUnavailableError

T = "/v1/topics/public/default/prices"
S = f"{T}/subscriptions/s"
LIMITS = Limits(
    max_message_size_bytes=1000, max_batch_size_bytes=5000, max_batch_messages=20, max_wait_ms=500
)
BINARY = base64.b64encode(bytes(range(256))).decode()


@dataclass(frozen=True)
class Req:
    method: str
    path: str
    body: bytes | None = None
    fast: bool = True  # whether the fast path should serve it (False: FastAPI must)


def j(value: Any) -> bytes:
    import orjson

    return orjson.dumps(value)


SETUP = [
    Req("PUT", S, j({"initial_position": "earliest"}), fast=False),
    Req(
        "POST",
        f"{T}/messages",
        j(
            {
                "producer_name": "p",
                "messages": [
                    {"key": "k", "value": "a", "properties": {"x": "y"}, "event_time": 5, "sequence_id": 1},
                    {"value": BINARY, "value_encoding": "base64"},
                    {"value": None},
                ],
            }
        ),
    ),
]

PRODUCE_ERRORS = [
    Req("POST", f"{T}/messages", b"{nope"),
    Req("POST", f"{T}/messages", b""),
    Req("POST", f"{T}/messages", b"[]"),
    Req("POST", f"{T}/messages", j({"messages": []})),
    Req("POST", f"{T}/messages", j({"producer_name": 3, "messages": [{}]})),
    Req("POST", f"{T}/messages", j({"messages": [{"value": "x", "value_encoding": "hex"}]})),
    Req("POST", f"{T}/messages", j({"messages": [{"value": "!!", "value_encoding": "base64"}]})),
    Req("POST", f"{T}/messages", j({"messages": [{"value": "x", "event_time": -1}]})),
    Req("POST", f"{T}/messages", j({"messages": [{"value": "x" * 1001}]})),
    Req("POST", f"{T}/messages", j({"messages": [{"value": "x"}] * 21})),
    Req("POST", f"{T}/messages", j({"messages": [{"value": "x" * 900}] * 6})),
    # Names the fast path leaves to FastAPI's validation (422), or to its router (404).
    Req("POST", "/v1/topics/public/default/bad%20name/messages", j({"messages": [{}]}), fast=False),
    Req("POST", "/v1/topics/public/default/prices%0A/messages", j({"messages": [{}]}), fast=False),
    Req("POST", "/v1/topics/public/default/a%2Fb/messages", j({"messages": [{}]}), fast=False),
    Req("POST", f"/v1/topics/public/default/{'x' * 129}/messages", j({"messages": [{}]}), fast=False),
    Req("POST", f"{T}/messages/", j({"messages": [{}]}), fast=False),
    Req("PUT", f"{T}/messages", j({"messages": [{}]}), fast=False),
]

RECEIVE = [
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
]

ACK = [
    Req("POST", f"{S}/ack", j({"message_ids": ["7:0:0"]})),
    Req("POST", f"{S}/ack", j({"cumulative": "7:0:2"})),
    Req("POST", f"{S}/ack", j({"message_ids": ["1:x:0"]})),
    Req("POST", f"{S}/ack", j({"message_ids": ["1:2:0"], "cumulative": "1:2:0"})),
    Req("POST", f"{S}/ack", j({})),
    Req("POST", f"{S}/ack", j({"cumulative": 12})),
    Req("POST", f"{S}/ack", b"not json"),
    Req("POST", f"{T}/subscriptions/nobody/ack", j({"message_ids": ["7:0:0"]})),
    Req("POST", f"{S}/nack", j({"message_ids": ["7:0:1"]}), fast=False),
    Req("GET", f"{S}/ack", fast=False),
]

READ = [
    Req("GET", f"{T}/messages"),
    Req("GET", f"{T}/messages?start=earliest&max_messages=2"),
    Req("GET", f"{T}/messages?start=after:7:0:0&read_compacted=true&value_encoding=base64"),
    Req("GET", f"{T}/messages?start=latest&read_compacted=0"),
    Req("GET", f"{T}/messages?start=after:bogus"),
    Req("GET", f"{T}/messages?wait_ms=501"),
    Req("GET", "/v1/topics/public/default/unknown/messages"),
    Req("GET", f"{T}/messages?read_compacted=yes", fast=False),
    Req("GET", f"{T}/messages?max_messages=-1", fast=False),
    Req("GET", f"{T}/messages/7:0:0", fast=False),
]

SCENARIOS = {
    "produce": SETUP + PRODUCE_ERRORS,
    "receive": SETUP + RECEIVE,
    "ack": [*SETUP, Req("GET", f"{S}/messages"), *ACK],
    "read": SETUP + READ,
}


async def run(requests: list[Req], fast: bool, fake: FakeTopics | None = None) -> list[tuple[Any, ...]]:
    app = create_app(fake or FakeTopics(), limits=LIMITS)
    path = app.fast_path
    assert path is not None
    path.enabled = fast
    served: list[bool] = []
    handle = path.handle

    async def spy(scope: Any, receive: Any, send: Any) -> bool:
        result = await handle(scope, receive, send)
        served.append(result)
        return result

    path.handle = spy  # type: ignore[method-assign]
    transport = httpx.ASGITransport(app=app, raise_app_exceptions=False)
    out: list[tuple[Any, ...]] = []
    async with httpx.AsyncClient(transport=transport, base_url="http://quire") as client:
        for req in requests:
            headers = {"content-type": "application/json"} if req.body is not None else {}
            r = await client.request(req.method, req.path, content=req.body, headers=headers)
            out.append((req.method, req.path, r.status_code, r.headers.raw, r.content))
    expected = [req.fast and fast for req in requests]
    assert served == expected
    return out


@pytest.fixture(autouse=True)
def frozen_clock(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("tests.api.fakes.time.time", lambda: 1_700_000_000.0)


@pytest.mark.parametrize("scenario", sorted(SCENARIOS))
async def test_fast_path_and_fastapi_answer_byte_for_byte(scenario: str) -> None:
    requests = SCENARIOS[scenario]
    fast = await run(requests, fast=True)
    slow = await run(requests, fast=False)
    for a, b in zip(fast, slow, strict=True):
        assert a == b
    statuses = {status for _, _, status, _, _ in fast}
    assert statuses & {400, 404, 413, 422}, "every scenario exercises errors"


@pytest.mark.parametrize(
    ("exc", "status"),
    [(RuntimeError("bug"), 500), (StorageUnavailableError("bookies down"), 503)],
)
async def test_unexpected_and_unavailable_errors_are_identical(exc: Exception, status: int) -> None:
    async def fail(*args: object) -> None:
        raise exc

    answers = []
    for fast in (True, False):
        fake = FakeTopics()
        fake.produce = fail  # type: ignore[method-assign, assignment]
        answers.append(
            await run([Req("POST", f"{T}/messages", j({"messages": [{"value": "a"}]}))], fast, fake)
        )
    assert answers[0] == answers[1]
    assert answers[0][0][2] == status


async def test_the_fast_path_counts_errors_in_metrics() -> None:
    app = create_app(FakeTopics(), limits=LIMITS)
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://quire") as client:
        r = await client.post(f"{T}/messages", content=b"{nope")
        assert r.status_code == 422
        metrics = (await client.get("/metrics")).text
    assert 'quire_http_errors_total{status="422"} 1.0' in metrics


@pytest.mark.parametrize(
    "text",
    [
        "1:2:3",
        "007:1:0",
        "1:2",
        "٣:1:0",
        "²:1:0",
        "-1:0:0",
        "1:x:0",
        " 1:2:3",
        "1:2:3:4",
        "",
        "1::3",
        5,
        None,
    ],
)
def test_plain_id_parsing_agrees_with_message_id_parse(text: object) -> None:
    """codec's cheap path for plain `L:E:B` ids gives what MessageId.parse gives, errors included."""

    def outcome(parse: Any) -> object:
        try:
            return parse()
        except ApiError as exc:
            return (exc.status, exc.detail)

    fast = outcome(lambda: parse_id_list({"message_ids": ["9:9:9", text]}))
    slow = outcome(lambda: [parse_message_id(t, f"message_ids[{i}]") for i, t in enumerate(["9:9:9", text])])
    assert fast == slow


@pytest.mark.parametrize(
    ("message", "expected"),
    [
        ({"value": "x"}, Message(b"x")),
        ({"key": "k"}, Message(b"", "k")),
        ({"event_time": 5}, Message(b"", event_time=5)),
        ({"value_encoding": "base64"}, Message(b"")),
        ({"properties": {"a": 1}}, 422),
        ({"sequence_id": -1}, 422),
    ],
)
def test_one_field_messages_keep_that_field(message: dict[str, object], expected: object) -> None:
    """codec's shortcut for value-only messages must not drop or skip checking any other field."""
    try:
        _, messages = parse_produce(j({"messages": [message]}), LIMITS)
    except ApiError as exc:
        assert exc.status == expected
        return
    assert messages == [expected]
