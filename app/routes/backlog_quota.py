"""Backlog quotas in Pulsar's admin grammar, on a topic and on a namespace (topics.backlog_quota):
`GET backlogQuotaMap` (the effective quotas, only the types set), `POST backlogQuota` and
`DELETE backlogQuota`, both `?backlogQuotaType=destination_storage|message_age` (default
destination_storage, as Pulsar)."""

from typing import Annotated, Any

from fastapi import APIRouter, Query
from starlette.responses import Response

from app import schemas
from app.routes.common import Namespace, Tenant, Topic, empty, full_name, json_response, problems
from topics import backlog_quota
from topics.api import AdminApi

QuotaTypeQuery = Annotated[
    schemas.BacklogQuotaType,
    Query(description="destination_storage (limitSize, bytes) or message_age (limitTime, seconds)"),
]
NAMESPACE = "/admin/v2/namespaces/{tenant}/{namespace}"


def _body(quota: schemas.BacklogQuotaUpdate) -> dict[str, Any]:
    return quota.model_dump(exclude_none=True)


def topic_routes(router: APIRouter, topics: AdminApi, prefix: str) -> None:
    @router.get(
        prefix + "/{topic}/backlogQuotaMap",
        operation_id="getBacklogQuotaMap",
        summary="Effective backlog quotas of the topic by type (the topic's, else the namespace's)",
        response_model=schemas.BacklogQuotaMap,
        responses=problems(404, 422),
    )
    async def get_map(tenant: Tenant, namespace: Namespace, topic: Topic) -> Response:
        quotas = await topics.get_backlog_quotas(full_name(tenant, namespace, topic))
        return json_response(backlog_quota.api_map(quotas))

    @router.post(
        prefix + "/{topic}/backlogQuota",
        operation_id="setBacklogQuota",
        summary="Set one type of backlog quota on the topic",
        status_code=204,
        response_model=None,
        responses=problems(404, 422),
    )
    async def set_quota(
        tenant: Tenant,
        namespace: Namespace,
        topic: Topic,
        quota: schemas.BacklogQuotaUpdate,
        backlogQuotaType: QuotaTypeQuery = "destination_storage",
    ) -> Response:
        await topics.set_backlog_quota(full_name(tenant, namespace, topic), backlogQuotaType, _body(quota))
        return empty()

    @router.delete(
        prefix + "/{topic}/backlogQuota",
        operation_id="removeBacklogQuota",
        summary="Remove one type of the topic's backlog quota (the namespace's then applies)",
        status_code=204,
        response_model=None,
        responses=problems(404, 422),
    )
    async def delete_quota(
        tenant: Tenant,
        namespace: Namespace,
        topic: Topic,
        backlogQuotaType: QuotaTypeQuery = "destination_storage",
    ) -> Response:
        await topics.delete_backlog_quota(full_name(tenant, namespace, topic), backlogQuotaType)
        return empty()


def namespace_routes(router: APIRouter, topics: AdminApi) -> None:
    @router.get(
        NAMESPACE + "/backlogQuotaMap",
        operation_id="getNamespaceBacklogQuotaMap",
        summary="The namespace's backlog quotas by type",
        response_model=schemas.BacklogQuotaMap,
        responses=problems(404, 422),
    )
    async def get_map(tenant: Tenant, namespace: Namespace) -> Response:
        p = await topics.get_namespace_policies(f"{tenant}/{namespace}")
        return json_response(backlog_quota.api_map(p.backlog_quotas))

    @router.post(
        NAMESPACE + "/backlogQuota",
        operation_id="setNamespaceBacklogQuota",
        summary="Set one type of backlog quota on the namespace (its topics without their own take it)",
        status_code=204,
        response_model=None,
        responses=problems(404, 422),
    )
    async def set_quota(
        tenant: Tenant,
        namespace: Namespace,
        quota: schemas.BacklogQuotaUpdate,
        backlogQuotaType: QuotaTypeQuery = "destination_storage",
    ) -> Response:
        await topics.set_namespace_backlog_quota(f"{tenant}/{namespace}", backlogQuotaType, _body(quota))
        return empty()

    @router.delete(
        NAMESPACE + "/backlogQuota",
        operation_id="removeNamespaceBacklogQuota",
        summary="Remove one type of the namespace's backlog quota",
        status_code=204,
        response_model=None,
        responses=problems(404, 422),
    )
    async def delete_quota(
        tenant: Tenant, namespace: Namespace, backlogQuotaType: QuotaTypeQuery = "destination_storage"
    ) -> Response:
        await topics.delete_namespace_backlog_quota(f"{tenant}/{namespace}", backlogQuotaType)
        return empty()
