"""compactionPolicy routes in process (the app over the real TopicService), on a topic and on a
namespace: GET answers the effective policy, a POST may carry some fields only (the others keep
the scope's own value, else the next level's), DELETE falls back, and bad bodies are 422
problem+json that change nothing. The live checks are tests/api/test_compaction_policy_live.py."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from tests.api.conftest import served

TOPIC = "/admin/v2/persistent/public/default/cpol"
NS = "/admin/v2/namespaces/public/default"
DEFAULT = {"keylessPolicy": "drop", "deleteRetentionMs": 0, "maxLagMs": 0, "minCleanableDirtyRatio": 0.0}


async def policy(client: httpx.AsyncClient, base: str) -> dict[str, Any]:
    got = await client.get(f"{base}/compactionPolicy")
    assert got.status_code == 200, got.text
    body: dict[str, Any] = got.json()
    return body


async def post(client: httpx.AsyncClient, base: str, body: Any) -> httpx.Response:
    return await client.post(f"{base}/compactionPolicy", json=body)


async def test_topic_policy_partial_posts_fall_back_field_by_field() -> None:
    async with served() as (_, _app, client):
        assert (await client.put(TOPIC)).status_code == 204
        assert await policy(client, TOPIC) == DEFAULT
        assert await policy(client, NS) == DEFAULT
        # the namespace's fields show through where the topic has none of its own
        assert (await post(client, NS, {"maxLagMs": 60_000, "keylessPolicy": "keep"})).status_code == 204
        assert (await post(client, TOPIC, {"deleteRetentionMs": 5_000})).status_code == 204
        assert (await post(client, TOPIC, {"minCleanableDirtyRatio": 0.5})).status_code == 204
        assert await policy(client, TOPIC) == {
            "keylessPolicy": "keep",
            "deleteRetentionMs": 5_000,
            "maxLagMs": 60_000,
            "minCleanableDirtyRatio": 0.5,
        }
        # the topic's own value wins; a later namespace change shows through the others
        assert (await post(client, TOPIC, {"keylessPolicy": "drop", "maxLagMs": 0})).status_code == 204
        assert (await post(client, NS, {"maxLagMs": 1})).status_code == 204
        assert (await policy(client, TOPIC))["maxLagMs"] == 0
        assert await policy(client, NS) == {**DEFAULT, "keylessPolicy": "keep", "maxLagMs": 1}
        # DELETE drops the topic's own fields, all of them: the namespace's apply
        assert (await client.delete(f"{TOPIC}/compactionPolicy")).status_code == 204
        assert await policy(client, TOPIC) == {**DEFAULT, "keylessPolicy": "keep", "maxLagMs": 1}
        assert (await client.delete(f"{NS}/compactionPolicy")).status_code == 204
        assert await policy(client, TOPIC) == DEFAULT


BAD: list[Any] = [
    {"deleteRetentionMs": -1},
    {"maxLagMs": -1},
    {"minCleanableDirtyRatio": -0.5},
    {"minCleanableDirtyRatio": 1.5},
    {"keylessPolicy": "shred"},
    {"maxLagMs": "60000"},
    {"deleteRetentionMs": 1.5},
    {"deleteRetentionMs": True},
    {"minCleanableDirtyRatio": "0.5"},
    {"maxLagMs": 5, "compactionThreshold": 5},  # an unknown field
    {},
    [1],
    "keep",
]


@pytest.mark.parametrize("body", BAD)
@pytest.mark.parametrize("base", [TOPIC, NS])
async def test_bad_bodies_are_422_problems_and_change_nothing(base: str, body: Any) -> None:
    async with served() as (_, _app, client):
        assert (await client.put(TOPIC)).status_code == 204
        kept = {"deleteRetentionMs": 7, "maxLagMs": 8, "minCleanableDirtyRatio": 0.25}
        assert (await post(client, base, kept)).status_code == 204
        before = await policy(client, base)
        refused = await post(client, base, body)
        assert refused.status_code == 422, refused.text
        assert refused.headers["content-type"] == "application/problem+json"
        assert refused.json()["status"] == 422 and refused.json()["detail"]
        assert await policy(client, base) == before


async def test_unknown_scopes_are_404() -> None:
    async with served() as (_, _app, client):
        for base in ("/admin/v2/persistent/public/nowhere/t", "/admin/v2/namespaces/public/nowhere"):
            for method in ("GET", "POST", "DELETE"):
                body = {"maxLagMs": 1} if method == "POST" else None
                got = await client.request(method, f"{base}/compactionPolicy", json=body)
                assert got.status_code == 404, (method, base, got.text)
                assert got.headers["content-type"] == "application/problem+json"
