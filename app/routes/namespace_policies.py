"""Namespace policies in Pulsar's admin grammar: `GET|POST|DELETE /admin/v2/namespaces/{tenant}/
{namespace}/{retention|messageTTL|compactionThreshold|deduplication|rolloverPolicy|
compactionPolicy}` with the
topic-level bodies (backlog quotas: app.routes.backlog_quota). GET answers the namespace's
effective value (its own, else the settings'); POST of an object policy may carry some fields
only (the others keep their value); DELETE falls back to the settings. A change applies at once
to the namespace's topics without their own value."""

from typing import Annotated, Any

from fastapi import APIRouter, Body, Query
from starlette.responses import Response

from app import schemas
from app.routes.common import Namespace, Tenant, empty, problems
from topics.api import TopicPolicies, TopicsApi

NAMESPACE = "/admin/v2/namespaces/{tenant}/{namespace}"


def retention_body(p: TopicPolicies) -> schemas.RetentionPolicy:
    return schemas.RetentionPolicy(
        retentionTimeInMinutes=p.retention_time_minutes, retentionSizeInMB=p.retention_size_mb
    )


def rollover_body(p: TopicPolicies) -> schemas.RolloverPolicy:
    return schemas.RolloverPolicy(
        maxEntriesPerLedger=p.max_entries_per_ledger,
        maxSizePerLedgerBytes=p.max_size_per_ledger_bytes,
        minRolloverTimeMs=p.min_rollover_time_ms,
        maxRolloverTimeMs=p.max_rollover_time_ms,
    )


def compaction_policy(p: TopicPolicies) -> schemas.CompactionPolicy:
    c = p.compaction
    return schemas.CompactionPolicy(
        keylessPolicy=c.keyless_policy,
        deleteRetentionMs=c.delete_retention_ms,
        maxLagMs=c.max_lag_ms,
        minCleanableDirtyRatio=c.min_cleanable_dirty_ratio,
    )


def namespace_policy_routes(router: APIRouter, topics: TopicsApi) -> None:
    _policy(
        router,
        topics,
        ("retention", "retention", "Retention"),
        schemas.RetentionPolicyUpdate,
        schemas.RetentionPolicy,
        retention_body,
    )
    _policy(
        router,
        topics,
        ("rolloverPolicy", "rolloverPolicy", "RolloverPolicy"),
        schemas.RolloverPolicyUpdate,
        schemas.RolloverPolicy,
        rollover_body,
    )
    _policy(
        router,
        topics,
        ("compactionThreshold", "compactionThreshold", "CompactionThreshold"),
        Annotated[int, Body(ge=0, examples=[104857600], description="bytes of backlog; 0 = off")],
        int,
        lambda p: p.compaction_threshold_bytes,
    )
    # Pulsar's namespace name of the topic's deduplicationEnabled.
    _policy(
        router,
        topics,
        ("deduplication", "deduplicationEnabled", "Deduplication"),
        Annotated[bool, Body(examples=[True])],
        bool,
        lambda p: p.deduplication_enabled,
    )
    _policy(
        router,
        topics,
        ("compactionPolicy", "compactionPolicy", "CompactionPolicy"),
        schemas.CompactionPolicyUpdate,
        schemas.CompactionPolicy,
        compaction_policy,
    )
    _message_ttl(router, topics)


def _policy(
    router: APIRouter,
    topics: TopicsApi,
    names: tuple[str, str, str],
    body_type: Any,
    response_type: Any,
    get: Any,
) -> None:
    """`names`: the path's name, the policy's stored name, the operation ids' suffix."""
    path_name, policy, op = names
    path = f"{NAMESPACE}/{path_name}"

    @router.get(
        path,
        operation_id=f"getNamespace{op}",
        summary=f"The namespace's effective {path_name} (its own, else the settings')",
        response_model=response_type,
        responses=problems(404, 422),
    )
    async def get_policy(tenant: Tenant, namespace: Namespace) -> Any:
        return get(await topics.get_namespace_policies(f"{tenant}/{namespace}"))

    @router.post(
        path,
        operation_id=f"setNamespace{op}",
        summary=f"Set {path_name} on the namespace (its topics without their own take it)",
        status_code=204,
        response_model=None,
        responses=problems(404, 422),
    )
    async def set_policy(tenant: Tenant, namespace: Namespace, value: body_type) -> Response:  # type: ignore[valid-type]
        plain = value.model_dump(mode="json", exclude_none=True) if hasattr(value, "model_dump") else value
        await topics.set_namespace_policy(f"{tenant}/{namespace}", policy, plain)
        return empty()

    @router.delete(
        path,
        operation_id=f"removeNamespace{op}",
        summary=f"Remove the namespace's {path_name} (fall back to the settings)",
        status_code=204,
        response_model=None,
        responses=problems(404, 422),
    )
    async def delete_policy(tenant: Tenant, namespace: Namespace) -> Response:
        await topics.delete_namespace_policy(f"{tenant}/{namespace}", policy)
        return empty()


def _message_ttl(router: APIRouter, topics: TopicsApi) -> None:
    """As on the topic: the value goes in the query (`?messageTTL=seconds`)."""
    path = NAMESPACE + "/messageTTL"

    @router.get(
        path,
        operation_id="getNamespaceMessageTTL",
        summary="The namespace's effective message TTL in seconds (0 = off)",
        response_model=int,
        responses=problems(404, 422),
    )
    async def get_ttl(tenant: Tenant, namespace: Namespace) -> int:
        return (await topics.get_namespace_policies(f"{tenant}/{namespace}")).message_ttl_seconds

    @router.post(
        path,
        operation_id="setNamespaceMessageTTL",
        summary="Set the namespace's message TTL (its topics without their own take it)",
        status_code=204,
        response_model=None,
        responses=problems(404, 422),
    )
    async def set_ttl(
        tenant: Tenant,
        namespace: Namespace,
        messageTTL: int = Query(ge=0, le=10**10, examples=[3600], description="seconds; 0 = off"),
    ) -> Response:
        await topics.set_namespace_policy(f"{tenant}/{namespace}", "messageTTL", messageTTL)
        return empty()

    @router.delete(
        path,
        operation_id="removeNamespaceMessageTTL",
        summary="Remove the namespace's message TTL (fall back to the settings)",
        status_code=204,
        response_model=None,
        responses=problems(404, 422),
    )
    async def delete_ttl(tenant: Tenant, namespace: Namespace) -> Response:
        await topics.delete_namespace_policy(f"{tenant}/{namespace}", "messageTTL")
        return empty()
