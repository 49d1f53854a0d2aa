"""The app with security on, in process, and the roles the tests call it as.

Tenant `acme` (admin `acme-admin`) has namespace `acme/ns` with topic `acme/ns/t` and its
subscription `sub`; `producer` may produce there and `consumer` consume; `other-admin`
administers tenant `other`; `root` is a super-user. Tokens are HS256 with SECRET.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import NamedTuple

import httpx

from app.auth.gate import SecurityConfig
from app.auth.keys import VerificationKey
from app.auth.tokens import TokenVerifier, create_token
from app.main import QuireApp, create_app
from managed_ledger.metadata.api import TenantInfo
from managed_ledger.metadata.memory import InMemoryMetadataStore
from tests.api.conftest import LIMITS
from tests.topics.conftest import Env, make_env
from topics.api import SubscriptionOptions

SECRET = b"quire-test-secret-key-of-32-byte"
SUPER_USER = "root"
ROLES = ("producer", "consumer", "other-admin", "acme-admin", SUPER_USER)


def token(role: str, expires_in_s: int | None = None) -> str:
    return create_token(role, SECRET, "HS256", expires_in_s)


def bearer(role: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token(role)}"}


def security(authorization: bool = True, metrics_require_token: bool = False) -> SecurityConfig:
    return SecurityConfig(
        verifier=TokenVerifier(VerificationKey(SECRET, ("HS256",))),
        authorization=authorization,
        super_user_roles=frozenset({SUPER_USER}),
        metrics_require_token=metrics_require_token,
        authorization_cache_ms=60_000,
    )


class Secured(NamedTuple):
    env: Env
    app: QuireApp
    client: httpx.AsyncClient


async def populate(env: Env) -> None:
    service = env.service
    await service.create_tenant("acme", TenantInfo("acme", ("acme-admin",)))
    await service.create_tenant("other", TenantInfo("other", ("other-admin",)))
    await service.create_namespace("acme/ns")
    await service.grant_permission("acme/ns", "producer", ["produce"])
    await service.grant_permission("acme/ns", "consumer", ["consume"])
    await service.create_topic("acme/ns/t")
    await service.create_subscription("acme/ns/t", "sub", SubscriptionOptions("earliest"))


@asynccontextmanager
async def secured(config: SecurityConfig | None = None) -> AsyncIterator[Secured]:
    """The app around a real TopicService on in-memory storage, with security on, populated."""
    env = await make_env(InMemoryMetadataStore(), LIMITS)
    await populate(env)
    app = create_app(env.service, close_topics=False, security=config or security())
    transport = httpx.ASGITransport(app=app, raise_app_exceptions=False)
    try:
        async with httpx.AsyncClient(transport=transport, base_url="http://quire") as client:
            yield Secured(env, app, client)
    finally:
        await env.service.close()
        await env.factory.close()
