"""A consumer group's own permission (issue 23, finding 10): a group belongs to the listener's
namespace, and its membership and offsets need the consume permission there. Another tenant's
role is answered GROUP_AUTHORIZATION_FAILED on every group API and changes nothing in the group."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import pytest
from kio.schema.errors import ErrorCode

from app.auth.policy import Need
from app.kafka_listener import group_handlers as gh
from app.kafka_listener.cluster import SingleNode
from app.kafka_listener.group_offsets import GroupCoordinator
from app.kafka_listener.groups import GroupConfig
from managed_ledger.metadata.memory import InMemoryMetadataStore
from tests.kafka_listener.group_support import ME
from tests.kafka_listener.test_group_handlers import encoded, ms, nested, request
from tests.kafka_listener.test_groups import bounded
from tests.topics.conftest import make_env

DENIED = ErrorCode.group_authorization_failed


@dataclass(frozen=True)
class Ctx:
    api_version: int
    role: str
    client_id: str | None = "kcat"


class Grants:
    """Role "a" may consume in public/default (tenant A's namespace); role "b" only in b/ns."""

    async def denied(self, ctx: Any, topic: str, need: Need) -> bool:
        tenant, namespace, _ = topic.split("/", 2)
        return await self.namespace_denied(ctx, tenant, namespace, need)

    async def namespace_denied(self, ctx: Any, tenant: str, namespace: str, need: Need) -> bool:
        allowed = {"a": ("public", "default"), "b": ("b", "ns")}
        return allowed.get(ctx.role) != (tenant, namespace)


@pytest.fixture
async def handlers() -> AsyncIterator[dict[int, gh.Handler]]:
    env = await make_env(InMemoryMetadataStore())
    await env.service.create_topic("public/default/orders", partitions=2)
    config = GroupConfig(initial_rebalance_delay_ms=0, min_session_timeout_ms=10)
    coordinator = GroupCoordinator(env.service, SingleNode(ME), config)
    yield gh.handlers(coordinator, gh.KafkaNamespace(), Grants())
    await coordinator.close()
    await env.service.close()
    await env.factory.close()


async def call(handlers: dict[int, gh.Handler], role: str, key: int, version: int, req: Any) -> Any:
    response = await bounded(handlers[key](Ctx(version, role), req))
    assert (type(response).__api_key__, type(response).__version__) == (key, version)
    encoded(response)
    return response


def join(version: int, member_id: str) -> Any:
    protocols = (nested("join_group", version, "JoinGroupRequestProtocol", name="range", metadata=b"sub"),)
    return request(
        "join_group",
        version,
        "JoinGroupRequest",
        group_id="g",
        session_timeout=ms(10_000),
        rebalance_timeout=ms(5_000),
        member_id=member_id,
        protocol_type="consumer",
        protocols=protocols,
    )


def sync(member: str, assignment: bytes) -> Any:
    mine = nested("sync_group", 1, "SyncGroupRequestAssignment", member_id=member, assignment=assignment)
    return request(
        "sync_group",
        1,
        "SyncGroupRequest",
        group_id="g",
        generation_id=1,
        member_id=member,
        assignments=(mine,),
    )


def beat(member: str) -> Any:
    return request("heartbeat", 1, "HeartbeatRequest", group_id="g", generation_id=1, member_id=member)


def commit(version: int) -> Any:
    fields = {"partition_index": 0, "committed_offset": 5, "committed_metadata": None}
    part = nested("offset_commit", version, "OffsetCommitRequestPartition", **fields)
    topic = nested("offset_commit", version, "OffsetCommitRequestTopic", name="orders", partitions=(part,))
    return request(
        "offset_commit",
        version,
        "OffsetCommitRequest",
        group_id="g",
        generation_id_or_member_epoch=-1,
        member_id="",
        retention_time=ms(-1),
        topics=(topic,),
    )


def fetch(version: int) -> Any:
    topic = nested("offset_fetch", version, "OffsetFetchRequestTopic", name="orders", partition_indexes=(0,))
    return request("offset_fetch", version, "OffsetFetchRequest", group_id="g", topics=(topic,))


@pytest.mark.parametrize("join_v", [0, 1, 3, 5])
async def test_another_tenants_role_may_not_join_lead_or_leave_the_group(
    handlers: dict[int, gh.Handler], join_v: int
) -> None:
    joined = await call(handlers, "a", 11, 1, join(1, ""))
    a = joined.member_id
    assert (joined.error_code, joined.leader) == (ErrorCode.none, a)
    assert (await call(handlers, "a", 14, 1, sync(a, b"orders-0-1"))).assignment == b"orders-0-1"
    refused = await call(handlers, "b", 11, join_v, join(join_v, ""))
    assert (refused.error_code, refused.generation_id, refused.members) == (DENIED, -1, ())
    assert (await call(handlers, "b", 14, 1, sync(a, b""))).error_code == DENIED
    assert (await call(handlers, "b", 12, 1, beat(a))).error_code == DENIED
    leave = request("leave_group", 1, "LeaveGroupRequest", group_id="g", member_id=a)
    assert (await call(handlers, "b", 13, 1, leave)).error_code == DENIED
    # the group went on untouched: no rebalance, A is still its member at generation 1
    assert (await call(handlers, "a", 12, 1, beat(a))).error_code == ErrorCode.none


@pytest.mark.parametrize("version", [2, 3])
async def test_another_tenants_role_may_not_commit_or_fetch_the_groups_offsets(
    handlers: dict[int, gh.Handler], version: int
) -> None:
    ok = await call(handlers, "a", 8, version, commit(version))
    assert [p.error_code for t in ok.topics for p in t.partitions] == [ErrorCode.none]
    refused = await call(handlers, "b", 8, version, commit(version))
    assert [p.error_code for t in refused.topics for p in t.partitions] == [DENIED]
    read = await call(handlers, "b", 9, version, fetch(version))
    assert read.error_code == DENIED
    assert [(p.committed_offset, p.error_code) for t in read.topics for p in t.partitions] == [(-1, DENIED)]
    mine = await call(handlers, "a", 9, version, fetch(version))
    assert [p.committed_offset for t in mine.topics for p in t.partitions] == [5]
