"""A Kafka consumer group's membership, as the group coordinator (`groups.py`) keeps it in
memory: Kafka's classic group protocol states, the members with their protocols and
assignments, and what a JoinGroup or SyncGroup answers. Plain data; the coordinator moves it.

States (Kafka's GroupMetadata):
- Empty: no members (committed offsets may exist; they are in the metadata store).
- PreparingRebalance: members are (re)joining; JoinGroup answers wait until every member has
  rejoined, the rebalance timeout passes, or, for a group that was empty, the initial delay
  runs out (it is extended while new members keep coming, up to the rebalance timeout).
- CompletingRebalance: the generation is set and the leader has every member's metadata;
  SyncGroup answers wait for the leader's assignments.
- Stable: the assignments are handed out; members heartbeat.
- Dead: the coordinator gave the group up (closed, or no longer its coordinator).
"""

from __future__ import annotations

import asyncio
from collections import Counter
from dataclasses import dataclass, field
from enum import StrEnum

from kio.schema.errors import ErrorCode

from app.kafka_listener.timers import Timer

Protocols = tuple[tuple[str, bytes], ...]  # (name, metadata), the member's preference first


class GroupState(StrEnum):
    EMPTY = "Empty"
    PREPARING_REBALANCE = "PreparingRebalance"
    COMPLETING_REBALANCE = "CompletingRebalance"
    STABLE = "Stable"
    DEAD = "Dead"


@dataclass(frozen=True, slots=True)
class JoinResult:
    """What a JoinGroup answers. `members` (id, group instance id, metadata of the chosen
    protocol) is filled for the leader only."""

    error: ErrorCode
    member_id: str = ""
    generation: int = -1
    protocol: str = ""
    leader: str = ""
    members: tuple[tuple[str, str | None, bytes], ...] = ()


@dataclass(frozen=True, slots=True)
class SyncResult:
    error: ErrorCode
    assignment: bytes = b""


@dataclass(eq=False, slots=True)
class Member:
    member_id: str
    client_id: str
    group_instance_id: str | None
    session_timeout_ms: int
    rebalance_timeout_ms: int
    protocol_type: str
    protocols: Protocols
    assignment: bytes = b""
    # Set while a JoinGroup (SyncGroup) of the member waits for the rebalance (the leader).
    join_waiter: asyncio.Future[JoinResult] | None = None
    sync_waiter: asyncio.Future[SyncResult] | None = None
    session_timer: Timer | None = None

    def metadata(self, protocol: str) -> bytes:
        for name, metadata in self.protocols:
            if name == protocol:
                return metadata
        raise KeyError(protocol)  # the chosen protocol is one every member supports

    def vote(self, candidates: set[str]) -> str:
        """The member's most preferred protocol among the candidates."""
        return next(name for name, _ in self.protocols if name in candidates)

    def names(self) -> set[str]:
        return {name for name, _ in self.protocols}


@dataclass(eq=False, slots=True)
class Group:
    group_id: str
    state: GroupState = GroupState.EMPTY
    generation: int = 0
    protocol_type: str = ""
    protocol: str = ""
    leader: str = ""
    members: dict[str, Member] = field(default_factory=dict)  # in joining order
    # Member ids handed out with MEMBER_ID_REQUIRED whose JoinGroup has not come back yet.
    pending: dict[str, Timer] = field(default_factory=dict)
    join_timer: Timer | None = None  # the rebalance (or initial delay) of PreparingRebalance
    sync_timer: Timer | None = None  # the leader's SyncGroup of CompletingRebalance
    initial_delay: bool = False  # PreparingRebalance of a group that was empty: wait the delay
    new_member_added: bool = False  # someone joined during the current initial delay

    def supported(self) -> set[str]:
        """The protocols every member supports."""
        if not self.members:
            return set()
        counts = Counter(name for m in self.members.values() for name in m.names())
        return {name for name, n in counts.items() if n == len(self.members)}

    def accepts(self, protocol_type: str, protocols: Protocols) -> bool:
        """Whether a member with these protocols may join (Kafka's INCONSISTENT_GROUP_PROTOCOL)."""
        if not protocol_type or not protocols:
            return False
        if not self.members:
            return True
        return protocol_type == self.protocol_type and bool({n for n, _ in protocols} & self.supported())

    def select_protocol(self) -> str:
        """Kafka's choice: among the protocols all members support, the one most members
        prefer (each votes for its first candidate); ties go to the first name in order."""
        candidates = self.supported()
        votes = Counter(m.vote(candidates) for m in self.members.values())
        return max(sorted(votes), key=lambda name: votes[name])

    def rebalance_timeout_ms(self) -> int:
        return max((m.rebalance_timeout_ms for m in self.members.values()), default=0)

    def all_joined(self) -> bool:
        return not self.pending and all(m.join_waiter is not None for m in self.members.values())

    def join_result(self, member: Member) -> JoinResult:
        """The current generation's answer to `member` (the leader gets every member's metadata)."""
        members: tuple[tuple[str, str | None, bytes], ...] = ()
        if member.member_id == self.leader:
            members = tuple(
                (m.member_id, m.group_instance_id, m.metadata(self.protocol)) for m in self.members.values()
            )
        return JoinResult(
            ErrorCode.none, member.member_id, self.generation, self.protocol, self.leader, members
        )
