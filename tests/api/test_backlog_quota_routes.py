"""Backlog quota and namespace policy routes in process (the app over the real TopicService):
the 429 refusal answered alike by the fast path and by FastAPI, bad quotas 422 with nothing
changed, unknown namespaces 404. The live checks are tests/api/test_policies_live.py."""

from __future__ import annotations

from typing import Any

import pytest

from tests.api.conftest import served

ADMIN = "/admin/v2/persistent/public/default/quota"
PRODUCE = "/v1/topics/public/default/quota/messages"
NS = "/admin/v2/namespaces/public/default"
ONE = {"messages": [{"value": "x" * 50}]}


@pytest.mark.parametrize("fast", [True, False])
async def test_producer_exception_is_a_429_problem_on_both_produce_paths(fast: bool) -> None:
    async with served() as (_, app, client):
        assert app.fast_path is not None
        app.fast_path.enabled = fast
        assert (await client.put("/v1/topics/public/default/quota/subscriptions/s")).status_code == 201
        assert (await client.post(PRODUCE, json=ONE)).status_code == 200
        quota = {"limitSize": 0, "policy": "producer_exception"}
        assert (await client.post(f"{ADMIN}/backlogQuota", json=quota)).status_code == 204
        refused = await client.post(PRODUCE, json=ONE)
        assert refused.status_code == 429, refused.text
        assert refused.headers["content-type"] == "application/problem+json"
        assert refused.headers["retry-after"] == "1"
        body = refused.json()
        assert body["type"] == "https://quire.dev/problems/backlog-quota-exceeded"
        assert (body["quota_type"], body["policy"], body["limit"]) == (
            "destination_storage",
            "producer_exception",
            0,
        )
        stats = (await client.get(f"{ADMIN}/stats")).json()
        assert stats["msgInCounter"] == 1
        assert stats["backlogQuotaEvents"] == {"held": 0, "refused": 1, "evicted": 0}


BAD: list[tuple[str, Any]] = [
    ("destination_storage", {"limitSize": -1, "policy": "producer_exception"}),
    ("message_age", {"limitTime": -1, "policy": "producer_exception"}),
    ("destination_storage", {"limitSize": 5, "policy": "evict_everything"}),
    ("storage", {"limitSize": 5, "policy": "producer_exception"}),
    ("destination_storage", {"policy": "producer_exception"}),
    ("message_age", {"limitSize": 5, "limitTime": 0, "policy": "producer_exception"}),  # 0: no limit
    ("destination_storage", {"limitSize": -2, "policy": "producer_exception"}),
    ("destination_storage", {"limitSize": 5, "policy": "producer_exception", "limit": 5}),
    ("destination_storage", {"limitSize": 5}),
    ("destination_storage", "5"),
]


@pytest.mark.parametrize(("quota_type", "body"), BAD)
async def test_bad_quotas_are_422_problems_and_change_nothing(quota_type: str, body: Any) -> None:
    async with served() as (_, _app, client):
        assert (await client.put(ADMIN)).status_code == 204
        kept = {"limitTime": 60, "policy": "producer_request_hold"}
        assert (
            await client.post(f"{ADMIN}/backlogQuota?backlogQuotaType=message_age", json=kept)
        ).status_code == 204
        for path in (f"{ADMIN}/backlogQuota", f"{NS}/backlogQuota"):
            r = await client.post(f"{path}?backlogQuotaType={quota_type}", json=body)
            assert r.status_code == 422, (path, r.text)
            assert r.headers["content-type"] == "application/problem+json"
        got = (await client.get(f"{ADMIN}/backlogQuotaMap")).json()
        assert got == {"message_age": {"limitSize": None, "limitTime": 60, "policy": "producer_request_hold"}}
        assert (await client.get(f"{NS}/backlogQuotaMap")).json() == {}
        r = await client.delete(f"{ADMIN}/backlogQuota?backlogQuotaType=storage")
        assert r.status_code == 422


async def test_pulsar_admins_own_shape_is_taken() -> None:
    """What pulsar-admin sends by default: the limit it was not given as -1 (issue 22, defect 2)."""
    pulsar = {"limitSize": 20000, "limitTime": -1, "policy": "producer_exception"}
    async with served() as (_, _app, client):
        assert (await client.put(ADMIN)).status_code == 204
        for path in (ADMIN, NS):
            r = await client.post(f"{path}/backlogQuota?backlogQuotaType=destination_storage", json=pulsar)
            assert r.status_code == 204, r.text
            got = (await client.get(f"{path}/backlogQuotaMap")).json()
            assert got == {
                "destination_storage": {"limitSize": 20000, "limitTime": None, "policy": "producer_exception"}
            }
        age = {"limitSize": -1, "limitTime": 3600, "policy": "consumer_backlog_eviction"}
        r = await client.post(f"{ADMIN}/backlogQuota?backlogQuotaType=message_age", json=age)
        assert r.status_code == 204, r.text
        got = (await client.get(f"{ADMIN}/backlogQuotaMap")).json()["message_age"]
        assert got == {"limitSize": None, "limitTime": 3600, "policy": "consumer_backlog_eviction"}


@pytest.mark.parametrize("scope", [ADMIN, NS])
@pytest.mark.parametrize(
    ("quota_type", "field", "value"),
    [
        ("destination_storage", "limitSize", 777),
        ("destination_storage", "limitTime", 99),
        ("destination_storage", "policy", "consumer_backlog_eviction"),
        ("message_age", "limitSize", 888),
        ("message_age", "limitTime", 120),
        ("message_age", "policy", "producer_request_hold"),
    ],
)
async def test_a_quota_posted_in_part_keeps_the_other_fields(
    scope: str, quota_type: str, field: str, value: Any
) -> None:
    first = {"limitSize": 1000, "limitTime": 60, "policy": "producer_exception"}
    async with served() as (_, _app, client):
        assert (await client.put(ADMIN)).status_code == 204
        query = f"backlogQuota?backlogQuotaType={quota_type}"
        assert (await client.post(f"{scope}/{query}", json=first)).status_code == 204
        r = await client.post(f"{scope}/{query}", json={field: value})
        assert r.status_code == 204, r.text
        got = (await client.get(f"{scope}/backlogQuotaMap")).json()[quota_type]
        assert got == {**first, field: value}


async def test_a_topic_quota_posted_in_part_takes_the_namespaces_other_fields() -> None:
    async with served() as (_, _app, client):
        assert (await client.put(ADMIN)).status_code == 204
        ns_quota = {"limitSize": 1000, "policy": "producer_request_hold"}
        assert (await client.post(f"{NS}/backlogQuota", json=ns_quota)).status_code == 204
        assert (await client.post(f"{ADMIN}/backlogQuota", json={"limitSize": 5})).status_code == 204
        got = (await client.get(f"{ADMIN}/backlogQuotaMap")).json()["destination_storage"]
        assert got == {"limitSize": 5, "limitTime": None, "policy": "producer_request_hold"}
        assert (await client.get(f"{NS}/backlogQuotaMap")).json()["destination_storage"]["limitSize"] == 1000


async def test_namespace_policies_of_an_unknown_namespace_are_404() -> None:
    async with served() as (_, _app, client):
        for name in ("retention", "messageTTL", "compactionThreshold", "deduplication", "rolloverPolicy"):
            path = f"/admin/v2/namespaces/public/nowhere/{name}"
            assert (await client.get(path)).status_code == 404, name
            assert (await client.delete(path)).status_code == 404, name
        assert (await client.get("/admin/v2/namespaces/public/nowhere/backlogQuotaMap")).status_code == 404
        r = await client.post("/admin/v2/namespaces/public/nowhere/retention", json={"retentionSizeInMB": 1})
        assert r.status_code == 404 and r.json()["type"].endswith("namespace-not-found")


async def test_a_partial_namespace_policy_keeps_the_other_fields() -> None:
    async with served() as (_, _app, client):
        assert (await client.post(f"{NS}/retention", json={"retentionTimeInMinutes": 30})).status_code == 204
        assert (await client.post(f"{NS}/retention", json={"retentionSizeInMB": 7})).status_code == 204
        got = (await client.get(f"{NS}/retention")).json()
        assert got == {"retentionTimeInMinutes": 30, "retentionSizeInMB": 7}
        assert (await client.post(f"{NS}/retention", json={})).status_code == 422
        r = await client.post(f"{NS}/rolloverPolicy", json={"minRolloverTimeMs": 10**12})
        assert r.status_code == 422  # over the (default) max once merged
        assert (await client.delete(f"{NS}/retention")).status_code == 204
        assert (await client.get(f"{NS}/retention")).json() == {
            "retentionTimeInMinutes": 0,
            "retentionSizeInMB": 0,
        }
