"""The cap on a request body: over it is a 413 problem naming the setting, answered before the
body is read whole, and nothing is written; under it the request is served as usual. Run on both
entry points (fast path and FastAPI), with a declared length and chunked, and once live."""

from __future__ import annotations

from collections.abc import AsyncIterator

import httpx
import orjson
import pytest

from app.main import create_app
from managed_ledger.metadata.memory import InMemoryMetadataStore
from tests.api.conftest import LIMITS, Stack
from tests.topics.conftest import make_env

CAP = 6_000  # above the batch limit of LIMITS (5,000), as the settings require
TOPIC = "/v1/topics/public/default/capped"


def _produce_body(value_bytes: int) -> bytes:
    return orjson.dumps({"messages": [{"key": "k", "value": "x" * value_bytes}]})


async def _chunks(raw: bytes) -> AsyncIterator[bytes]:
    for i in range(0, len(raw), 1_000):
        yield raw[i : i + 1_000]


@pytest.fixture(params=[True, False], ids=["fast-path", "fastapi"])
async def capped(request: pytest.FixtureRequest) -> AsyncIterator[tuple[httpx.AsyncClient, object]]:
    env = await make_env(InMemoryMetadataStore(), LIMITS)
    app = create_app(env.service, close_topics=False, max_request_body_bytes=CAP)
    app.state.fast_path.enabled = request.param
    transport = httpx.ASGITransport(app=app, raise_app_exceptions=False)
    try:
        async with httpx.AsyncClient(transport=transport, base_url="http://quire") as client:
            yield client, env
    finally:
        await env.service.close()
        await env.factory.close()


def _assert_capped(r: httpx.Response) -> None:
    assert r.status_code == 413, r.text
    assert r.headers["content-type"] == "application/problem+json"
    body = r.json()
    assert body["title"] == "Request body too large" and body["limit"] == CAP
    assert "max_request_body_bytes" in body["detail"]


@pytest.mark.parametrize("chunked", [False, True], ids=["content-length", "chunked"])
async def test_over_the_cap_is_413_and_writes_nothing(
    capped: tuple[httpx.AsyncClient, object], chunked: bool
) -> None:
    client, env = capped
    raw = _produce_body(CAP)  # JSON framing makes it larger than CAP
    content = _chunks(raw) if chunked else raw
    r = await client.post(f"{TOPIC}/messages", content=content, headers={"content-type": "application/json"})
    _assert_capped(r)
    topics = await env.service.list_topics("public/default")  # type: ignore[attr-defined]
    assert "persistent://public/default/capped" not in topics


@pytest.mark.parametrize("chunked", [False, True], ids=["content-length", "chunked"])
async def test_under_the_cap_is_served(capped: tuple[httpx.AsyncClient, object], chunked: bool) -> None:
    client, _ = capped
    raw = _produce_body(100)
    content = _chunks(raw) if chunked else raw
    r = await client.post(f"{TOPIC}/messages", content=content, headers={"content-type": "application/json"})
    assert r.status_code == 200, r.text
    assert r.json()["results"][0]["duplicate"] is False


def test_live_broker_refuses_a_body_over_the_default_cap(stack: Stack) -> None:
    raw = b'{"messages": [{"value": "' + b"x" * (16 * 1024**2) + b'"}]}'
    r = httpx.post(f"{stack.base_url}{TOPIC}/messages", content=raw, timeout=30)
    assert r.status_code == 413, r.text
    assert r.json()["limit"] == 16 * 1024**2
    assert (
        httpx.get(f"{stack.base_url}/admin/v2/persistent/public/default", timeout=10)
        .json()
        .count("persistent://public/default/capped")
        == 0
    )
