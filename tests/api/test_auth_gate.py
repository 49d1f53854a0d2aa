"""The security gate in process: bad tokens are 401, refusals do not tell whether a topic exists,
grants changed at this broker apply at once, the caches spare the hot path, nothing leaks."""

from __future__ import annotations

import base64
import json
import logging
from typing import Any

import httpx
import jwt
import pytest

from app.auth.keys import new_private_key, public_pem
from managed_ledger.metadata.api import MetadataUnavailableError
from tests.api.auth_support import SECRET, SUPER_USER, bearer, secured, token

PRODUCE = "/v1/topics/acme/ns/{topic}/messages"
RECEIVE = "/v1/topics/acme/ns/{topic}/subscriptions/sub/messages"
BATCH = {"messages": [{"value": "x"}]}


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def _bad_tokens() -> dict[str, str]:
    good = token("producer")
    header, _, signature = good.split(".")
    forged_claims = _b64(json.dumps({"sub": SUPER_USER}).encode())
    none_header = _b64(json.dumps({"alg": "none", "typ": "JWT"}).encode())
    return {
        "expired": jwt.encode({"sub": "producer", "exp": 1_000_000}, SECRET, algorithm="HS256"),
        "not yet valid": jwt.encode({"sub": "producer", "nbf": 4_000_000_000}, SECRET, algorithm="HS256"),
        "tampered": f"{header}.{forged_claims}.{signature}",
        "alg none": f"{none_header}.{forged_claims}.",
        "another key": jwt.encode({"sub": SUPER_USER}, b"x" * 32, algorithm="HS256"),
        "RS256 of another issuer": jwt.encode(
            {"sub": SUPER_USER}, new_private_key("RS256"), algorithm="RS256"
        ),
        "garbage": "not-a-jwt",
    }


@pytest.mark.parametrize("kind", list(_bad_tokens()))
async def test_bad_tokens_are_401_problems_that_never_echo_the_token(kind: str) -> None:
    bad = _bad_tokens()[kind]
    async with secured() as s:
        response = await s.client.post(
            PRODUCE.format(topic="t"), json=BATCH, headers={"Authorization": f"Bearer {bad}"}
        )
    assert response.status_code == 401
    assert response.headers["content-type"] == "application/problem+json"
    assert response.headers["www-authenticate"] == 'Bearer realm="quire", error="invalid_token"'
    problem = response.json()
    assert problem["type"].endswith("/invalid-token") and problem["status"] == 401
    signature = bad.split(".")[-1]
    assert bad not in response.text and (not signature or signature not in response.text)


async def test_missing_or_other_scheme_is_401_and_checked_before_the_body() -> None:
    async with secured() as s:
        missing = await s.client.post(PRODUCE.format(topic="t"), content=b"x" * 100_000)
        basic = await s.client.get("/admin/v2/tenants", headers={"Authorization": "Basic dXNlcjpwdw=="})
        unknown_path = await s.client.get("/no/such/path")
        unknown_with_token = await s.client.get("/no/such/path", headers=bearer("producer"))
    assert missing.status_code == 401  # not 413 or 422: nothing about the request is told first
    assert missing.json()["type"].endswith("/authentication-required")
    assert missing.headers["www-authenticate"] == 'Bearer realm="quire"'
    assert basic.status_code == 401 and "Bearer" in basic.json()["detail"]
    assert unknown_path.status_code == 401
    assert unknown_with_token.status_code == 404


@pytest.mark.parametrize("path", ["/healthz", "/readyz", "/metrics", "/docs", "/redoc", "/openapi.json"])
async def test_health_docs_and_metrics_are_open(path: str) -> None:
    async with secured() as s:
        response = await s.client.get(path)
    assert response.status_code in (200, 503), (path, response.status_code)


async def test_docs_assets_are_open() -> None:
    async with secured() as s:
        response = await s.client.get("/docs/assets/swagger-ui.css")
    assert response.status_code == 200


@pytest.mark.parametrize(
    ("method", "path"),
    [("POST", PRODUCE), ("GET", RECEIVE), ("GET", "/admin/v2/persistent/acme/ns/{topic}/stats")],
)
async def test_a_role_without_access_cannot_tell_whether_a_topic_exists(method: str, path: str) -> None:
    async with secured() as s:
        looked_up: list[str] = []
        get_topic = s.env.store.get_topic

        def spy(name: str) -> Any:
            looked_up.append(name)
            return get_topic(name)

        s.env.store.get_topic = spy  # type: ignore[method-assign]
        answers = []
        for topic in ("t", "no-such-topic", "t", "no-such-topic"):
            r = await s.client.request(
                method, path.format(topic=topic), json=BATCH, headers=bearer("other-admin")
            )
            answers.append((r.status_code, r.content))
        reads = s.app.state.gate.authorizer.reads
    assert answers[0][0] == 403
    assert len({answer for answer in answers}) == 1, answers  # same status, same bytes
    assert b"no-such-topic" not in answers[0][1]
    assert looked_up == []  # decided before anything looked the topic up
    assert reads == 1  # and from the same cached grants, existing topic or not


async def test_refusals_of_missing_and_existing_namespaces_and_tenants_differ_only_by_name() -> None:
    async with secured() as s:
        existing = await s.client.get("/admin/v2/persistent/acme/ns", headers=bearer("producer"))
        refused_ns = [
            await s.client.get(f"/admin/v2/persistent/{name}", headers=bearer("other-admin"))
            for name in ("acme/ns", "acme/nope", "nobody/ns")
        ]
        refused_tenant = [
            await s.client.get(f"/admin/v2/namespaces/{name}", headers=bearer("producer"))
            for name in ("acme", "nobody")
        ]
    assert existing.status_code == 200
    for answers, names in (
        (refused_ns, ("acme/ns", "acme/nope", "nobody/ns")),
        (refused_tenant, ("acme", "nobody")),
    ):
        texts = {r.text.replace(name, "NAME") for r, name in zip(answers, names, strict=True)}
        texts = {
            t.replace('"tenant":"nobody"', '"tenant":"acme"').replace("tenant nobody", "tenant acme")
            for t in texts
        }
        assert {r.status_code for r in answers} == {403}
        assert len(texts) == 1, texts


async def test_the_403_names_the_missing_permission() -> None:
    async with secured() as s:
        produce = await s.client.post(PRODUCE.format(topic="t"), json=BATCH, headers=bearer("consumer"))
        admin = await s.client.put("/admin/v2/persistent/acme/ns/t2", headers=bearer("producer"))
        tenants = await s.client.get("/admin/v2/tenants", headers=bearer("acme-admin"))
    assert produce.status_code == 403
    assert produce.json() | {"detail": ""} == {
        "type": "https://quire.dev/problems/permission-denied",
        "title": "Forbidden",
        "status": 403,
        "detail": "",
        "permission": "produce",
        "tenant": "acme",
        "namespace": "acme/ns",
    }
    assert "produce permission on namespace acme/ns" in produce.json()["detail"]
    assert admin.json()["permission"] == "tenant-admin" and "admin of tenant acme" in admin.json()["detail"]
    assert tenants.json()["permission"] == "super-user"


async def test_grants_changed_at_this_broker_apply_at_once() -> None:
    async with secured() as s:
        c = s.client
        produce = PRODUCE.format(topic="t")
        assert (await c.post(produce, json=BATCH, headers=bearer("consumer"))).status_code == 403
        grant = await c.post(
            "/admin/v2/namespaces/acme/ns/permissions/consumer",
            json=["produce", "consume"],
            headers=bearer("acme-admin"),
        )
        assert grant.status_code == 204
        assert (await c.post(produce, json=BATCH, headers=bearer("consumer"))).status_code == 200
        listed = await c.get("/admin/v2/namespaces/acme/ns/permissions", headers=bearer("acme-admin"))
        assert listed.json() == {"consumer": ["consume", "produce"], "producer": ["produce"]}
        revoke = await c.delete(
            "/admin/v2/namespaces/acme/ns/permissions/consumer", headers=bearer("acme-admin")
        )
        assert revoke.status_code == 204
        assert (await c.post(produce, json=BATCH, headers=bearer("consumer"))).status_code == 403
        # a super-user hands the tenant to another admin: the old one is out at once
        update = await c.post(
            "/admin/v2/tenants/acme", json={"adminRoles": ["new-admin"]}, headers=bearer(SUPER_USER)
        )
        assert update.status_code == 204
        assert (await c.get("/admin/v2/namespaces/acme", headers=bearer("acme-admin"))).status_code == 403
        assert (await c.get("/admin/v2/namespaces/acme", headers=bearer("new-admin"))).status_code == 200


async def test_tenant_info_is_pulsars_body() -> None:
    async with secured() as s:
        c = s.client
        body = {"adminRoles": ["ops"], "allowedClusters": ["standalone"]}
        assert (
            await c.put("/admin/v2/tenants/shop", json=body, headers=bearer(SUPER_USER))
        ).status_code == 204
        got = await c.get("/admin/v2/tenants/shop", headers=bearer("ops"))
        assert got.json() == {
            "name": "shop",
            "namespaces": [],
            "adminRoles": ["ops"],
            "allowedClusters": ["standalone"],
        }
        bad = await c.post("/admin/v2/namespaces/shop/x/permissions/app", json=["fly"], headers=bearer("ops"))
        assert bad.status_code == 422


async def test_one_verification_and_one_grants_read_for_many_requests() -> None:
    async with secured() as s:
        headers = bearer("producer")
        for _ in range(20):
            r = await s.client.post(PRODUCE.format(topic="t"), json=BATCH, headers=headers)
            assert r.status_code == 200
        gate = s.app.state.gate
        assert gate.config.verifier.verifications == 1
        assert gate.authorizer.reads == 1


async def test_an_unreachable_metadata_store_is_503_not_a_refusal() -> None:
    async with secured() as s:

        async def unavailable(tenant: str, namespace: str | None) -> Any:
            raise MetadataUnavailableError("metadata database unavailable")

        s.env.service.grants = unavailable  # type: ignore[method-assign]
        r = await s.client.post(PRODUCE.format(topic="t"), json=BATCH, headers=bearer("producer"))
    assert r.status_code == 503 and r.headers["retry-after"] == "1"


async def test_no_token_in_logs_metrics_or_problems(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    tokens = [token("producer"), token("consumer"), *(_bad_tokens().values())]
    bodies = []
    async with secured() as s:
        for t in tokens:
            for method, path in (("POST", PRODUCE.format(topic="t")), ("GET", RECEIVE.format(topic="t"))):
                r = await s.client.request(method, path, json=BATCH, headers={"Authorization": f"Bearer {t}"})
                bodies.append(r.text)
        metrics = (await s.client.get("/metrics", headers=bearer(SUPER_USER))).text
        stats = (await s.client.get("/admin/v2/persistent/acme/ns/t/stats", headers=bearer(SUPER_USER))).text
    seen = "\n".join([*bodies, metrics, stats, caplog.text])
    for t in tokens:
        signature = t.split(".")[-1]
        assert t not in seen
        assert len(signature) < 20 or signature not in seen


async def test_authentication_off_serves_any_authorization_header_as_before() -> None:
    from tests.api.conftest import served

    async with served() as s:
        r = await s.client.post(
            "/v1/topics/public/default/t/messages", json=BATCH, headers={"Authorization": "Bearer garbage"}
        )
    assert r.status_code == 200


def test_an_rs256_public_key_app_accepts_its_tokens_only() -> None:
    """The key kinds reach the gate through the settings (a unit check of the wiring)."""
    from app.settings import Settings
    from app.wiring import security_config

    private = new_private_key("RS256")
    settings = Settings(
        authentication_enabled=True, token_public_key=public_pem(private).decode(), super_user_roles=["root"]
    )
    config = security_config(settings)
    assert config is not None and config.authorization and config.super_user_roles == {"root"}
    assert config.verifier.role(jwt.encode({"sub": "a"}, private, algorithm="RS256")) == "a"
    assert security_config(Settings()) is None
    _ = httpx  # the client module is the tests' transport


def test_a_route_without_a_rule_stops_the_app_from_serving() -> None:
    from typing import cast

    from app.auth.gate import RouteTable
    from app.main import create_app
    from topics.api import TopicsApi

    app = create_app(cast(TopicsApi, object()), close_topics=False)
    RouteTable(app.router.routes)  # every route of the app has its row

    async def new_thing() -> dict[str, str]:
        return {}

    app.add_api_route("/admin/v2/new-thing", new_thing, operation_id="newThing")
    with pytest.raises(RuntimeError, match="newThing"):
        RouteTable(app.router.routes)
