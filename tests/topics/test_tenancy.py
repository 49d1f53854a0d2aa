"""Tenant admins and namespace permissions through the topics service (topics.tenancy)."""

from __future__ import annotations

import pytest

from managed_ledger.metadata.api import NamespaceGrants, TenantInfo
from tests.topics.conftest import Env
from topics.errors import InvalidArgumentError, InvalidNameError, NamespaceNotFoundError, TenantNotFoundError


async def test_tenant_info_is_created_read_and_replaced(env: Env) -> None:
    service = env.service
    await service.create_tenant("acme", TenantInfo("acme", ("alice", "ops"), ("standalone",)))
    assert await service.get_tenant("acme") == TenantInfo("acme", ("alice", "ops"), ("standalone",))
    await service.update_tenant(TenantInfo("acme", ("bob",)))
    assert await service.get_tenant("acme") == TenantInfo("acme", ("bob",))
    await service.create_tenant("plain")
    assert await service.get_tenant("plain") == TenantInfo("plain")
    with pytest.raises(TenantNotFoundError):
        await service.get_tenant("nobody")
    with pytest.raises(TenantNotFoundError):
        await service.update_tenant(TenantInfo("nobody", ("bob",)))


@pytest.mark.parametrize(
    "info",
    [
        TenantInfo("acme", ("",)),
        TenantInfo("acme", ("x" * 257,)),
        TenantInfo("acme", ("tab\there",)),
        TenantInfo("acme", (), ("no/slash",)),
    ],
)
async def test_bad_roles_and_clusters_are_refused(env: Env, info: TenantInfo) -> None:
    with pytest.raises(InvalidArgumentError):
        await env.service.create_tenant("acme", info)
    assert "acme" not in await env.service.list_tenants()


async def test_permissions_are_granted_replaced_and_revoked(env: Env) -> None:
    service = env.service
    await service.grant_permission("public/default", "app", ["produce", "consume"])
    await service.grant_permission("public/default", "reader", ["consume"])
    assert await service.get_permissions("public/default") == {
        "app": ["consume", "produce"],
        "reader": ["consume"],
    }
    await service.grant_permission("public/default", "app", ["produce"])
    await service.revoke_permission("public/default", "reader")
    assert await service.get_permissions("public/default") == {"app": ["produce"]}


@pytest.mark.parametrize("actions", [[], ["functions"], ["produce", "admin"]])
async def test_only_produce_and_consume_are_granted(env: Env, actions: list[str]) -> None:
    with pytest.raises(InvalidArgumentError, match="produce"):
        await env.service.grant_permission("public/default", "app", actions)


async def test_permissions_of_a_missing_namespace_are_not_found(env: Env) -> None:
    with pytest.raises(NamespaceNotFoundError):
        await env.service.get_permissions("public/missing")
    with pytest.raises(NamespaceNotFoundError):
        await env.service.grant_permission("public/missing", "app", ["consume"])
    with pytest.raises(InvalidNameError):
        await env.service.get_permissions("public/bad name")


async def test_grants_of_names_that_do_not_exist_or_are_not_valid_are_empty(env: Env) -> None:
    service = env.service
    await service.create_tenant("acme", TenantInfo("acme", ("alice",)))
    await service.create_namespace("acme/ns")
    await service.grant_permission("acme/ns", "app", ["consume"])
    grants = await service.grants("acme", "acme/ns")
    assert grants.admin_roles == {"alice"} and dict(grants.permissions) == {"app": {"consume"}}
    assert await service.grants("acme", "acme/other") == NamespaceGrants(frozenset({"alice"}))
    assert await service.grants("bad name", "bad name/ns") == NamespaceGrants()
    assert await service.grants("acme", "acme/bad name") == NamespaceGrants(frozenset({"alice"}))
