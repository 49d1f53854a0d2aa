"""The metadata store's security records, one contract for the in-memory, SQLite and PostgreSQL
stores: a tenant's admin roles and allowed clusters, a namespace's permissions, and the grants
authorization reads (what does not exist grants nothing)."""

from __future__ import annotations

import threading

import pytest

from managed_ledger.metadata.api import (
    MetadataStore,
    NamespaceGrants,
    NotFoundError,
    TenantInfo,
)
from tests.managed_ledger.test_metadata_contract import Opener, opener, store  # noqa: F401


def test_a_tenant_carries_its_admin_roles_and_clusters(store: MetadataStore) -> None:  # noqa: F811
    assert store.get_tenant("public") == TenantInfo("public")
    assert store.get_tenant("acme") is None
    store.create_tenant("acme", TenantInfo("acme", ("ops", "alice", "ops"), ("east",)))
    assert store.get_tenant("acme") == TenantInfo("acme", ("alice", "ops"), ("east",))
    store.update_tenant(TenantInfo("acme", ("bob",), ()))
    assert store.get_tenant("acme") == TenantInfo("acme", ("bob",), ())
    with pytest.raises(NotFoundError):
        store.update_tenant(TenantInfo("nobody", ("bob",)))


def test_a_tenant_made_again_starts_without_admins(store: MetadataStore) -> None:  # noqa: F811
    store.create_tenant("acme", TenantInfo("acme", ("alice",)))
    store.delete_tenant("acme")
    store.create_tenant("acme")
    assert store.get_tenant("acme") == TenantInfo("acme")
    assert store.get_grants("acme", None).admin_roles == frozenset()


def test_namespace_permissions_grant_replace_and_revoke(store: MetadataStore) -> None:  # noqa: F811
    assert store.get_permissions("public/default") == {}
    store.set_permission("public/default", "writer", ("produce",))
    store.set_permission("public/default", "app", ("produce", "consume", "consume"))
    assert store.get_permissions("public/default") == {"app": ("consume", "produce"), "writer": ("produce",)}
    store.set_permission("public/default", "app", ("consume",))
    store.set_permission("public/default", "writer", None)
    store.set_permission("public/default", "nobody", None)  # revoking nothing is no error
    assert store.get_permissions("public/default") == {"app": ("consume",)}
    with pytest.raises(NotFoundError):
        store.get_permissions("public/missing")
    with pytest.raises(NotFoundError):
        store.set_permission("public/missing", "app", ("consume",))


def test_a_namespace_made_again_starts_without_permissions(store: MetadataStore) -> None:  # noqa: F811
    store.create_namespace("public/ns")
    store.set_permission("public/ns", "app", ("consume",))
    store.delete_namespace("public/ns")
    store.create_namespace("public/ns")
    assert store.get_permissions("public/ns") == {}


def test_grants_read_the_tenant_and_the_namespace(store: MetadataStore) -> None:  # noqa: F811
    store.create_tenant("acme", TenantInfo("acme", ("admin-a",)))
    store.create_namespace("acme/ns")
    store.set_permission("acme/ns", "app", ("produce", "consume"))
    grants = store.get_grants("acme", "acme/ns")
    assert grants.admin_roles == {"admin-a"}
    assert dict(grants.permissions) == {"app": {"produce", "consume"}}
    assert dict(store.get_grants("acme", None).permissions) == {}
    # what does not exist grants nothing, and is no error
    assert store.get_grants("acme", "acme/missing") == NamespaceGrants(frozenset({"admin-a"}))
    assert store.get_grants("nobody", "nobody/ns") == NamespaceGrants()


def test_grants_at_the_same_time_keep_each_other(opener: Opener) -> None:  # noqa: F811
    """Each grant replaces one role's entry atomically: none is lost to a concurrent one."""
    roles = [f"role-{i}" for i in range(8)]
    errors: list[BaseException] = []

    def grant(role: str) -> None:
        try:
            opener().set_permission("public/default", role, ("consume",))
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=grant, args=(role,)) for role in roles]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=30)
    assert not errors
    assert sorted(opener().get_permissions("public/default")) == roles
