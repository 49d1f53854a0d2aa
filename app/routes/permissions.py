"""Namespace permissions in Pulsar's admin v2 grammar: which role may produce to and consume
from a namespace (docs/rest-api.md#security). Only super-users and the tenant's admins may read
or change them (app/auth/policy.py)."""

from typing import Annotated

from fastapi import APIRouter, Body, Path
from starlette.responses import Response

from app.routes.common import Namespace, Tenant, empty, problems
from app.schemas import AuthAction
from topics.api import TopicsApi

PERMISSIONS = "/admin/v2/namespaces/{tenant}/{namespace}/permissions"
Role = Annotated[
    str,
    Path(min_length=1, max_length=256, examples=["app"], description="a role: the sub claim of its tokens"),
]
Actions = Annotated[
    list[AuthAction],
    Body(min_length=1, max_length=2, examples=[["produce", "consume"]]),
]


def permission_routes(router: APIRouter, topics: TopicsApi) -> None:
    @router.get(
        PERMISSIONS,
        operation_id="getPermissions",
        summary="The roles granted something on the namespace, and their actions",
        responses=problems(404, 422),
    )
    async def get_permissions(tenant: Tenant, namespace: Namespace) -> dict[str, list[str]]:
        return await topics.get_permissions(f"{tenant}/{namespace}")

    @router.post(
        PERMISSIONS + "/{role}",
        operation_id="grantPermission",
        summary="Grant a role `produce`, `consume` or both on the namespace (replacing its grant)",
        status_code=204,
        response_model=None,
        responses=problems(404, 422),
    )
    async def grant(tenant: Tenant, namespace: Namespace, role: Role, actions: Actions) -> Response:
        await topics.grant_permission(f"{tenant}/{namespace}", role, [a.value for a in actions])
        return empty()

    @router.delete(
        PERMISSIONS + "/{role}",
        operation_id="revokePermission",
        summary="Revoke everything a role was granted on the namespace",
        status_code=204,
        response_model=None,
        responses=problems(404, 422),
    )
    async def revoke(tenant: Tenant, namespace: Namespace, role: Role) -> Response:
        await topics.revoke_permission(f"{tenant}/{namespace}", role)
        return empty()
