"""Every object policy, at topic and namespace level, posted with one field only: the POST is
taken and the other fields keep their effective value (the REST contract, "Policies"; issue 22, defect 1:
a topic's rolloverPolicy with two fields was refused, "Field required"). Backlog quotas, which
are posted per type, have the same test in test_backlog_quota_routes.py. In process, over the
real TopicService."""

from __future__ import annotations

from typing import Any

import pytest

from tests.api.conftest import served

TOPIC = "/admin/v2/persistent/public/default/partial"
NS = "/admin/v2/namespaces/public/default"
# policy -> a value for each of its fields unlike its default
FIELDS: dict[str, dict[str, Any]] = {
    "retention": {"retentionTimeInMinutes": 60, "retentionSizeInMB": -1},
    "rolloverPolicy": {
        "maxEntriesPerLedger": 2,
        "maxSizePerLedgerBytes": 4096,
        "minRolloverTimeMs": 0,
        "maxRolloverTimeMs": 7_200_000,
    },
    "compactionPolicy": {
        "keylessPolicy": "keep",
        "deleteRetentionMs": 5_000,
        "maxLagMs": 60_000,
        "minCleanableDirtyRatio": 0.25,
    },
}
CASES = [(policy, field) for policy, fields in FIELDS.items() for field in fields]


@pytest.mark.parametrize("scope", [TOPIC, NS])
@pytest.mark.parametrize(("policy", "field"), CASES)
async def test_one_field_is_taken_and_the_others_keep_their_value(
    scope: str, policy: str, field: str
) -> None:
    async with served() as (_, _app, client):
        assert (await client.put(TOPIC)).status_code == 204
        before = (await client.get(f"{scope}/{policy}")).json()
        assert set(before) == set(FIELDS[policy])  # GET answers every field
        r = await client.post(f"{scope}/{policy}", json={field: FIELDS[policy][field]})
        assert r.status_code == 204, r.text
        after = (await client.get(f"{scope}/{policy}")).json()
        assert after == {**before, field: FIELDS[policy][field]}
        if scope == NS:  # the topic, without its own, takes it
            assert (await client.get(f"{TOPIC}/{policy}")).json() == after


async def test_the_rollover_policy_of_the_report() -> None:
    """The exact body of the report, on a topic."""
    async with served() as (_, _app, client):
        assert (await client.put(TOPIC)).status_code == 204
        r = await client.post(
            f"{TOPIC}/rolloverPolicy", json={"maxEntriesPerLedger": 2, "minRolloverTimeMs": 0}
        )
        assert r.status_code == 204, r.text
        got = (await client.get(f"{TOPIC}/rolloverPolicy")).json()
        assert (got["maxEntriesPerLedger"], got["minRolloverTimeMs"]) == (2, 0)


@pytest.mark.parametrize("scope", [TOPIC, NS])
@pytest.mark.parametrize(
    ("policy", "body"),
    [
        ("retention", {}),
        ("retention", {"retentionTimeInMinutes": -2}),
        ("retention", {"retentionMinutes": 5}),
        ("rolloverPolicy", {"maxEntriesPerLedger": 0}),
        ("rolloverPolicy", {"minRolloverTimeMs": 10_000, "maxRolloverTimeMs": 5_000}),
        ("compactionPolicy", {"keylessPolicy": "sometimes"}),
    ],
)
async def test_bad_partial_bodies_are_422_and_change_nothing(scope: str, policy: str, body: Any) -> None:
    async with served() as (_, _app, client):
        assert (await client.put(TOPIC)).status_code == 204
        before = (await client.get(f"{scope}/{policy}")).json()
        r = await client.post(f"{scope}/{policy}", json=body)
        assert r.status_code == 422 and r.headers["content-type"] == "application/problem+json", r.text
        assert (await client.get(f"{scope}/{policy}")).json() == before
