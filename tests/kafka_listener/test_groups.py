"""The group coordinator's membership: Kafka's classic group protocol on a manual clock.

Each test drives JoinGroup, SyncGroup, Heartbeat and LeaveGroup as a Kafka consumer would and
moves time by hand; every wait on a coordinator answer is bounded by WAIT_S.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable
from typing import TypeVar

import pytest
from kio.schema.errors import ErrorCode

from app.kafka_listener.cluster import SingleNode
from app.kafka_listener.group_offsets import GroupCoordinator
from app.kafka_listener.group_state import GroupState, JoinResult
from app.kafka_listener.groups import GroupConfig
from managed_ledger.metadata.memory import InMemoryMetadataStore
from tests.kafka_listener.group_support import ME, ManualScheduler, join_request, settle
from tests.topics.conftest import Env, make_env

T = TypeVar("T")
WAIT_S = 2.0
DELAY_MS = 100
CONFIG = GroupConfig(initial_rebalance_delay_ms=DELAY_MS, min_session_timeout_ms=10)


async def bounded(aw: Awaitable[T]) -> T:
    return await asyncio.wait_for(aw, WAIT_S)


class Harness:
    def __init__(self, env: Env, config: GroupConfig = CONFIG) -> None:
        self.env = env
        self.sched = ManualScheduler()
        self.coord = GroupCoordinator(env.service, SingleNode(ME), config, scheduler=self.sched)

    async def new_member(self, client_id: str = "c", **kw: object) -> str:
        r = await self.coord.join(join_request(client_id=client_id, **kw))  # type: ignore[arg-type]
        assert r.error == ErrorCode.member_id_required and r.member_id.startswith(f"{client_id}-")
        return r.member_id

    async def form(self, n: int, **kw: object) -> list[JoinResult]:
        """n new members join an empty group together; their JoinGroup answers."""
        ids = [await self.new_member(f"c{i}", **kw) for i in range(n)]
        tasks = [asyncio.create_task(self.coord.join(join_request(m, **kw))) for m in ids]  # type: ignore[arg-type]
        await settle()
        assert not any(t.done() for t in tasks)  # the initial delay holds them
        self.sched.advance(2 * DELAY_MS)
        return [await bounded(t) for t in tasks]

    async def stable(self, n: int) -> tuple[list[str], int]:
        """A Stable group of n members (leader first) and its generation."""
        joined = await self.form(n)
        leader = next(r for r in joined if r.member_id == r.leader)
        others = [r.member_id for r in joined if r is not leader]
        waiting = [
            asyncio.create_task(self.coord.sync("g", r.generation, m, {})) for m in others for r in [leader]
        ]
        await settle()
        assignments = {r.member_id: r.member_id.encode() for r in joined}
        led = await bounded(self.coord.sync("g", leader.generation, leader.member_id, assignments))
        assert led.error == ErrorCode.none
        for task, m in zip(waiting, others, strict=True):
            assert (await bounded(task)).assignment == m.encode()
        return [leader.member_id, *others], leader.generation


@pytest.fixture
async def h() -> AsyncIterator[Harness]:
    env = await make_env(InMemoryMetadataStore())
    harness = Harness(env)
    yield harness
    await harness.coord.close()
    assert harness.sched.live() == 0  # every timer cancelled with its group
    await env.service.close()
    await env.factory.close()


async def test_two_members_join_the_leader_assigns_and_both_heartbeat(h: Harness) -> None:
    a, b = await h.form(2, protocols=(("range", b"A"), ("roundrobin", b"a")))
    assert a.error == b.error == ErrorCode.none
    assert a.generation == b.generation == 1 and a.protocol == b.protocol == "range"
    assert a.leader == b.leader == a.member_id  # the first to join leads
    assert [m[0] for m in a.members] == [a.member_id, b.member_id] and b.members == ()
    assert a.members[0][2] == b"A"
    follower = asyncio.create_task(h.coord.sync("g", 1, b.member_id, {}))
    await settle()
    assert not follower.done()  # waits for the leader's assignments
    assert h.coord.describe("g").state == GroupState.COMPLETING_REBALANCE  # type: ignore[union-attr]
    led = await bounded(h.coord.sync("g", 1, a.member_id, {a.member_id: b"pa", b.member_id: b"pb"}))
    assert (led.error, led.assignment) == (ErrorCode.none, b"pa")
    assert (await bounded(follower)).assignment == b"pb"
    assert h.coord.describe("g").state == GroupState.STABLE  # type: ignore[union-attr]
    for m in (a.member_id, b.member_id):
        assert await h.coord.heartbeat("g", 1, m) == ErrorCode.none
    late = await h.coord.sync("g", 1, b.member_id, {})  # a repeated sync answers at once
    assert (late.error, late.assignment) == (ErrorCode.none, b"pb")


async def test_join_before_v4_gets_its_member_id_at_once(h: Harness) -> None:
    task = asyncio.create_task(h.coord.join(join_request(v4=False, client_id="old")))
    await settle()
    h.sched.advance(DELAY_MS)
    r = await bounded(task)
    assert r.error == ErrorCode.none and r.member_id.startswith("old-") and r.leader == r.member_id


async def test_a_member_that_leaves_triggers_a_rebalance(h: Harness) -> None:
    (a, b), gen = await h.stable(2)
    assert await h.coord.leave("g", b) == ErrorCode.none
    assert await h.coord.heartbeat("g", gen, a) == ErrorCode.rebalance_in_progress
    assert (await h.coord.sync("g", gen, a, {})).error == ErrorCode.rebalance_in_progress
    again = await bounded(h.coord.join(join_request(a)))  # everyone left has rejoined: done
    assert (again.error, again.generation, again.leader) == (ErrorCode.none, gen + 1, a)
    assert [m[0] for m in again.members] == [a]
    assert await h.coord.heartbeat("g", gen + 1, b) == ErrorCode.unknown_member_id
    assert await h.coord.leave("g", b) == ErrorCode.unknown_member_id


async def test_the_last_member_leaving_empties_and_forgets_the_group(h: Harness) -> None:
    (a,), gen = await h.stable(1)
    assert await h.coord.leave("g", a) == ErrorCode.none
    assert h.coord.describe("g") is None and h.coord.group_ids() == []
    assert await h.coord.heartbeat("g", gen, a) == ErrorCode.unknown_member_id


async def test_a_member_that_stops_heartbeating_is_removed_after_its_session(h: Harness) -> None:
    (a, b), gen = await h.stable(2)
    for _ in range(4):  # a keeps heartbeating, b stays silent
        h.sched.advance(400)
        assert await h.coord.heartbeat("g", gen, a) == ErrorCode.none or h.sched.now_ms > 1_000
    assert await h.coord.heartbeat("g", gen, b) == ErrorCode.unknown_member_id
    assert await h.coord.heartbeat("g", gen, a) == ErrorCode.rebalance_in_progress
    again = await bounded(h.coord.join(join_request(a)))
    assert again.generation == gen + 1 and [m[0] for m in again.members] == [a]


async def test_members_that_do_not_rejoin_within_the_rebalance_timeout_are_removed(h: Harness) -> None:
    (a, b), gen = await h.stable(2)
    rejoin = asyncio.create_task(h.coord.join(join_request(a)))  # the leader rejoins: a rebalance
    await settle()
    assert await h.coord.heartbeat("g", gen, b) == ErrorCode.rebalance_in_progress
    for _ in range(9):  # b heartbeats (its session holds) but never rejoins: a stuck poll loop
        h.sched.advance(555)
        assert await h.coord.heartbeat("g", gen, b) == ErrorCode.rebalance_in_progress
    h.sched.advance(4)
    assert not rejoin.done()
    h.sched.advance(1)  # the rebalance timeout (5 s): b never rejoined
    r = await bounded(rejoin)
    assert (r.error, r.generation, [m[0] for m in r.members]) == (ErrorCode.none, gen + 1, [a])
    assert await h.coord.heartbeat("g", gen + 1, b) == ErrorCode.unknown_member_id


async def test_a_leader_that_never_syncs_is_removed_and_the_rest_rebalance(h: Harness) -> None:
    a, b = await h.form(2, session_ms=10_000)
    follower = asyncio.create_task(h.coord.sync("g", 1, b.member_id, {}))
    await settle()
    h.sched.advance(5_000)  # the rebalance timeout passes without the leader's SyncGroup
    assert (await bounded(follower)).error == ErrorCode.rebalance_in_progress
    again = await bounded(h.coord.join(join_request(b.member_id, session_ms=10_000)))
    assert (again.generation, again.leader, len(again.members)) == (2, b.member_id, 1)
    assert await h.coord.heartbeat("g", 2, a.member_id) == ErrorCode.unknown_member_id


async def test_the_initial_delay_waits_while_members_keep_coming(h: Harness) -> None:
    first = asyncio.create_task(h.coord.join(join_request(v4=False, client_id="x")))
    await settle()
    h.sched.advance(DELAY_MS - 1)
    second = asyncio.create_task(h.coord.join(join_request(v4=False, client_id="y")))
    await settle()
    h.sched.advance(DELAY_MS)  # the delay ran out, but someone joined in it: once more
    assert not first.done()
    h.sched.advance(DELAY_MS)
    r1, r2 = await bounded(first), await bounded(second)
    assert r1.generation == r2.generation == 1 and len(r1.members) == 2


async def test_a_member_id_never_used_expires_with_the_session(h: Harness) -> None:
    await h.new_member(session_ms=300)
    assert h.coord.group_ids() == ["g"]
    h.sched.advance(300)
    assert h.coord.group_ids() == []


async def test_inconsistent_protocols_are_refused(h: Harness) -> None:
    await h.stable(1)
    for kw in ({"protocols": (("roundrobin", b""),)}, {"protocol_type": "connect"}, {"protocols": ()}):
        r = await h.coord.join(join_request(**kw))  # type: ignore[arg-type]
        assert r.error == ErrorCode.inconsistent_group_protocol
    r = await h.coord.join(join_request(group="fresh", protocols=()))
    assert r.error == ErrorCode.inconsistent_group_protocol and h.coord.group_ids() == ["g"]


async def test_the_protocol_most_members_prefer_among_the_common_ones_wins(h: Harness) -> None:
    r, st, rr = ("range", b""), ("sticky", b""), ("rr", b"")
    protocols = [(r, st), (st, r, rr), (st, r)]  # common: range and sticky; sticky has 2 votes
    ids = [await h.new_member(f"c{i}", protocols=p) for i, p in enumerate(protocols)]
    tasks = [
        asyncio.create_task(h.coord.join(join_request(m, protocols=p)))
        for m, p in zip(ids, protocols, strict=True)
    ]
    await settle()
    h.sched.advance(2 * DELAY_MS)
    assert {(await bounded(t)).protocol for t in tasks} == {"sticky"}


async def test_requests_with_wrong_members_or_generations(h: Harness) -> None:
    assert (await h.coord.join(join_request("nobody"))).error == ErrorCode.unknown_member_id
    assert (await h.coord.sync("none", 1, "x", {})).error == ErrorCode.unknown_member_id
    assert await h.coord.heartbeat("none", 1, "x") == ErrorCode.unknown_member_id
    assert await h.coord.leave("none", "x") == ErrorCode.unknown_member_id
    (a, b), gen = await h.stable(2)
    assert (await h.coord.sync("g", gen + 1, a, {})).error == ErrorCode.illegal_generation
    assert await h.coord.heartbeat("g", gen - 1, b) == ErrorCode.illegal_generation
    assert await h.coord.heartbeat("g", gen, "x") == ErrorCode.unknown_member_id
    assert (await h.coord.join(join_request("x"))).error == ErrorCode.unknown_member_id


async def test_bad_joins(h: Harness) -> None:
    assert (await h.coord.join(join_request(group=""))).error == ErrorCode.invalid_group_id
    for session_ms in (9, 1_800_001):
        r = await h.coord.join(join_request(session_ms=session_ms))
        assert r.error == ErrorCode.invalid_session_timeout
    assert h.coord.group_ids() == []


async def test_a_full_group_refuses_new_members() -> None:
    env = await make_env(InMemoryMetadataStore())
    h = Harness(env, GroupConfig(initial_rebalance_delay_ms=0, min_session_timeout_ms=10, max_group_size=2))
    try:
        await h.new_member()
        await h.new_member()
        assert (await h.coord.join(join_request())).error == ErrorCode.group_max_size_reached
    finally:
        await h.coord.close()
        await env.service.close()
        await env.factory.close()


async def test_close_answers_waiting_requests_not_coordinator(h: Harness) -> None:
    first = asyncio.create_task(h.coord.join(join_request(v4=False)))
    await settle()
    await h.coord.close()
    assert (await bounded(first)).error == ErrorCode.not_coordinator
    assert h.sched.live() == 0
    assert (await h.coord.join(join_request())).error == ErrorCode.not_coordinator


async def test_a_cancelled_join_does_not_break_the_rebalance(h: Harness) -> None:
    a = await h.new_member("a")
    b = await h.new_member("b")
    ta = asyncio.create_task(h.coord.join(join_request(a)))
    tb = asyncio.create_task(h.coord.join(join_request(b)))
    await settle()
    tb.cancel()  # b's connection closed while it waited
    h.sched.advance(2 * DELAY_MS)
    r = await bounded(ta)
    assert r.error == ErrorCode.none and len(r.members) == 2
    h.sched.advance(500)
    assert await h.coord.heartbeat("g", r.generation, a) == ErrorCode.none
    h.sched.advance(600)  # b never heard its answer: its session lapses, a rebalance follows
    assert await h.coord.heartbeat("g", r.generation, a) == ErrorCode.rebalance_in_progress
    assert await h.coord.heartbeat("g", r.generation, b) == ErrorCode.unknown_member_id
