"""The Kafka group coordinator: Kafka's classic consumer group protocol, in memory, on asyncio.

JoinGroup, SyncGroup, Heartbeat and LeaveGroup move a group through the states of
`group_state` as Kafka's GroupCoordinator does; OffsetCommit and OffsetFetch are in
`group_offsets.py`. Membership lives only here (a coordinator that restarts or moves loses it;
clients rejoin); committed offsets are durable in the metadata store.

- Member ids: a JoinGroup without one gets `{client_id}-{uuid}`. From JoinGroup v4 (KIP-394)
  it is answered MEMBER_ID_REQUIRED with the id first, and the member joins with it (the id
  is kept `session timeout` long); before v4 it joins at once.
- A rebalance: a join of a new member, a member's changed protocols, the leader's rejoin, a
  LeaveGroup or an expired session moves the group to PreparingRebalance. It completes when
  every member has rejoined, or after the longest rebalance timeout of its members (members
  that did not rejoin are removed); a group that was empty waits `initial_rebalance_delay_ms`
  first (Kafka's group.initial.rebalance.delay.ms), again while members keep coming, up to
  the rebalance timeout. Then a new generation: the first member (or the old leader) leads,
  and gets every member's metadata for the protocol chosen among the members' common ones.
- SyncGroup: the leader's assignments are handed to every member; members that have not sent
  a SyncGroup within the rebalance timeout are removed (Kafka 2.8's pending-sync rule).
- Sessions: a member that does not heartbeat (or sync, or commit) for its session timeout is
  removed, unless it is waiting in a JoinGroup or SyncGroup.

Every timer is bounded (session timeouts within the configured range, rebalance timeouts at
most `max_rebalance_timeout_ms`) and cancelled with its group; `close()` answers every waiting
request NOT_COORDINATOR and cancels all timers. A broker that finds it is no longer a group's
coordinator (cluster.py) gives the group up the same way.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from dataclasses import dataclass, field
from typing import TypeVar

from kio.schema.errors import ErrorCode

from app.kafka_listener.cluster import ClusterView, KafkaNode, choose_coordinator
from app.kafka_listener.group_state import (
    Group,
    GroupState,
    JoinResult,
    Member,
    Protocols,
    SyncResult,
)
from app.kafka_listener.timers import LoopScheduler, Scheduler, Timer

log = logging.getLogger("quire.kafka.groups")
R = TypeVar("R")


@dataclass(frozen=True, slots=True)
class GroupConfig:
    """Kafka's group coordinator settings (same names, same defaults, except the group size)."""

    initial_rebalance_delay_ms: int = 3_000  # group.initial.rebalance.delay.ms
    min_session_timeout_ms: int = 6_000  # group.min.session.timeout.ms
    max_session_timeout_ms: int = 1_800_000  # group.max.session.timeout.ms
    max_rebalance_timeout_ms: int = 1_800_000  # a client's longer rebalance timeout is cut to it
    max_group_size: int = 1_000  # group.max.size (Kafka: unbounded)
    max_metadata_bytes: int = 4_096  # offset.metadata.max.bytes

    def __post_init__(self) -> None:
        assert self.initial_rebalance_delay_ms >= 0 and self.max_rebalance_timeout_ms > 0
        assert 0 < self.min_session_timeout_ms <= self.max_session_timeout_ms
        assert self.max_group_size > 0 and self.max_metadata_bytes >= 0


@dataclass(frozen=True, slots=True)
class JoinRequest:
    group_id: str
    member_id: str
    session_timeout_ms: int
    rebalance_timeout_ms: int  # JoinGroup v0 has none: pass the session timeout
    protocol_type: str
    protocols: Protocols
    client_id: str = ""
    group_instance_id: str | None = None  # echoed; static membership (KIP-345) is not kept
    require_known_member_id: bool = True  # JoinGroup v4 and later


@dataclass(frozen=True, slots=True)
class MemberSummary:
    member_id: str
    client_id: str
    group_instance_id: str | None
    assignment_bytes: int


@dataclass(frozen=True, slots=True)
class GroupSummary:
    """What this coordinator knows of a group, for the admin API."""

    group_id: str
    state: GroupState
    generation: int
    protocol_type: str
    protocol: str
    leader: str
    members: tuple[MemberSummary, ...] = field(default=())


class GroupMembership:
    """JoinGroup, SyncGroup, Heartbeat and LeaveGroup of the groups this broker coordinates."""

    def __init__(
        self, cluster: ClusterView, config: GroupConfig | None = None, scheduler: Scheduler | None = None
    ) -> None:
        self.cluster = cluster
        self.config = config or GroupConfig()
        self._scheduler: Scheduler = scheduler or LoopScheduler()
        self._groups: dict[str, Group] = {}
        self._closed = False

    # --- which broker coordinates -----------------------------------------------------------
    async def coordinator_for(self, group_id: str) -> KafkaNode | None:
        """The group's coordinator among the live brokers; None when none is known now."""
        return choose_coordinator(group_id, await self.cluster.nodes())

    async def _refusal(self, group_id: str) -> ErrorCode | None:
        """None when this broker coordinates the group now; else the error to answer (and a
        group it held is given up: its members will find the new coordinator)."""
        if self._closed:
            return ErrorCode.not_coordinator
        node = await self.coordinator_for(group_id)
        if node is None:
            return ErrorCode.coordinator_not_available
        if node.node_id != self.cluster.me.node_id:
            group = self._groups.get(group_id)
            if group is not None:
                log.info("group %s moved to node %d; giving it up here", group_id, node.node_id)
                self._unload(group, ErrorCode.not_coordinator)
            return ErrorCode.not_coordinator
        return None

    # --- JoinGroup ---------------------------------------------------------------------------
    async def join(self, req: JoinRequest) -> JoinResult:
        refused = await self._refusal(req.group_id)
        if refused is not None:
            return JoinResult(refused, req.member_id)
        error = self._check_join(req)
        if error is not None:
            return JoinResult(error, req.member_id)
        group = self._groups.get(req.group_id)
        if group is None:
            if req.member_id:
                return JoinResult(ErrorCode.unknown_member_id, req.member_id)
            group = self._groups[req.group_id] = Group(req.group_id)
        if not group.accepts(req.protocol_type, req.protocols):
            self._forget_if_unused(group)
            return JoinResult(ErrorCode.inconsistent_group_protocol, req.member_id)
        if not req.member_id:
            return await self._join_new(group, req)
        return await self._join_known(group, req)

    def _check_join(self, req: JoinRequest) -> ErrorCode | None:
        cfg = self.config
        if not req.group_id:
            return ErrorCode.invalid_group_id
        if not cfg.min_session_timeout_ms <= req.session_timeout_ms <= cfg.max_session_timeout_ms:
            return ErrorCode.invalid_session_timeout
        if not req.protocol_type or not req.protocols:
            return ErrorCode.inconsistent_group_protocol
        return None

    def _rebalance_timeout_ms(self, req: JoinRequest) -> int:
        """The member's rebalance timeout (its session timeout if it sent none), bounded."""
        wanted = req.rebalance_timeout_ms if req.rebalance_timeout_ms > 0 else req.session_timeout_ms
        return min(wanted, self.config.max_rebalance_timeout_ms)

    async def _join_new(self, group: Group, req: JoinRequest) -> JoinResult:
        if len(group.members) + len(group.pending) >= self.config.max_group_size:
            self._forget_if_unused(group)
            return JoinResult(ErrorCode.group_max_size_reached)
        member_id = f"{req.client_id or 'member'}-{uuid.uuid4()}"
        if req.require_known_member_id:
            group.pending[member_id] = self._scheduler.call_later(
                req.session_timeout_ms, lambda: self._expire_pending(group, member_id)
            )
            return JoinResult(ErrorCode.member_id_required, member_id)
        return await self._add_member(group, member_id, req)

    async def _join_known(self, group: Group, req: JoinRequest) -> JoinResult:
        timer = group.pending.pop(req.member_id, None)
        if timer is not None:
            timer.cancel()
            return await self._add_member(group, req.member_id, req)
        member = group.members.get(req.member_id)
        if member is None or group.state in (GroupState.EMPTY, GroupState.DEAD):
            return JoinResult(ErrorCode.unknown_member_id, req.member_id)
        unchanged = member.protocols == req.protocols
        if group.state == GroupState.COMPLETING_REBALANCE and unchanged:
            return group.join_result(member)  # the answer it missed, once more
        if group.state == GroupState.STABLE and unchanged and member.member_id != group.leader:
            return group.join_result(member)
        return await self._rejoin(group, member, req)

    async def _add_member(self, group: Group, member_id: str, req: JoinRequest) -> JoinResult:
        member = Member(
            member_id,
            req.client_id,
            req.group_instance_id,
            req.session_timeout_ms,
            self._rebalance_timeout_ms(req),
            req.protocol_type,
            req.protocols,
        )
        if not group.members:
            group.protocol_type = req.protocol_type
        group.members[member_id] = member
        group.leader = group.leader or member_id
        waiter: asyncio.Future[JoinResult] = asyncio.get_running_loop().create_future()
        member.join_waiter = waiter
        if group.state == GroupState.PREPARING_REBALANCE:
            group.new_member_added = True
            self._try_complete_join(group)
        else:
            self._prepare_rebalance(group, f"member {member_id} joined")
        return await waiter

    async def _rejoin(self, group: Group, member: Member, req: JoinRequest) -> JoinResult:
        """A known member joins again (the rebalance's rejoin, or with changed protocols)."""
        member.protocols = req.protocols
        member.session_timeout_ms = req.session_timeout_ms
        member.rebalance_timeout_ms = self._rebalance_timeout_ms(req)
        _answer(member.join_waiter, JoinResult(ErrorCode.rebalance_in_progress, member.member_id))
        _cancel(member.session_timer)  # a member waiting in a JoinGroup does not expire
        member.session_timer = None
        waiter: asyncio.Future[JoinResult] = asyncio.get_running_loop().create_future()
        member.join_waiter = waiter
        if group.state == GroupState.PREPARING_REBALANCE:
            self._try_complete_join(group)
        else:
            self._prepare_rebalance(group, f"member {member.member_id} rejoined")
        return await waiter

    # --- the rebalance -----------------------------------------------------------------------
    def _prepare_rebalance(self, group: Group, reason: str) -> None:
        if group.state == GroupState.COMPLETING_REBALANCE:
            for m in group.members.values():
                if m.sync_waiter is not None:  # answered now: its session runs from here
                    _answer(m.sync_waiter, SyncResult(ErrorCode.rebalance_in_progress))
                    m.sync_waiter = None
                    self._schedule_session(group, m)
        _cancel(group.sync_timer)
        _cancel(group.join_timer)
        group.sync_timer = None
        log.info("group %s rebalancing (generation %d): %s", group.group_id, group.generation, reason)
        group.initial_delay = group.state == GroupState.EMPTY
        group.state = GroupState.PREPARING_REBALANCE
        if group.initial_delay:
            delay = self.config.initial_rebalance_delay_ms
            remaining = max(group.rebalance_timeout_ms() - delay, 0)
            group.new_member_added = False
            group.join_timer = self._scheduler.call_later(
                delay, lambda: self._initial_delay_over(group, delay, remaining)
            )
            return
        group.join_timer = self._scheduler.call_later(
            group.rebalance_timeout_ms(), lambda: self._complete_join(group)
        )
        self._try_complete_join(group)

    def _initial_delay_over(self, group: Group, delay: int, remaining: int) -> None:
        """Kafka's InitialDelayedJoin: wait once more while new members keep coming."""
        if group.new_member_added and remaining > 0:
            group.new_member_added = False
            step = min(delay, remaining)
            group.join_timer = self._scheduler.call_later(
                step, lambda: self._initial_delay_over(group, delay, remaining - step)
            )
            return
        group.initial_delay = False
        self._complete_join(group)

    def _try_complete_join(self, group: Group) -> None:
        if group.state == GroupState.PREPARING_REBALANCE and not group.initial_delay and group.all_joined():
            self._complete_join(group)

    def _complete_join(self, group: Group) -> None:
        """The rebalance ends: members that did not rejoin leave, a new generation begins."""
        if group.state != GroupState.PREPARING_REBALANCE or self._groups.get(group.group_id) is not group:
            return  # a timer of a rebalance that is over, or of a group given up
        _cancel(group.join_timer)
        group.join_timer = None
        group.initial_delay = False
        for m in [m for m in group.members.values() if m.join_waiter is None]:
            self._remove(group, m, ErrorCode.unknown_member_id)
        group.generation += 1
        if not group.members:
            group.state, group.protocol, group.leader = GroupState.EMPTY, "", ""
            self._forget_if_unused(group)
            return
        group.protocol = group.select_protocol()
        if group.leader not in group.members:
            group.leader = next(iter(group.members))
        group.state = GroupState.COMPLETING_REBALANCE
        log.info(
            "group %s generation %d: %d members, protocol %s, leader %s",
            group.group_id,
            group.generation,
            len(group.members),
            group.protocol,
            group.leader,
        )
        for m in group.members.values():
            waiter, m.join_waiter = m.join_waiter, None
            _answer(waiter, group.join_result(m))
            self._schedule_session(group, m)
        generation = group.generation
        group.sync_timer = self._scheduler.call_later(
            group.rebalance_timeout_ms(), lambda: self._sync_expired(group, generation)
        )

    def _sync_expired(self, group: Group, generation: int) -> None:
        """The leader (or some member) never sent SyncGroup: drop those that did not, rebalance."""
        if group.state != GroupState.COMPLETING_REBALANCE or group.generation != generation:
            return
        group.sync_timer = None
        for m in [m for m in group.members.values() if m.sync_waiter is None]:
            self._remove(group, m, ErrorCode.unknown_member_id)
        self._prepare_rebalance(group, "members did not sync within the rebalance timeout")

    # --- SyncGroup ---------------------------------------------------------------------------
    async def sync(
        self, group_id: str, generation: int, member_id: str, assignments: dict[str, bytes]
    ) -> SyncResult:
        refused = await self._refusal(group_id)
        if refused is not None:
            return SyncResult(refused)
        group = self._groups.get(group_id)
        member = group.members.get(member_id) if group is not None else None
        if group is None or member is None:
            return SyncResult(ErrorCode.unknown_member_id)
        if generation != group.generation:
            return SyncResult(ErrorCode.illegal_generation)
        if group.state == GroupState.PREPARING_REBALANCE:
            return SyncResult(ErrorCode.rebalance_in_progress)
        if group.state == GroupState.STABLE:
            self._schedule_session(group, member)
            return SyncResult(ErrorCode.none, member.assignment)
        _answer(member.sync_waiter, SyncResult(ErrorCode.rebalance_in_progress))
        waiter: asyncio.Future[SyncResult] = asyncio.get_running_loop().create_future()
        member.sync_waiter = waiter
        if member_id == group.leader:
            self._stabilize(group, assignments)
        return await waiter

    def _stabilize(self, group: Group, assignments: dict[str, bytes]) -> None:
        _cancel(group.sync_timer)
        group.sync_timer = None
        group.state = GroupState.STABLE
        for m in group.members.values():
            m.assignment = assignments.get(m.member_id, b"")
            waiter, m.sync_waiter = m.sync_waiter, None
            _answer(waiter, SyncResult(ErrorCode.none, m.assignment))
            self._schedule_session(group, m)

    # --- Heartbeat and LeaveGroup ------------------------------------------------------------
    async def heartbeat(self, group_id: str, generation: int, member_id: str) -> ErrorCode:
        refused = await self._refusal(group_id)
        if refused is not None:
            return refused
        group = self._groups.get(group_id)
        member = group.members.get(member_id) if group is not None else None
        if group is None or member is None:
            return ErrorCode.unknown_member_id
        if generation != group.generation:
            return ErrorCode.illegal_generation
        self._schedule_session(group, member)
        if group.state == GroupState.PREPARING_REBALANCE:
            return ErrorCode.rebalance_in_progress
        return ErrorCode.none

    async def leave(self, group_id: str, member_id: str) -> ErrorCode:
        refused = await self._refusal(group_id)
        if refused is not None:
            return refused
        group = self._groups.get(group_id)
        if group is None:
            return ErrorCode.unknown_member_id
        timer = group.pending.pop(member_id, None)
        if timer is not None:
            timer.cancel()
            self._after_removal(group, f"pending member {member_id} left")
            return ErrorCode.none
        member = group.members.get(member_id)
        if member is None:
            return ErrorCode.unknown_member_id
        self._remove(group, member, ErrorCode.unknown_member_id)
        self._after_removal(group, f"member {member_id} left")
        return ErrorCode.none

    # --- sessions ----------------------------------------------------------------------------
    def touch(self, group: Group, member: Member) -> None:
        """A request of the member shows it is alive (an OffsetCommit does too)."""
        self._schedule_session(group, member)

    def _schedule_session(self, group: Group, member: Member) -> None:
        _cancel(member.session_timer)
        member.session_timer = None
        if member.join_waiter is None:  # a member waiting in a JoinGroup does not expire
            member.session_timer = self._scheduler.call_later(
                member.session_timeout_ms, lambda: self._expire(group, member)
            )

    def _expire(self, group: Group, member: Member) -> None:
        if group.members.get(member.member_id) is not member or self._groups.get(group.group_id) is not group:
            return
        if member.sync_waiter is not None:  # waiting for the leader: still alive
            self._schedule_session(group, member)
            return
        log.info("group %s: member %s missed its session timeout", group.group_id, member.member_id)
        self._remove(group, member, ErrorCode.unknown_member_id)
        self._after_removal(group, f"member {member.member_id} expired")

    def _expire_pending(self, group: Group, member_id: str) -> None:
        if group.pending.pop(member_id, None) is not None:
            self._after_removal(group, f"pending member {member_id} never joined")

    def _remove(self, group: Group, member: Member, error: ErrorCode) -> None:
        _cancel(member.session_timer)
        member.session_timer = None
        _answer(member.join_waiter, JoinResult(error, member.member_id))
        _answer(member.sync_waiter, SyncResult(error))
        member.join_waiter = member.sync_waiter = None
        del group.members[member.member_id]
        if group.leader == member.member_id:
            group.leader = next(iter(group.members), "")

    def _after_removal(self, group: Group, reason: str) -> None:
        if group.state in (GroupState.STABLE, GroupState.COMPLETING_REBALANCE):
            self._prepare_rebalance(group, reason)
        elif group.state == GroupState.PREPARING_REBALANCE:
            self._try_complete_join(group)
        else:
            self._forget_if_unused(group)

    # --- groups ------------------------------------------------------------------------------
    def group(self, group_id: str) -> Group | None:
        return self._groups.get(group_id)

    def describe(self, group_id: str) -> GroupSummary | None:
        """The group as this coordinator holds it; None when it holds no such group."""
        group = self._groups.get(group_id)
        if group is None:
            return None
        members = tuple(
            MemberSummary(m.member_id, m.client_id, m.group_instance_id, len(m.assignment))
            for m in group.members.values()
        )
        return GroupSummary(
            group.group_id,
            group.state,
            group.generation,
            group.protocol_type,
            group.protocol,
            group.leader,
            members,
        )

    def group_ids(self) -> list[str]:
        return sorted(self._groups)

    def _forget_if_unused(self, group: Group) -> None:
        """An empty group needs no memory: its offsets are in the store. Drop it."""
        unused = group.state == GroupState.EMPTY and not group.members and not group.pending
        if unused and self._groups.get(group.group_id) is group:
            del self._groups[group.group_id]

    def _unload(self, group: Group, error: ErrorCode) -> None:
        """Give the group up: answer its waiting requests `error`, cancel its timers."""
        for m in list(group.members.values()):
            self._remove(group, m, error)
        for timer in group.pending.values():
            timer.cancel()
        group.pending.clear()
        _cancel(group.join_timer)
        _cancel(group.sync_timer)
        group.join_timer = group.sync_timer = None
        group.state = GroupState.DEAD
        if self._groups.get(group.group_id) is group:
            del self._groups[group.group_id]

    async def close(self) -> None:
        """Stop coordinating: every waiting request is answered NOT_COORDINATOR (its client
        looks for the coordinator again), every timer cancelled."""
        self._closed = True
        for group in list(self._groups.values()):
            self._unload(group, ErrorCode.not_coordinator)


def _answer(waiter: asyncio.Future[R] | None, result: R) -> None:
    """Complete a waiting request (unless its client went away and it was cancelled)."""
    if waiter is not None and not waiter.done():
        waiter.set_result(result)


def _cancel(timer: Timer | None) -> None:
    if timer is not None:
        timer.cancel()
