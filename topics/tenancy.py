"""Who administers a tenant and who may use a namespace: a tenant's admin roles and allowed
clusters (Pulsar's TenantInfo) and a namespace's permissions, the records authorization reads
(app.auth).

Actions are Pulsar's AuthAction values that mean something in Quire: `produce` and `consume`. A
role is any non-empty string of printable characters up to MAX_ROLE_LENGTH, as the `sub` claim
of a token names it.
"""

from __future__ import annotations

from collections.abc import Iterable

from bookie.metadata_calls import call_store
from managed_ledger.metadata.api import NamespaceGrants, NotFoundError, TenantInfo
from topics import names
from topics.errors import InvalidArgumentError, NamespaceNotFoundError, TenantNotFoundError
from topics.registry import TopicRegistry

ACTIONS = ("consume", "produce")
MAX_ROLE_LENGTH = 256


def validate_role(role: str, what: str = "role") -> str:
    if not role or len(role) > MAX_ROLE_LENGTH or not role.isprintable():
        raise InvalidArgumentError(
            f"{what} {role[:MAX_ROLE_LENGTH]!r} is not a role: 1 to {MAX_ROLE_LENGTH} printable characters"
        )
    return role


def validate_actions(actions: Iterable[str]) -> tuple[str, ...]:
    chosen = tuple(actions)
    unknown = sorted(set(chosen) - set(ACTIONS))
    if unknown or not chosen:
        shown = f"unknown actions {unknown}" if unknown else "no action"
        raise InvalidArgumentError(f"{shown}: grant one or both of {list(ACTIONS)}")
    return tuple(sorted(set(chosen)))


def tenant_info(tenant: str, admin_roles: Iterable[str], allowed_clusters: Iterable[str]) -> TenantInfo:
    """A checked TenantInfo: a valid tenant name, roles, and cluster names (the name rule)."""
    names.validate_tenant(tenant)
    roles = tuple(validate_role(r, "admin role") for r in admin_roles)
    clusters = tuple(allowed_clusters)
    for cluster in clusters:
        if not names.is_name(cluster):
            raise InvalidArgumentError(f"allowed cluster {cluster[:128]!r} is not a valid name")
    return TenantInfo(tenant, roles, clusters)


class Tenancy:
    """Tenants' admin roles and namespaces' permissions."""

    def __init__(self, registry: TopicRegistry) -> None:
        self._r = registry

    async def get_tenant(self, tenant: str) -> TenantInfo:
        names.validate_tenant(tenant)
        info = await call_store(self._r.store.get_tenant, tenant)
        if info is None:
            raise TenantNotFoundError(tenant)
        return info

    async def update_tenant(self, info: TenantInfo) -> None:
        info = tenant_info(info.name, info.admin_roles, info.allowed_clusters)
        try:
            await call_store(self._r.store.update_tenant, info)
        except NotFoundError as exc:
            raise TenantNotFoundError(info.name) from exc

    async def get_permissions(self, namespace: str) -> dict[str, list[str]]:
        names.validate_namespace(namespace)
        try:
            granted = await call_store(self._r.store.get_permissions, namespace)
        except NotFoundError as exc:
            raise NamespaceNotFoundError(namespace) from exc
        return {role: list(actions) for role, actions in granted.items()}

    async def grant_permission(self, namespace: str, role: str, actions: list[str]) -> None:
        names.validate_namespace(namespace)
        checked = validate_actions(actions)
        await self._set_permission(namespace, validate_role(role), checked)

    async def revoke_permission(self, namespace: str, role: str) -> None:
        names.validate_namespace(namespace)
        await self._set_permission(namespace, validate_role(role), None)

    async def _set_permission(self, namespace: str, role: str, actions: tuple[str, ...] | None) -> None:
        try:
            await call_store(self._r.store.set_permission, namespace, role, actions)
        except NotFoundError as exc:
            raise NamespaceNotFoundError(namespace) from exc

    async def grants(self, tenant: str, namespace: str | None) -> NamespaceGrants:
        """What `tenant` (and `namespace`, `tenant/ns`, when given) grant to whom; nothing for
        names that do not exist or are not valid (authorization asks before anything is checked)."""
        if not names.is_name(tenant):
            return NamespaceGrants()
        if namespace is not None and not names.is_name(namespace.partition("/")[2]):
            namespace = None
        return await call_store(self._r.store.get_grants, tenant, namespace)
