"""The Kafka group APIs: kio requests in, the group coordinator, kio responses out.

`handlers(coordinator, namespace)` maps each API key to `async handler(ctx, request) ->
response`; the wire layer decodes the request with kio and encodes what the handler returns.
`ctx` is any object with `api_version` (and, if it has one, `client_id`, which prefixes new
member ids, as Kafka's do). The response is the request version's kio dataclass: each handler
fills the fields that version has (`_build` drops the others).

Versions: the ranges that librdkafka, kafka-python 3, aiokafka 0.14 and kafkajs can all use
(`GROUP_API_VERSIONS`): FindCoordinator 0-1, JoinGroup 0-5, SyncGroup 0-3, Heartbeat 0-1,
LeaveGroup 0-1, OffsetCommit 2-3, OffsetFetch 1-3.

Topic names: a Kafka topic `T` is the Quire topic `tenant/namespace/T` of the listener's
namespace (`KafkaNamespace`, `public/default` by default); a name with slashes,
`tenant/namespace/T`, is a whole Quire name, as on the rest of the listener. Anything else that
is not a valid Quire topic name is no topic (UNKNOWN_TOPIC_OR_PARTITION). An OffsetFetch of all
offsets names other namespaces' topics by their whole name.
"""

from __future__ import annotations

import dataclasses
import datetime
import importlib
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from types import ModuleType
from typing import Any, Protocol

from kio.schema.errors import ErrorCode
from kio.static.primitive import i32Timedelta

from app.auth.policy import Need
from app.kafka_listener.group_offsets import GroupCoordinator, OffsetCommit
from app.kafka_listener.groups import JoinRequest
from topics.names import is_name

OFFSET_COMMIT, OFFSET_FETCH, FIND_COORDINATOR = 8, 9, 10
JOIN_GROUP, HEARTBEAT, LEAVE_GROUP, SYNC_GROUP = 11, 12, 13, 14
GROUP_API_VERSIONS: dict[int, tuple[int, int]] = {
    OFFSET_COMMIT: (2, 3),
    OFFSET_FETCH: (1, 3),
    FIND_COORDINATOR: (0, 1),
    JOIN_GROUP: (0, 5),
    HEARTBEAT: (0, 1),
    LEAVE_GROUP: (0, 1),
    SYNC_GROUP: (0, 3),
}
NO_THROTTLE = i32Timedelta.parse(datetime.timedelta(0))
GROUP_KEY = 0  # FindCoordinator v1 key_type: 0 a group, 1 a transactional id


class RequestContext(Protocol):
    @property
    def api_version(self) -> int: ...


class TopicNamespace(Protocol):
    """The namespace a Kafka listener serves (its settings)."""

    @property
    def tenant(self) -> str: ...

    @property
    def namespace(self) -> str: ...


@dataclass(frozen=True, slots=True)
class KafkaNamespace:
    tenant: str = "public"
    namespace: str = "default"


def quire_topic(ns: TopicNamespace, kafka_topic: str) -> str | None:
    """The Quire topic `tenant/namespace/T` of Kafka topic `T` (a name with slashes is a whole
    Quire name, as docs/kafka.md says); None when it is no valid name."""
    if "/" in kafka_topic:
        parts = kafka_topic.removeprefix("persistent://").split("/")
        return "/".join(parts) if len(parts) == 3 and all(is_name(p) for p in parts) else None
    return f"{ns.tenant}/{ns.namespace}/{kafka_topic}" if is_name(kafka_topic) else None


def kafka_topic(ns: TopicNamespace, topic: str) -> str | None:
    """The Kafka name of a Quire topic: `T` in the listener's namespace, the whole name elsewhere."""
    prefix = f"{ns.tenant}/{ns.namespace}/"
    return topic[len(prefix) :] if topic.startswith(prefix) else topic


Handler = Callable[[Any, Any], Awaitable[Any]]


def _module(api: str, version: int) -> ModuleType:
    return importlib.import_module(f"kio.schema.{api}.v{version}.response")


def _build(cls: Any, **values: Any) -> Any:
    """The kio dataclass `cls` from the values it has fields for (versions differ in fields)."""
    names = {f.name for f in dataclasses.fields(cls)}
    return cls(**{k: v for k, v in values.items() if k in names})


def _ms(value: datetime.timedelta | None) -> int:
    return -1 if value is None else int(value / datetime.timedelta(milliseconds=1))


def _client_id(ctx: Any) -> str:
    return str(getattr(ctx, "client_id", None) or "")


class TopicAccess(Protocol):
    """Who may consume a topic or a namespace (app.kafka_listener.security): commits and fetches
    of offsets need the consume permission on the topic's namespace; a group, the consume
    permission on the listener's namespace, which the group belongs to."""

    async def denied(self, ctx: Any, topic: str, need: Need) -> bool: ...

    async def namespace_denied(self, ctx: Any, tenant: str, namespace: str, need: Need) -> bool: ...


def handlers(
    coordinator: GroupCoordinator, namespace: TopicNamespace | None = None, access: TopicAccess | None = None
) -> dict[int, Handler]:
    """The group APIs' handlers by API key, over `coordinator`, for topics of `namespace`."""
    ns: TopicNamespace = namespace or KafkaNamespace()
    if access is not None:
        guarded = {
            **handlers(coordinator, ns),
            OFFSET_COMMIT: lambda ctx, req: _guarded_commit(coordinator, ns, access, ctx, req),
            OFFSET_FETCH: lambda ctx, req: _guarded_fetch(coordinator, ns, access, ctx, req),
        }
        return {
            key: _group_guard(ns, access, key, handler) if key in _REFUSALS else handler
            for key, handler in guarded.items()
        }
    return {
        FIND_COORDINATOR: lambda ctx, req: find_coordinator(coordinator, ctx, req),
        JOIN_GROUP: lambda ctx, req: join_group(coordinator, ctx, req),
        SYNC_GROUP: lambda ctx, req: sync_group(coordinator, ctx, req),
        HEARTBEAT: lambda ctx, req: heartbeat(coordinator, ctx, req),
        LEAVE_GROUP: lambda ctx, req: leave_group(coordinator, ctx, req),
        OFFSET_COMMIT: lambda ctx, req: offset_commit(coordinator, ns, ctx, req),
        OFFSET_FETCH: lambda ctx, req: offset_fetch(coordinator, ns, ctx, req),
    }


async def find_coordinator(coordinator: GroupCoordinator, ctx: RequestContext, req: Any) -> Any:
    response = _module("find_coordinator", ctx.api_version).FindCoordinatorResponse
    if getattr(req, "key_type", GROUP_KEY) != GROUP_KEY:
        return _build(
            response,
            throttle_time=NO_THROTTLE,
            error_code=ErrorCode.invalid_request,
            error_message="Quire's Kafka listener has no transaction coordinator",
            node_id=-1,
            host="",
            port=-1,
        )
    node = await coordinator.coordinator_for(str(req.key))
    if node is None:
        return _build(
            response,
            throttle_time=NO_THROTTLE,
            error_code=ErrorCode.coordinator_not_available,
            error_message="no live broker is known now; retry",
            node_id=-1,
            host="",
            port=-1,
        )
    return _build(
        response,
        throttle_time=NO_THROTTLE,
        error_code=ErrorCode.none,
        error_message=None,
        node_id=node.node_id,
        host=node.host,
        port=node.port,
    )


async def join_group(coordinator: GroupCoordinator, ctx: RequestContext, req: Any) -> Any:
    version = ctx.api_version
    session_ms = _ms(req.session_timeout)
    rebalance_ms = _ms(getattr(req, "rebalance_timeout", None))  # v0 has none
    result = await coordinator.join(
        JoinRequest(
            group_id=str(req.group_id),
            member_id=req.member_id,
            session_timeout_ms=session_ms,
            rebalance_timeout_ms=rebalance_ms if rebalance_ms > 0 else session_ms,
            protocol_type=req.protocol_type,
            protocols=tuple((p.name, p.metadata) for p in req.protocols),
            client_id=_client_id(ctx),
            group_instance_id=getattr(req, "group_instance_id", None),
            require_known_member_id=version >= 4,  # KIP-394
        )
    )
    module = _module("join_group", version)
    members = tuple(
        _build(module.JoinGroupResponseMember, member_id=m, group_instance_id=instance, metadata=metadata)
        for m, instance, metadata in result.members
    )
    return _build(
        module.JoinGroupResponse,
        throttle_time=NO_THROTTLE,
        error_code=result.error,
        generation_id=result.generation,
        protocol_name=result.protocol,
        leader=result.leader,
        member_id=result.member_id,
        members=members,
    )


async def sync_group(coordinator: GroupCoordinator, ctx: RequestContext, req: Any) -> Any:
    assignments = {a.member_id: a.assignment for a in req.assignments}
    result = await coordinator.sync(str(req.group_id), int(req.generation_id), req.member_id, assignments)
    return _build(
        _module("sync_group", ctx.api_version).SyncGroupResponse,
        throttle_time=NO_THROTTLE,
        error_code=result.error,
        assignment=result.assignment,
    )


async def heartbeat(coordinator: GroupCoordinator, ctx: RequestContext, req: Any) -> Any:
    error = await coordinator.heartbeat(str(req.group_id), int(req.generation_id), req.member_id)
    return _build(
        _module("heartbeat", ctx.api_version).HeartbeatResponse, throttle_time=NO_THROTTLE, error_code=error
    )


async def leave_group(coordinator: GroupCoordinator, ctx: RequestContext, req: Any) -> Any:
    error = await coordinator.leave(str(req.group_id), req.member_id)
    return _build(
        _module("leave_group", ctx.api_version).LeaveGroupResponse,
        throttle_time=NO_THROTTLE,
        error_code=error,
    )


async def offset_commit(
    coordinator: GroupCoordinator, ns: TopicNamespace, ctx: RequestContext, req: Any
) -> Any:
    wanted: list[tuple[str, int, OffsetCommit | None]] = []  # Kafka topic, partition, the commit
    for t in req.topics:
        topic = quire_topic(ns, str(t.name))
        for p in t.partitions:
            commit = None
            if topic is not None:
                commit = OffsetCommit(
                    topic, int(p.partition_index), int(p.committed_offset), p.committed_metadata
                )
            wanted.append((str(t.name), int(p.partition_index), commit))
    commits = [c for _, _, c in wanted if c is not None]
    errors = iter(
        await coordinator.commit(
            str(req.group_id), int(req.generation_id_or_member_epoch), req.member_id, commits
        )
    )
    results = [
        (name, partition, next(errors) if c is not None else ErrorCode.unknown_topic_or_partition)
        for name, partition, c in wanted
    ]
    return _commit_response(ctx.api_version, results)


def _commit_response(version: int, results: list[tuple[str, int, ErrorCode]]) -> Any:
    module = _module("offset_commit", version)
    by_topic: dict[str, list[Any]] = {}
    for name, partition, error in results:
        by_topic.setdefault(name, []).append(
            _build(module.OffsetCommitResponsePartition, partition_index=partition, error_code=error)
        )
    topics = tuple(
        _build(module.OffsetCommitResponseTopic, name=name, partitions=tuple(parts))
        for name, parts in by_topic.items()
    )
    return _build(module.OffsetCommitResponse, throttle_time=NO_THROTTLE, topics=topics)


FetchRow = tuple[str, int, int, str, ErrorCode]  # Kafka topic, partition, offset, metadata, error


async def offset_fetch(
    coordinator: GroupCoordinator, ns: TopicNamespace, ctx: RequestContext, req: Any
) -> Any:
    group = str(req.group_id)
    rows: list[FetchRow] = []
    if req.topics is None:  # v2 and later: every committed offset of the group
        error, stored = await coordinator.fetch(group, None)
        for o in stored:
            name = kafka_topic(ns, o.topic)
            if name is not None:
                rows.append((name, o.partition, o.offset, o.metadata, ErrorCode.none))
        return _fetch_response(ctx.api_version, error, rows)
    asked = [(str(t.name), int(p)) for t in req.topics for p in t.partition_indexes]
    mapped = [(quire_topic(ns, name), p) for name, p in asked]
    error, found = await coordinator.fetch(group, [(t, p) for t, p in mapped if t is not None])
    offsets = {(o.topic, o.partition): o for o in found}
    for (name, p), (topic, _) in zip(asked, mapped, strict=True):
        committed = offsets.get((topic, p)) if topic is not None else None
        if topic is None:
            rows.append((name, p, -1, "", ErrorCode.unknown_topic_or_partition))
        elif committed is None:  # no commit (-1, no error), or none could be read (the error)
            rows.append((name, p, -1, "", error))
        else:
            rows.append((name, p, committed.offset, committed.metadata, ErrorCode.none))
    return _fetch_response(ctx.api_version, error, rows)


def _fetch_response(version: int, error: ErrorCode, rows: list[FetchRow]) -> Any:
    module = _module("offset_fetch", version)
    by_topic: dict[str, list[Any]] = {}
    for name, partition, offset, metadata, partition_error in rows:
        by_topic.setdefault(name, []).append(
            _build(
                module.OffsetFetchResponsePartition,
                partition_index=partition,
                committed_offset=offset,
                metadata=metadata,
                error_code=partition_error,
            )
        )
    topics = tuple(
        _build(module.OffsetFetchResponseTopic, name=name, partitions=tuple(parts))
        for name, parts in by_topic.items()
    )
    return _build(module.OffsetFetchResponse, throttle_time=NO_THROTTLE, topics=topics, error_code=error)


async def _refused(access: TopicAccess, ns: TopicNamespace, ctx: Any, names: list[str]) -> set[str]:
    """The Kafka topic names among `names` the connection's role may not consume."""
    out = set()
    for name in set(names):
        topic = quire_topic(ns, name)
        if topic is not None and await access.denied(ctx, topic, Need.CONSUME):
            out.add(name)
    return out


async def _guarded_commit(
    coordinator: GroupCoordinator, ns: TopicNamespace, access: TopicAccess, ctx: Any, req: Any
) -> Any:
    """OffsetCommit, all refused (TOPIC_AUTHORIZATION_FAILED) when any topic may not be consumed."""
    names = [str(t.name) for t in req.topics]
    if await _refused(access, ns, ctx, names):
        failed = ErrorCode.topic_authorization_failed
        results = [(str(t.name), int(p.partition_index), failed) for t in req.topics for p in t.partitions]
        return _commit_response(ctx.api_version, results)
    return await offset_commit(coordinator, ns, ctx, req)


async def _guarded_fetch(
    coordinator: GroupCoordinator, ns: TopicNamespace, access: TopicAccess, ctx: Any, req: Any
) -> Any:
    """OffsetFetch: topics that may not be consumed answer TOPIC_AUTHORIZATION_FAILED (asked for)
    or are left out (every offset of the group)."""
    response = await offset_fetch(coordinator, ns, ctx, req)
    refused = await _refused(access, ns, ctx, [str(t.name) for t in response.topics])
    if not refused:
        return response
    failed = ErrorCode.topic_authorization_failed
    rows: list[FetchRow] = [
        (str(t.name), int(p.partition_index), -1, "", failed)
        if str(t.name) in refused
        else (str(t.name), int(p.partition_index), int(p.committed_offset), p.metadata or "", p.error_code)
        for t in response.topics
        for p in t.partitions
        if req.topics is not None or str(t.name) not in refused
    ]
    return _fetch_response(ctx.api_version, getattr(response, "error_code", ErrorCode.none), rows)


# --- the group's own permission -----------------------------------------------------------------
# A group belongs to the listener's namespace (as KoP scopes groups per tenant/namespace) and its
# membership and offsets need the consume permission there (Kafka's READ on the group): without
# it another tenant's role could join a group, lead it and assign its partitions to nobody.


def _group_guard(ns: TopicNamespace, access: TopicAccess, key: int, handler: Handler) -> Handler:
    """`handler`, answered GROUP_AUTHORIZATION_FAILED for a role that may not consume in the
    listener's namespace."""

    async def guarded(ctx: Any, req: Any) -> Any:
        if await access.namespace_denied(ctx, ns.tenant, ns.namespace, Need.CONSUME):
            return _REFUSALS[key](ctx.api_version, req)
        return await handler(ctx, req)

    return guarded


_DENIED = ErrorCode.group_authorization_failed


def _refused_join(version: int, req: Any) -> Any:
    return _build(
        _module("join_group", version).JoinGroupResponse,
        throttle_time=NO_THROTTLE,
        error_code=_DENIED,
        generation_id=-1,
        protocol_name="",
        leader="",
        member_id=req.member_id or "",
        members=(),
    )


def _refused_sync(version: int, req: Any) -> Any:
    response = _module("sync_group", version).SyncGroupResponse
    return _build(response, throttle_time=NO_THROTTLE, error_code=_DENIED, assignment=b"")


def _refused_simple(api: str, response: str) -> Callable[[int, Any], Any]:
    def refused(version: int, req: Any) -> Any:
        return _build(getattr(_module(api, version), response), throttle_time=NO_THROTTLE, error_code=_DENIED)

    return refused


def _refused_commit(version: int, req: Any) -> Any:
    rows = [(str(t.name), int(p.partition_index), _DENIED) for t in req.topics for p in t.partitions]
    return _commit_response(version, rows)


def _refused_fetch(version: int, req: Any) -> Any:
    asked = (
        [] if req.topics is None else [(str(t.name), int(p)) for t in req.topics for p in t.partition_indexes]
    )
    return _fetch_response(version, _DENIED, [(name, p, -1, "", _DENIED) for name, p in asked])


_REFUSALS: dict[int, Callable[[int, Any], Any]] = {
    JOIN_GROUP: _refused_join,
    SYNC_GROUP: _refused_sync,
    HEARTBEAT: _refused_simple("heartbeat", "HeartbeatResponse"),
    LEAVE_GROUP: _refused_simple("leave_group", "LeaveGroupResponse"),
    OFFSET_COMMIT: _refused_commit,
    OFFSET_FETCH: _refused_fetch,
}
