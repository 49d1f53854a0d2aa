"""The group coordinator's committed offsets: who may commit (generation checks), per-partition
errors, OffsetFetch, and offsets that outlive the coordinator (memory, SQLite, PostgreSQL)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest
from kio.schema.errors import ErrorCode

from app.kafka_listener.cluster import SingleNode
from app.kafka_listener.group_offsets import GroupCoordinator, OffsetCommit
from app.kafka_listener.groups import GroupConfig
from managed_ledger.metadata.api import GroupOffset, MetadataUnavailableError
from managed_ledger.metadata.memory import InMemoryMetadataStore
from tests.kafka_listener.group_support import ME, ManualScheduler, join_request, settle
from tests.kafka_listener.test_groups import CONFIG, DELAY_MS, Harness, bounded
from tests.topics.conftest import Env, make_env
from topics.errors import GroupNotEmptyError, GroupNotFoundError

T = "public/default/orders"  # 2 partitions
U = "public/default/single"  # not partitioned: Kafka partition 0


@pytest.fixture
async def h() -> AsyncIterator[Harness]:
    env = await make_env(InMemoryMetadataStore())
    await env.service.create_topic(T, partitions=2)
    await env.service.create_topic(U)
    harness = Harness(env)
    yield harness
    await harness.coord.close()
    await env.service.close()
    await env.factory.close()


def commits(*offsets: tuple[str, int, int]) -> list[OffsetCommit]:
    return [OffsetCommit(t, p, o, f"m{o}") for t, p, o in offsets]


async def test_a_simple_commit_is_allowed_while_the_group_has_no_members(h: Harness) -> None:
    errors = await h.coord.commit("g", -1, "", commits((T, 0, 5), (T, 1, 7), (U, 0, 3)))
    assert errors == [ErrorCode.none] * 3
    error, got = await h.coord.fetch("g", [(T, 0), (T, 1), (U, 0), (T, 5), ("public/default/x", 0)])
    assert error == ErrorCode.none
    assert [(o.offset, o.metadata) for o in got] == [(5, "m5"), (7, "m7"), (3, "m3"), (-1, ""), (-1, "")]
    error, every = await h.coord.fetch("g", None)
    assert [(o.topic, o.partition, o.offset) for o in every] == [(T, 0, 5), (T, 1, 7), (U, 0, 3)]
    assert await h.coord.fetch("other", None) == (ErrorCode.none, [])
    # a member id or a generation on a group without members: not a simple commit
    assert await h.coord.commit("g", 3, "m", commits((T, 0, 1))) == [ErrorCode.unknown_member_id]
    assert await h.coord.commit("g", -1, "m", commits((T, 0, 1))) == [ErrorCode.unknown_member_id]


async def test_commits_need_the_current_member_and_generation(h: Harness) -> None:
    (a, b), gen = await h.stable(2)
    assert await h.coord.commit("g", gen, a, commits((T, 0, 10))) == [ErrorCode.none]
    assert await h.coord.commit("g", -1, "", commits((T, 0, 1))) == [ErrorCode.unknown_member_id]
    assert await h.coord.commit("g", gen, "x", commits((T, 0, 1))) == [ErrorCode.unknown_member_id]
    assert await h.coord.commit("g", gen - 1, b, commits((T, 0, 1))) == [ErrorCode.illegal_generation]
    assert (await h.coord.fetch("g", [(T, 0)]))[1][0].offset == 10
    # PreparingRebalance: a member commits what it consumed before it rejoins
    assert await h.coord.leave("g", b) == ErrorCode.none
    assert await h.coord.commit("g", gen, a, commits((T, 0, 11))) == [ErrorCode.none]
    rejoined = await bounded(h.coord.join(join_request(a)))
    # CompletingRebalance: no commit until the leader's assignments are out
    assert await h.coord.commit("g", rejoined.generation, a, commits((T, 0, 12))) == [
        ErrorCode.rebalance_in_progress
    ]
    assert (await h.coord.sync("g", rejoined.generation, a, {a: b""})).error == ErrorCode.none
    assert await h.coord.commit("g", rejoined.generation, a, commits((T, 0, 13))) == [ErrorCode.none]
    assert (await h.coord.fetch("g", [(T, 0)]))[1][0].offset == 13


async def test_a_commit_counts_as_a_heartbeat(h: Harness) -> None:
    (a,), gen = await h.stable(1)
    for _ in range(5):
        h.sched.advance(600)  # past the 1 s session in all, but a commits every 600 ms
        assert await h.coord.commit("g", gen, a, commits((T, 0, 1))) == [ErrorCode.none]
    assert await h.coord.heartbeat("g", gen, a) == ErrorCode.none


async def test_each_partition_gets_its_own_error(h: Harness) -> None:
    errors = await h.coord.commit(
        "g",
        -1,
        "",
        [
            OffsetCommit(T, 1, 4, None),
            OffsetCommit(T, 2, 4),  # partition out of range
            OffsetCommit("public/default/none", 0, 4),
            OffsetCommit(U, 1, 4),
            OffsetCommit(U, 0, 4, "x" * 4097),
            OffsetCommit("bad name", 0, 4),
        ],
    )
    assert errors == [
        ErrorCode.none,
        ErrorCode.unknown_topic_or_partition,
        ErrorCode.unknown_topic_or_partition,
        ErrorCode.unknown_topic_or_partition,
        ErrorCode.offset_metadata_too_large,
        ErrorCode.unknown_topic_or_partition,
    ]
    assert [(o.topic, o.partition, o.metadata) for o in (await h.coord.fetch("g", None))[1]] == [(T, 1, "")]
    assert await h.coord.commit("", -1, "", commits((T, 0, 1))) == [ErrorCode.invalid_group_id]


async def test_a_store_that_is_down_answers_a_retriable_error(h: Harness) -> None:
    async def down(*_: object) -> None:
        raise MetadataUnavailableError("down")

    h.coord.offsets.commit_group_offsets = down  # type: ignore[method-assign]
    h.coord.offsets.group_offsets = down  # type: ignore[method-assign]
    assert await h.coord.commit("g", -1, "", commits((T, 0, 1), (T, 9, 1))) == [
        ErrorCode.coordinator_not_available,
        ErrorCode.unknown_topic_or_partition,
    ]
    assert await h.coord.fetch("g", [(T, 0)]) == (ErrorCode.coordinator_not_available, [])


async def test_groups_are_listed_and_deleted(h: Harness) -> None:
    await h.coord.commit("stored", -1, "", commits((T, 0, 1)))
    (a,), _ = await h.stable(1)
    assert await h.coord.list_groups() == ["g", "stored"]
    with pytest.raises(GroupNotEmptyError):
        await h.coord.delete_group("g")
    assert await h.coord.delete_group("stored") == 1
    with pytest.raises(GroupNotFoundError):
        await h.coord.delete_group("stored")
    await h.coord.leave("g", a)
    assert await h.coord.list_groups() == []


async def _consume_and_commit(env: Env) -> None:
    sched = ManualScheduler()
    coord = GroupCoordinator(env.service, SingleNode(ME), CONFIG, scheduler=sched)
    ask = await coord.join(join_request())
    task = asyncio.create_task(coord.join(join_request(ask.member_id)))
    await settle()
    sched.advance(DELAY_MS)
    joined = await bounded(task)
    await coord.sync("g", joined.generation, joined.member_id, {joined.member_id: b"all"})
    assert await coord.commit("g", joined.generation, joined.member_id, commits((T, 1, 99))) == [
        ErrorCode.none
    ]
    await coord.close()  # the broker stops: membership is gone, the offsets stay


async def test_offsets_outlive_the_coordinator_on_the_same_store(metadata_url: str) -> None:
    from managed_ledger.metadata.sql import SqlMetadataStore

    for _ in range(2):  # the second pass: a restarted broker over the same database
        store = SqlMetadataStore(metadata_url)
        env = await make_env(store)
        try:
            if await env.service.list_groups():
                coord = GroupCoordinator(env.service, SingleNode(ME), CONFIG, scheduler=ManualScheduler())
                assert (await coord.join(join_request("old-member"))).error == ErrorCode.unknown_member_id
                error, got = await coord.fetch("g", [(T, 0), (T, 1)])
                assert (error, [o.offset for o in got]) == (ErrorCode.none, [-1, 99])
                assert [o.group for o in got] == ["g", "g"] and isinstance(got[1], GroupOffset)
                await coord.close()
            else:
                await env.service.create_topic(T, partitions=2)
                await _consume_and_commit(env)
        finally:
            await env.service.close()
            await env.factory.close()
            store.close()


async def test_a_config_without_initial_delay_forms_at_once() -> None:
    env = await make_env(InMemoryMetadataStore())
    h = Harness(env, GroupConfig(initial_rebalance_delay_ms=0, min_session_timeout_ms=10))
    try:
        ask = await h.coord.join(join_request())
        task = asyncio.create_task(h.coord.join(join_request(ask.member_id)))
        await settle()
        h.sched.advance(0)
        assert (await bounded(task)).generation == 1
    finally:
        await h.coord.close()
        await env.service.close()
        await env.factory.close()
