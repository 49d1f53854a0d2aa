"""Authorization: may this role do what an operation needs (app.auth.policy) in this tenant and
namespace?

The answer depends on the role's grants and on nothing else: never on whether the topic, the
namespace or even the tenant exists. A name that does not exist grants nothing, so a role without
access to a namespace gets the same 403, with the same words, for a topic that exists and one
that does not: authorization is decided before anything looks the topic up, and its refusal
names the permission and the namespace, never the topic.

Grants (a tenant's admin roles, a namespace's permissions) are read from the metadata store
through the topics service and cached per (tenant, namespace) for `cache_ms`, names that do not
exist included, so the answer takes the same time either way and the hot path reads no database.
A miss is read once however many requests wait for it. A change made through this broker (the
operations in policy.CHANGES_GRANTS) empties the cache before its answer leaves; a change made at
another broker is seen here within `cache_ms`.
"""

from __future__ import annotations

import asyncio
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass

from app.auth.policy import Need
from managed_ledger.metadata.api import NamespaceGrants
from topics.api import AdminApi

MAX_CACHED = 10_000
Key = tuple[str, str | None]


@dataclass(frozen=True, slots=True)
class Denied:
    """Why a role may not: the 403's detail and the fields that name the missing permission."""

    detail: str
    permission: str
    tenant: str | None = None
    namespace: str | None = None


class Authorizer:
    def __init__(
        self,
        topics: AdminApi,
        super_user_roles: frozenset[str],
        cache_ms: int,
        *,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._topics = topics
        self.super_user_roles = super_user_roles
        self._cache_s = cache_ms / 1000
        self._clock = clock
        self._cache: OrderedDict[Key, tuple[float, int, NamespaceGrants]] = OrderedDict()
        self._pending: dict[tuple[Key, int], asyncio.Future[NamespaceGrants]] = {}
        self._generation = 0
        self.reads = 0  # grants read from the store (tests check the cache with it)

    def forget(self) -> None:
        """Drop every cached grant (a grant changed): later checks read the store again."""
        self._generation += 1
        self._cache.clear()

    async def check(self, role: str, need: Need, tenant: str | None, namespace: str | None) -> Denied | None:
        """None when `role` may do what `need` says in `tenant` (and `tenant/namespace`)."""
        if need == Need.OPEN or role in self.super_user_roles:
            return None
        if need in (Need.METRICS, Need.SUPER_USER) or tenant is None:
            return _not_super(role)
        full = f"{tenant}/{namespace}" if need != Need.TENANT_ADMIN and namespace is not None else None
        grants = await self._grants(tenant, full)
        if role in grants.admin_roles:
            return None
        if need == Need.TENANT_ADMIN or full is None:
            return Denied(
                f"role {role!r} is not an admin of tenant {tenant}", Need.TENANT_ADMIN.value, tenant=tenant
            )
        granted = grants.permissions.get(role, frozenset())
        wanted = ("produce", "consume") if need == Need.LOOKUP else (need.value,)
        if granted.intersection(wanted):
            return None
        return Denied(
            f"role {role!r} lacks the {' or '.join(wanted)} permission on namespace {full}",
            need.value,
            tenant=tenant,
            namespace=full,
        )

    async def _grants(self, tenant: str, namespace: str | None) -> NamespaceGrants:
        key = (tenant, namespace)
        now = self._clock()
        cached = self._cache.get(key)
        if cached is not None and cached[0] > now and cached[1] == self._generation:
            return cached[2]
        generation = self._generation
        pending = self._pending.get((key, generation))
        if pending is not None:
            return await asyncio.shield(pending)
        future: asyncio.Future[NamespaceGrants] = asyncio.get_running_loop().create_future()
        self._pending[(key, generation)] = future
        try:
            self.reads += 1
            grants = await self._topics.grants(tenant, namespace)
        except BaseException as exc:
            future.set_exception(exc)
            future.exception()  # retrieved: no "never retrieved" warning when nobody else waited
            raise
        finally:
            del self._pending[(key, generation)]
        future.set_result(grants)
        if generation == self._generation:  # else a grant changed while reading: do not keep it
            self._cache[key] = (now + self._cache_s, generation, grants)
            self._cache.move_to_end(key)
            if len(self._cache) > MAX_CACHED:
                self._cache.popitem(last=False)
        return grants


def _not_super(role: str) -> Denied:
    return Denied(f"role {role!r} is not a super-user: only super-users may do this", Need.SUPER_USER.value)
