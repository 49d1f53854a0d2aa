"""The group APIs' handlers: kio requests of every supported version in, the coordinator, kio
responses of the same version out, each encoded with kio's writer (a field of the wrong type or
a missing one fails there, as it would on the wire)."""

from __future__ import annotations

import asyncio
import datetime
import importlib
import io
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import pytest
from kio.schema.errors import ErrorCode
from kio.serial import entity_writer

from app.kafka_listener import group_handlers as gh
from app.kafka_listener.cluster import SingleNode
from app.kafka_listener.group_offsets import GroupCoordinator
from app.kafka_listener.groups import GroupConfig
from managed_ledger.metadata.api import GroupOffset
from managed_ledger.metadata.memory import InMemoryMetadataStore
from tests.kafka_listener.group_support import ME, settle
from tests.kafka_listener.test_groups import bounded
from tests.topics.conftest import Env, make_env


@dataclass(frozen=True)
class Ctx:
    api_version: int
    client_id: str | None = "kcat"
    correlation_id: int = 7


def request(api: str, version: int, cls: str, /, **fields: Any) -> Any:
    """A kio request (or a part of one) of the API's version, from the fields it has."""
    module = importlib.import_module(f"kio.schema.{api}.v{version}.request")
    return gh._build(getattr(module, cls), **fields)


nested = request


def encoded(response: Any) -> bytes:
    """The response as the wire layer writes it (fails on a malformed one)."""
    buffer = io.BytesIO()
    entity_writer(type(response))(buffer, response)
    return buffer.getvalue()


def ms(n: int) -> datetime.timedelta:
    return datetime.timedelta(milliseconds=n)


@dataclass
class Setup:
    env: Env
    coordinator: GroupCoordinator
    handlers: dict[int, gh.Handler]

    async def call(self, api_key: int, version: int, req: Any) -> Any:
        response = await bounded(self.handlers[api_key](Ctx(version), req))
        assert type(response).__version__ == version and type(response).__api_key__ == api_key
        encoded(response)
        return response


@pytest.fixture
async def s() -> AsyncIterator[Setup]:
    env = await make_env(InMemoryMetadataStore())
    await env.service.create_topic("public/default/orders", partitions=2)
    config = GroupConfig(initial_rebalance_delay_ms=0, min_session_timeout_ms=10)
    coordinator = GroupCoordinator(env.service, SingleNode(ME), config)
    yield Setup(env, coordinator, gh.handlers(coordinator))
    await coordinator.close()
    await env.service.close()
    await env.factory.close()


def test_the_mapping_covers_the_seven_apis_with_their_versions(s: Setup) -> None:
    assert set(s.handlers) == {8, 9, 10, 11, 12, 13, 14} == set(gh.GROUP_API_VERSIONS)
    for key, (low, high) in gh.GROUP_API_VERSIONS.items():
        from kio.schema.index import api_key_map

        for version in range(low, high + 1):
            importlib.import_module(f"kio.schema.{api_key_map[key]}.v{version}.response")


@pytest.mark.parametrize("version", [0, 1])
async def test_find_coordinator_names_this_broker(s: Setup, version: int) -> None:
    r = await s.call(10, version, request("find_coordinator", version, "FindCoordinatorRequest", key="g"))
    assert (r.error_code, r.node_id, r.host, r.port) == (ErrorCode.none, ME.node_id, ME.host, ME.port)
    if version == 1:
        txn = request("find_coordinator", 1, "FindCoordinatorRequest", key="t", key_type=1)
        r = await s.call(10, 1, txn)
        assert r.error_code == ErrorCode.invalid_request and "transaction" in r.error_message


async def _join(s: Setup, version: int, member_id: str, protocols: tuple[Any, ...]) -> Any:
    fields: dict[str, Any] = {
        "group_id": "g",
        "session_timeout": ms(10_000),
        "rebalance_timeout": ms(5_000),
        "member_id": member_id,
        "protocol_type": "consumer",
        "protocols": protocols,
    }
    return await s.call(11, version, request("join_group", version, "JoinGroupRequest", **fields))


@pytest.mark.parametrize(
    ("join_v", "sync_v", "beat_v"), [(0, 0, 0), (1, 1, 1), (3, 2, 1), (4, 3, 0), (5, 3, 1)]
)
async def test_a_member_joins_syncs_heartbeats_and_leaves(
    s: Setup, join_v: int, sync_v: int, beat_v: int
) -> None:
    protocols = (nested("join_group", join_v, "JoinGroupRequestProtocol", name="range", metadata=b"sub"),)
    member_id = ""
    if join_v >= 4:
        asked = await _join(s, join_v, "", protocols)
        assert asked.error_code == ErrorCode.member_id_required and asked.member_id.startswith("kcat-")
        member_id = asked.member_id
    joined = await _join(s, join_v, member_id, protocols)
    assert (joined.error_code, joined.generation_id, joined.protocol_name) == (ErrorCode.none, 1, "range")
    assert joined.leader == joined.member_id and [m.metadata for m in joined.members] == [b"sub"]
    me = joined.member_id
    assignment = nested("sync_group", sync_v, "SyncGroupRequestAssignment", member_id=me, assignment=b"asg")
    sync = request(
        "sync_group",
        sync_v,
        "SyncGroupRequest",
        group_id="g",
        generation_id=1,
        member_id=me,
        assignments=(assignment,),
    )
    synced = await s.call(14, sync_v, sync)
    assert (synced.error_code, synced.assignment) == (ErrorCode.none, b"asg")
    beat = request("heartbeat", beat_v, "HeartbeatRequest", group_id="g", generation_id=1, member_id=me)
    assert (await s.call(12, beat_v, beat)).error_code == ErrorCode.none
    stale = request("heartbeat", beat_v, "HeartbeatRequest", group_id="g", generation_id=0, member_id=me)
    assert (await s.call(12, beat_v, stale)).error_code == ErrorCode.illegal_generation
    leave = request("leave_group", beat_v, "LeaveGroupRequest", group_id="g", member_id=me)
    assert (await s.call(13, beat_v, leave)).error_code == ErrorCode.none
    assert (await s.call(13, beat_v, leave)).error_code == ErrorCode.unknown_member_id


async def test_a_follower_waits_for_the_leaders_assignment(s: Setup) -> None:
    protocols = (nested("join_group", 1, "JoinGroupRequestProtocol", name="range", metadata=b""),)
    first = await _join(s, 1, "", protocols)
    second = asyncio.create_task(_join(s, 1, "", protocols))  # a rebalance: the leader rejoins
    await settle()
    again = await _join(s, 1, first.member_id, protocols)
    other = await bounded(second)
    assert again.generation_id == other.generation_id == 2 and len(again.members) == 2 and other.members == ()

    def sync(member: str, assignments: tuple[Any, ...] = ()) -> Any:
        req = request(
            "sync_group",
            1,
            "SyncGroupRequest",
            group_id="g",
            generation_id=2,
            member_id=member,
            assignments=assignments,
        )
        return s.call(14, 1, req)

    waiting = asyncio.create_task(sync(other.member_id))
    await settle()
    assert not waiting.done()
    mine = nested("sync_group", 1, "SyncGroupRequestAssignment", member_id=other.member_id, assignment=b"p1")
    assert (await sync(again.member_id, (mine,))).assignment == b""
    assert (await bounded(waiting)).assignment == b"p1"


def _commit(version: int, generation: int, member: str, topics: dict[str, list[tuple[int, int]]]) -> Any:
    api = "offset_commit"
    return request(
        api,
        version,
        "OffsetCommitRequest",
        group_id="g",
        generation_id_or_member_epoch=generation,
        member_id=member,
        topics=tuple(
            nested(
                api,
                version,
                "OffsetCommitRequestTopic",
                name=name,
                partitions=tuple(
                    nested(
                        api,
                        version,
                        "OffsetCommitRequestPartition",
                        partition_index=p,
                        committed_offset=o,
                        committed_metadata=None,
                    )
                    for p, o in parts
                ),
            )
            for name, parts in topics.items()
        ),
    )


def _fetch(version: int, topics: dict[str, list[int]] | None) -> Any:
    listed = None
    if topics is not None:
        listed = tuple(
            nested("offset_fetch", version, "OffsetFetchRequestTopic", name=n, partition_indexes=tuple(p))
            for n, p in topics.items()
        )
    return request("offset_fetch", version, "OffsetFetchRequest", group_id="g", topics=listed)


def _offsets(response: Any) -> dict[tuple[str, int], tuple[int, str, ErrorCode]]:
    return {
        (t.name, p.partition_index): (p.committed_offset, p.metadata, p.error_code)
        for t in response.topics
        for p in t.partitions
    }


@pytest.mark.parametrize("commit_v", [2, 3])
async def test_commit_then_fetch_with_kafka_topic_names(s: Setup, commit_v: int) -> None:
    commit = _commit(
        commit_v, -1, "", {"orders": [(0, 10), (1, 20), (2, 5)], "bad/name": [(0, 1)], "none": [(0, 1)]}
    )
    r = await s.call(8, commit_v, commit)
    assert {(t.name, p.partition_index): p.error_code for t in r.topics for p in t.partitions} == {
        ("orders", 0): ErrorCode.none,
        ("orders", 1): ErrorCode.none,
        ("orders", 2): ErrorCode.unknown_topic_or_partition,
        ("bad/name", 0): ErrorCode.unknown_topic_or_partition,
        ("none", 0): ErrorCode.unknown_topic_or_partition,
    }
    # another namespace's topic: shown under its whole Quire name (as a Kafka client names it)
    await s.env.service.commit_group_offsets([GroupOffset("g", "public/other/x", 0, 1)])
    for version in (1, 2, 3):
        r = await s.call(
            9, version, _fetch(version, {"orders": [0, 1, 9], "a/b": [0], "public/other/x": [0]})
        )
        assert _offsets(r) == {
            ("orders", 0): (10, "", ErrorCode.none),
            ("orders", 1): (20, "", ErrorCode.none),
            ("orders", 9): (-1, "", ErrorCode.none),
            ("a/b", 0): (-1, "", ErrorCode.unknown_topic_or_partition),
            ("public/other/x", 0): (1, "", ErrorCode.none),
        }
    for version in (2, 3):
        r = await s.call(9, version, _fetch(version, None))
        assert _offsets(r) == {
            ("orders", 0): (10, "", ErrorCode.none),
            ("orders", 1): (20, "", ErrorCode.none),
            ("public/other/x", 0): (1, "", ErrorCode.none),
        }
        assert r.error_code == ErrorCode.none


async def test_commits_to_an_active_group_need_its_member_and_generation(s: Setup) -> None:
    protocols = (nested("join_group", 1, "JoinGroupRequestProtocol", name="range", metadata=b""),)
    me = (await _join(s, 1, "", protocols)).member_id

    async def commit(generation: int, member: str) -> ErrorCode:
        r = await s.call(8, 3, _commit(3, generation, member, {"orders": [(0, 1)]}))
        return r.topics[0].partitions[0].error_code  # type: ignore[no-any-return]

    assert await commit(1, me) == ErrorCode.rebalance_in_progress  # the leader has not synced
    sync = request(
        "sync_group", 1, "SyncGroupRequest", group_id="g", generation_id=1, member_id=me, assignments=()
    )
    await s.call(14, 1, sync)
    assert await commit(1, "stranger") == ErrorCode.unknown_member_id
    assert await commit(-1, "") == ErrorCode.unknown_member_id
    assert await commit(2, me) == ErrorCode.illegal_generation
    assert await commit(1, me) == ErrorCode.none


async def test_a_broker_that_is_not_the_coordinator_says_so_in_every_version(s: Setup) -> None:
    await s.coordinator.close()  # a closed coordinator coordinates nothing
    r = await s.call(9, 1, _fetch(1, {"orders": [0]}))
    assert _offsets(r) == {("orders", 0): (-1, "", ErrorCode.not_coordinator)}
    r = await s.call(9, 3, _fetch(3, {"orders": [0]}))
    assert r.error_code == ErrorCode.not_coordinator
    r = await s.call(8, 2, _commit(2, -1, "", {"orders": [(0, 1)]}))
    assert r.topics[0].partitions[0].error_code == ErrorCode.not_coordinator


def test_topic_names_map_to_the_listeners_namespace() -> None:
    ns = gh.KafkaNamespace("acme", "prod")
    assert gh.quire_topic(ns, "orders") == "acme/prod/orders"
    assert gh.quire_topic(ns, "a/b") is None and gh.quire_topic(ns, "") is None
    assert gh.quire_topic(ns, "x" * 129) is None
    assert gh.kafka_topic(ns, "acme/prod/orders") == "orders"
    assert gh.kafka_topic(ns, "acme/dev/orders") == "acme/dev/orders"  # another namespace: whole
    assert gh.quire_topic(ns, "acme/dev/orders") == "acme/dev/orders"
    assert gh.quire_topic(ns, "persistent://acme/dev/orders") == "acme/dev/orders"
    assert gh.quire_topic(ns, "acme/dev/") is None
