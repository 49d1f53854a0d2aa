"""Admin plane in Pulsar's admin v2 grammar (docs/rest-api.md): topics, stats, compaction, policies,
subscriptions, tenants and namespaces. Cold paths: pydantic models throughout.

No `from __future__ import annotations` here: the policy routes are built in a loop, and FastAPI
must see their body types as objects, not as names it cannot resolve at module level.
"""

from typing import Annotated, Any

from fastapi import APIRouter, Body, Path, Query, Request
from starlette.responses import Response

from app import schemas
from app.routes import backlog_quota, namespace_policies, subscription_admin
from app.routes.common import (
    Namespace,
    Subscription,
    Tenant,
    Topic,
    empty,
    full_name,
    problems,
)
from app.routes.permissions import permission_routes
from app.routes.topic_ops import topic_ops_routes
from managed_ledger.metadata.api import TenantInfo
from topics.api import PolicyName, TopicsApi
from topics.names import NAME_PATTERN

PERSISTENT = "/admin/v2/persistent/{tenant}/{namespace}"


def admin_router(topics: TopicsApi) -> APIRouter:
    router = APIRouter(tags=["admin"])
    _topic_routes(router, topics)
    _partition_routes(router, topics)
    _unload_route(router, topics)
    _stats_routes(router, topics)
    _policy_routes(router, topics)
    _message_ttl_routes(router, topics)
    backlog_quota.topic_routes(router, topics, PERSISTENT)
    _subscription_routes(router, topics)
    subscription_admin.position_routes(router, topics, PERSISTENT)
    subscription_admin.backlog_routes(router, topics, PERSISTENT)
    subscription_admin.expire_routes(router, topics, PERSISTENT)
    topic_ops_routes(router, topics, PERSISTENT)
    _tenant_routes(router, topics)
    _namespace_routes(router, topics)
    permission_routes(router, topics)
    namespace_policies.namespace_policy_routes(router, topics)
    backlog_quota.namespace_routes(router, topics)
    return router


def _topic_routes(router: APIRouter, topics: TopicsApi) -> None:
    @router.get(
        PERSISTENT, operation_id="listTopics", summary="Topics of a namespace", responses=problems(404, 422)
    )
    async def list_topics(tenant: Tenant, namespace: Namespace) -> list[str]:
        return await topics.list_topics(f"{tenant}/{namespace}")

    @router.put(
        PERSISTENT + "/{topic}",
        operation_id="createTopic",
        summary="Create a non-partitioned topic",
        status_code=204,
        response_model=None,
        responses=problems(404, 409, 422),
    )
    async def create_topic(tenant: Tenant, namespace: Namespace, topic: Topic) -> Response:
        await topics.create_topic(full_name(tenant, namespace, topic), 0)
        return empty()

    @router.delete(
        PERSISTENT + "/{topic}",
        operation_id="deleteTopic",
        summary="Delete a topic: its ledgers, cursors and compacted ledger",
        status_code=204,
        response_model=None,
        responses=problems(404, 409, 422),
    )
    async def delete_topic(
        tenant: Tenant, namespace: Namespace, topic: Topic, force: bool = False
    ) -> Response:
        await topics.delete_topic(full_name(tenant, namespace, topic), force)
        return empty()


def _partition_routes(router: APIRouter, topics: TopicsApi) -> None:
    @router.put(
        PERSISTENT + "/{topic}/partitions",
        operation_id="createPartitionedTopic",
        summary="Create a partitioned topic of N partitions",
        status_code=204,
        response_model=None,
        responses=problems(404, 409, 422),
    )
    async def create_partitioned(
        tenant: Tenant,
        namespace: Namespace,
        topic: Topic,
        partitions: Annotated[int, Body(ge=1, le=10_000, examples=[4])],
    ) -> Response:
        await topics.create_topic(full_name(tenant, namespace, topic), partitions)
        return empty()

    @router.post(
        PERSISTENT + "/{topic}/partitions",
        operation_id="updatePartitionedTopic",
        summary="Grow a partitioned topic to N partitions (409 when not partitioned or not more)",
        status_code=204,
        response_model=None,
        responses=problems(404, 409, 422),
    )
    async def update_partitions(
        tenant: Tenant,
        namespace: Namespace,
        topic: Topic,
        partitions: Annotated[int, Body(ge=1, le=10_000, examples=[8])],
    ) -> Response:
        await topics.update_partitions(full_name(tenant, namespace, topic), partitions)
        return empty()

    @router.get(
        PERSISTENT + "/{topic}/partitions",
        operation_id="getPartitions",
        summary="Number of partitions (0: not partitioned)",
        responses=problems(404, 422),
    )
    async def get_partitions(tenant: Tenant, namespace: Namespace, topic: Topic) -> schemas.Partitions:
        return schemas.Partitions(partitions=await topics.get_partitions(full_name(tenant, namespace, topic)))


def _unload_route(router: APIRouter, topics: TopicsApi) -> None:
    @router.put(
        PERSISTENT + "/{topic}/unload",
        operation_id="unloadTopic",
        summary="Close the topic here and release its ownership; the next request may land elsewhere",
        status_code=204,
        response_model=None,
        responses=problems(404, 422),
    )
    async def unload(tenant: Tenant, namespace: Namespace, topic: Topic) -> Response:
        await topics.unload(full_name(tenant, namespace, topic))
        return empty()


def _stats_routes(router: APIRouter, topics: TopicsApi) -> None:
    @router.get(
        PERSISTENT + "/{topic}/stats",
        operation_id="getTopicStats",
        summary="Counters, storage and backlog, per subscription and of the last compaction",
        responses=problems(404, 422),
    )
    async def stats(
        request: Request, tenant: Tenant, namespace: Namespace, topic: Topic
    ) -> schemas.TopicStats:
        name = full_name(tenant, namespace, topic)
        out = await topics.stats(name)
        for add in getattr(request.app.state, "stats_additions", ()):  # a door's (Pulsar: connections)
            add(name, out)
        return schemas.TopicStats.model_validate(out)

    @router.get(
        PERSISTENT + "/{topic}/partitioned-stats",
        operation_id="getPartitionedStats",
        summary="A partitioned topic's stats summed, and each partition's (404: not partitioned)",
        responses=problems(404, 422),
    )
    async def partitioned_stats(
        tenant: Tenant, namespace: Namespace, topic: Topic
    ) -> schemas.PartitionedTopicStats:
        data = await topics.partitioned_stats(full_name(tenant, namespace, topic))
        return schemas.PartitionedTopicStats.model_validate(data)

    @router.get(
        PERSISTENT + "/{topic}/internalStats",
        operation_id="getInternalStats",
        summary="The managed ledger's ledgers, cursors and compacted ledger",
        responses=problems(404, 422),
    )
    async def internal_stats(
        tenant: Tenant, namespace: Namespace, topic: Topic
    ) -> schemas.InternalStats | schemas.PartitionedInternalStats:
        data = await topics.internal_stats(full_name(tenant, namespace, topic))
        if "metadata" in data:
            return schemas.PartitionedInternalStats.model_validate(data)
        return schemas.InternalStats.model_validate(data)

    @router.put(
        PERSISTENT + "/{topic}/compaction",
        operation_id="triggerCompaction",
        summary="Start a compaction run (409 while one is running)",
        status_code=204,
        response_model=None,
        responses=problems(404, 409, 422),
    )
    async def trigger_compaction(tenant: Tenant, namespace: Namespace, topic: Topic) -> Response:
        await topics.trigger_compaction(full_name(tenant, namespace, topic))
        return empty()

    @router.get(
        PERSISTENT + "/{topic}/compaction",
        operation_id="getCompactionStatus",
        summary="Status of the topic's last compaction run (kept across restarts)",
        responses=problems(404, 422),
    )
    async def compaction_status(
        tenant: Tenant, namespace: Namespace, topic: Topic
    ) -> schemas.CompactionStatus:
        data = await topics.compaction_status(full_name(tenant, namespace, topic))
        return schemas.CompactionStatus.model_validate(data)


def _policy_routes(router: APIRouter, topics: TopicsApi) -> None:
    """GET (effective value), POST (set on the topic), DELETE (fall back) for each policy.

    `set_policy` receives the API's value as is: the dict of Pulsar's field names for retention,
    rolloverPolicy and compactionPolicy (the fields given: the others keep the topic's own value,
    else the namespace's), an int for compactionThreshold, a bool for deduplicationEnabled.
    """
    _policy(
        router,
        topics,
        "retention",
        schemas.RetentionPolicyUpdate,
        namespace_policies.retention_body,
        "Retention",
        schemas.RetentionPolicy,
    )
    _policy(
        router,
        topics,
        "rolloverPolicy",
        schemas.RolloverPolicyUpdate,
        namespace_policies.rollover_body,
        "RolloverPolicy",
        schemas.RolloverPolicy,
    )
    _policy(
        router,
        topics,
        "compactionThreshold",
        Annotated[int, Body(ge=0, examples=[104857600], description="bytes of backlog; 0 = off")],
        lambda p: p.compaction_threshold_bytes,
        "CompactionThreshold",
    )
    _policy(
        router,
        topics,
        "deduplicationEnabled",
        Annotated[bool, Body(examples=[True])],
        lambda p: p.deduplication_enabled,
        "DeduplicationEnabled",
    )
    _policy(
        router,
        topics,
        "compactionPolicy",
        schemas.CompactionPolicyUpdate,
        namespace_policies.compaction_policy,
        "CompactionPolicy",
        schemas.CompactionPolicy,
    )


def _message_ttl_routes(router: APIRouter, topics: TopicsApi) -> None:
    """Pulsar's messageTTL: the value goes in the query (`?messageTTL=seconds`), not a body."""
    path = PERSISTENT + "/{topic}/messageTTL"

    @router.get(
        path,
        operation_id="getMessageTTL",
        summary="Effective message TTL in seconds (0 = off)",
        response_model=int,
        responses=problems(404, 422),
    )
    async def get_ttl(tenant: Tenant, namespace: Namespace, topic: Topic) -> int:
        return (await topics.get_policies(full_name(tenant, namespace, topic))).message_ttl_seconds

    @router.post(
        path,
        operation_id="setMessageTTL",
        summary="Set the topic's message TTL: unacked messages older than it are acked on every subscription",
        status_code=204,
        response_model=None,
        responses=problems(404, 422),
    )
    async def set_ttl(
        tenant: Tenant,
        namespace: Namespace,
        topic: Topic,
        messageTTL: int = Query(ge=0, le=10**10, examples=[3600], description="seconds; 0 = off"),
    ) -> Response:
        await topics.set_policy(full_name(tenant, namespace, topic), "messageTTL", messageTTL)
        return empty()

    @router.delete(
        path,
        operation_id="removeMessageTTL",
        summary="Remove the topic's message TTL (fall back to the namespace or the default)",
        status_code=204,
        response_model=None,
        responses=problems(404, 422),
    )
    async def delete_ttl(tenant: Tenant, namespace: Namespace, topic: Topic) -> Response:
        await topics.delete_policy(full_name(tenant, namespace, topic), "messageTTL")
        return empty()


def _policy(
    router: APIRouter,
    topics: TopicsApi,
    name: PolicyName,
    body_type: Any,
    get: Any,
    op: str,
    response_type: Any = None,
) -> None:
    """`response_type`: what GET answers (None: the body's type)."""
    path = PERSISTENT + "/{topic}/" + name
    if response_type is None:
        response_type = body_type if isinstance(body_type, type) else body_type.__origin__

    @router.get(
        path,
        operation_id=f"get{op}",
        summary=f"Effective {name}",
        response_model=response_type,
        responses=problems(404, 422),
    )
    async def get_policy(tenant: Tenant, namespace: Namespace, topic: Topic) -> Any:
        return get(await topics.get_policies(full_name(tenant, namespace, topic)))

    @router.post(
        path,
        operation_id=f"set{op}",
        summary=f"Set {name} on the topic",
        status_code=204,
        response_model=None,
        responses=problems(404, 422),
    )
    async def set_policy(tenant: Tenant, namespace: Namespace, topic: Topic, value: body_type) -> Response:  # type: ignore[valid-type]
        plain = value.model_dump(mode="json", exclude_none=True) if hasattr(value, "model_dump") else value
        await topics.set_policy(full_name(tenant, namespace, topic), name, plain)
        return empty()

    @router.delete(
        path,
        operation_id=f"remove{op}",
        summary=f"Remove the topic's {name} (fall back to the namespace or the default)",
        status_code=204,
        response_model=None,
        responses=problems(404, 422),
    )
    async def delete_policy(tenant: Tenant, namespace: Namespace, topic: Topic) -> Response:
        await topics.delete_policy(full_name(tenant, namespace, topic), name)
        return empty()


def _subscription_routes(router: APIRouter, topics: TopicsApi) -> None:
    @router.get(
        PERSISTENT + "/{topic}/subscriptions",
        operation_id="listSubscriptions",
        summary="Names of the topic's subscriptions",
        responses=problems(404, 422),
    )
    async def list_subscriptions(tenant: Tenant, namespace: Namespace, topic: Topic) -> list[str]:
        return await topics.list_subscriptions(full_name(tenant, namespace, topic))

    @router.delete(
        PERSISTENT + "/{topic}/subscription/{subscription}",
        operation_id="adminDeleteSubscription",
        summary="Delete a subscription",
        status_code=204,
        response_model=None,
        responses=problems(404, 422),
    )
    async def delete_subscription(
        tenant: Tenant, namespace: Namespace, topic: Topic, subscription: Subscription
    ) -> Response:
        await topics.delete_subscription(full_name(tenant, namespace, topic), subscription)
        return empty()

    @router.post(
        PERSISTENT + "/{topic}/subscription/{subscription}/resetcursor/{timestamp}",
        operation_id="resetCursor",
        summary="Reset the subscription to the first message published at or after `timestamp` (ms)",
        status_code=204,
        response_model=None,
        responses=problems(404, 422),
    )
    async def reset_cursor(
        tenant: Tenant,
        namespace: Namespace,
        topic: Topic,
        subscription: Subscription,
        timestamp: Annotated[int, Path(ge=0, le=2**63 - 1, examples=[1763700000000])],
    ) -> Response:
        await topics.reset_cursor(full_name(tenant, namespace, topic), subscription, timestamp)
        return empty()


TenantPath = Annotated[str, Path(pattern=NAME_PATTERN, examples=["public"])]


def _tenant_routes(router: APIRouter, topics: TopicsApi) -> None:
    @router.get("/admin/v2/tenants", operation_id="listTenants", summary="All tenants")
    async def list_tenants() -> list[str]:
        return await topics.list_tenants()

    @router.get(
        "/admin/v2/tenants/{tenant}",
        operation_id="getTenant",
        summary="A tenant: its namespaces, admin roles and allowed clusters",
        responses=problems(404, 422),
    )
    async def get_tenant(tenant: TenantPath) -> schemas.Tenant:
        info = await topics.get_tenant(tenant)
        return schemas.Tenant(
            name=tenant,
            namespaces=await topics.list_namespaces(tenant),
            admin_roles=list(info.admin_roles),
            allowed_clusters=list(info.allowed_clusters),
        )

    @router.put(
        "/admin/v2/tenants/{tenant}",
        operation_id="createTenant",
        summary="Create a tenant, with the roles that administer it (Pulsar's TenantInfo)",
        status_code=204,
        response_model=None,
        responses=problems(409, 422),
    )
    async def create_tenant(
        tenant: TenantPath, body: Annotated[schemas.TenantInfo, Body(default_factory=schemas.TenantInfo)]
    ) -> Response:
        await topics.create_tenant(tenant, _tenant_info(tenant, body))
        return empty()

    @router.post(
        "/admin/v2/tenants/{tenant}",
        operation_id="updateTenant",
        summary="Replace a tenant's admin roles and allowed clusters",
        status_code=204,
        response_model=None,
        responses=problems(404, 422),
    )
    async def update_tenant(tenant: TenantPath, body: schemas.TenantInfo) -> Response:
        await topics.update_tenant(_tenant_info(tenant, body))
        return empty()

    @router.delete(
        "/admin/v2/tenants/{tenant}",
        operation_id="deleteTenant",
        status_code=204,
        response_model=None,
        responses=problems(404, 409, 422),
    )
    async def delete_tenant(tenant: TenantPath) -> Response:
        await topics.delete_tenant(tenant)
        return empty()


def _tenant_info(tenant: str, body: schemas.TenantInfo) -> TenantInfo:
    return TenantInfo(tenant, tuple(body.admin_roles), tuple(body.allowed_clusters))


def _namespace_routes(router: APIRouter, topics: TopicsApi) -> None:
    @router.get("/admin/v2/namespaces/{tenant}", operation_id="listNamespaces", responses=problems(404, 422))
    async def list_namespaces(tenant: TenantPath) -> list[str]:
        return await topics.list_namespaces(tenant)

    @router.get(
        "/admin/v2/namespaces/{tenant}/{namespace}", operation_id="getNamespace", responses=problems(404, 422)
    )
    async def get_namespace(tenant: Tenant, namespace: Namespace) -> schemas.Namespace:
        name = f"{tenant}/{namespace}"
        return schemas.Namespace(name=name, topics=await topics.list_topics(name))

    @router.put(
        "/admin/v2/namespaces/{tenant}/{namespace}",
        operation_id="createNamespace",
        status_code=204,
        response_model=None,
        responses=problems(404, 409, 422),
    )
    async def create_namespace(tenant: Tenant, namespace: Namespace) -> Response:
        await topics.create_namespace(f"{tenant}/{namespace}")
        return empty()

    @router.delete(
        "/admin/v2/namespaces/{tenant}/{namespace}",
        operation_id="deleteNamespace",
        status_code=204,
        response_model=None,
        responses=problems(404, 409, 422),
    )
    async def delete_namespace(tenant: Tenant, namespace: Namespace) -> Response:
        await topics.delete_namespace(f"{tenant}/{namespace}")
        return empty()
