"""The group coordinator's committed offsets: OffsetCommit and OffsetFetch over the metadata
store (through the topics layer), with Kafka's rules on who may commit.

A commit with generation -1 and no member id is a "simple" commit (a consumer that assigns
itself partitions, or a tool): allowed while the group has no members. Any other commit must
come from a member of the group's current generation (UNKNOWN_MEMBER_ID, ILLEGAL_GENERATION),
and not while the group waits for its leader's assignments (REBALANCE_IN_PROGRESS); during
PreparingRebalance a member may still commit what it consumed before it rejoins. Each
partition must exist (UNKNOWN_TOPIC_OR_PARTITION) and its metadata fit `max_metadata_bytes`
(OFFSET_METADATA_TOO_LARGE). The offsets of one request are stored in one transaction. The
client's retention time is not used: offsets stay until the group or the topic is deleted.

OffsetFetch needs no membership: a partition without a commit answers offset -1.
"""

from __future__ import annotations

import logging
from collections.abc import Collection, Sequence
from dataclasses import dataclass
from typing import Protocol

from kio.schema.errors import ErrorCode

from app.kafka_listener.cluster import ClusterView
from app.kafka_listener.group_state import GroupState
from app.kafka_listener.groups import GroupConfig, GroupMembership
from app.kafka_listener.timers import Scheduler
from common.errors import ErrorKind, QuireError
from managed_ledger.clock import Clock, SystemClock
from managed_ledger.metadata.api import GroupOffset
from topics.errors import GroupNotEmptyError, GroupNotFoundError, InvalidArgumentError, TopicNotFoundError

log = logging.getLogger("quire.kafka.groups")


class OffsetBackend(Protocol):
    """What the coordinator needs of the topics layer (`topics.api.TopicsApi` has all of it)."""

    async def commit_group_offsets(self, offsets: Sequence[GroupOffset]) -> None: ...

    async def group_offsets(self, group: str, topics: Collection[str] | None = None) -> list[GroupOffset]: ...

    async def list_groups(self) -> list[str]: ...

    async def delete_group_offsets(self, group: str) -> int: ...

    async def get_partitions(self, topic: str) -> int: ...


@dataclass(frozen=True, slots=True)
class OffsetCommit:
    """One partition of an OffsetCommit: `topic` is the Quire topic `tenant/ns/topic`."""

    topic: str
    partition: int
    offset: int
    metadata: str | None = None


def store_error(exc: Exception) -> ErrorCode:
    """The Kafka error for a failed read or write of offsets: retriable when the store is down."""
    if isinstance(exc, QuireError) and exc.kind in (ErrorKind.unavailable, ErrorKind.fenced):
        return ErrorCode.coordinator_not_available
    log.error("committed offsets: unexpected error", exc_info=exc)
    return ErrorCode.unknown_server_error


class GroupCoordinator(GroupMembership):
    """The groups this broker coordinates (membership: `GroupMembership`) and their offsets."""

    def __init__(
        self,
        offsets: OffsetBackend,
        cluster: ClusterView,
        config: GroupConfig | None = None,
        *,
        scheduler: Scheduler | None = None,
        clock: Clock | None = None,
    ) -> None:
        super().__init__(cluster, config, scheduler)
        self.offsets = offsets
        self._clock: Clock = clock or SystemClock()

    # --- OffsetCommit ------------------------------------------------------------------------
    async def commit(
        self, group_id: str, generation: int, member_id: str, commits: Sequence[OffsetCommit]
    ) -> list[ErrorCode]:
        """One error per commit (NONE: stored), in order."""
        refused = await self._refusal(group_id)
        if refused is None and not group_id:
            refused = ErrorCode.invalid_group_id
        if refused is None:
            refused = self._commit_refusal(group_id, generation, member_id)
        if refused is not None:
            return [refused] * len(commits)
        errors = await self._check_partitions(commits)
        now = self._clock.now_ms()
        keep = [
            GroupOffset(group_id, c.topic, c.partition, c.offset, c.metadata or "", now)
            for c, e in zip(commits, errors, strict=True)
            if e == ErrorCode.none
        ]
        try:
            await self.offsets.commit_group_offsets(keep)
        except Exception as exc:
            failed = store_error(exc)
            return [failed if e == ErrorCode.none else e for e in errors]
        return errors

    def _commit_refusal(self, group_id: str, generation: int, member_id: str) -> ErrorCode | None:
        """Kafka's order of checks: a simple commit to a group without members; else the group
        must not await its assignments, and the member and generation must be current."""
        group = self.group(group_id)
        if group is None or not group.members:
            return None if generation < 0 and not member_id else ErrorCode.unknown_member_id
        if generation < 0 and group.state == GroupState.EMPTY:
            return None
        if group.state == GroupState.COMPLETING_REBALANCE:
            return ErrorCode.rebalance_in_progress
        member = group.members.get(member_id)
        if member is None:
            return ErrorCode.unknown_member_id
        if generation != group.generation:
            return ErrorCode.illegal_generation
        self.touch(group, member)
        return None

    async def _check_partitions(self, commits: Sequence[OffsetCommit]) -> list[ErrorCode]:
        partitions: dict[str, int | None] = {}
        for topic in {c.topic for c in commits}:
            try:
                partitions[topic] = await self.offsets.get_partitions(topic)
            except (TopicNotFoundError, InvalidArgumentError):
                partitions[topic] = None
        limit = self.config.max_metadata_bytes
        out = []
        for c in commits:
            count = partitions[c.topic]
            if count is None or not 0 <= c.partition < max(count, 1):
                out.append(ErrorCode.unknown_topic_or_partition)
            elif c.metadata is not None and len(c.metadata.encode()) > limit:
                out.append(ErrorCode.offset_metadata_too_large)
            else:
                out.append(ErrorCode.none)
        return out

    # --- OffsetFetch -------------------------------------------------------------------------
    async def fetch(
        self, group_id: str, partitions: Sequence[tuple[str, int]] | None
    ) -> tuple[ErrorCode, list[GroupOffset]]:
        """The group's committed offsets of `partitions` (offset -1 where none is), or all of
        them (None). The error is NONE, or why none could be read."""
        refused = await self._refusal(group_id)
        if refused is not None:
            return refused, []
        wanted = None if partitions is None else {t for t, _ in partitions}
        try:
            stored = await self.offsets.group_offsets(group_id, wanted) if group_id else []
        except Exception as exc:
            return store_error(exc), []
        if partitions is None:
            return ErrorCode.none, stored
        found = {(o.topic, o.partition): o for o in stored}
        return ErrorCode.none, [found.get((t, p)) or GroupOffset(group_id, t, p, -1) for t, p in partitions]

    # --- the admin API -----------------------------------------------------------------------
    async def list_groups(self) -> list[str]:
        """Groups with committed offsets, and those this coordinator holds."""
        return sorted(set(await self.offsets.list_groups()) | set(self.group_ids()))

    async def delete_group(self, group_id: str) -> int:
        """Delete the group's offsets (how many); GroupNotEmptyError while it has members here,
        GroupNotFoundError when it has neither offsets nor a place here."""
        group = self.group(group_id)
        if group is not None and group.members:
            raise GroupNotEmptyError(group_id, len(group.members))
        deleted = await self.offsets.delete_group_offsets(group_id)
        if group is not None:
            self._unload(group, ErrorCode.unknown_member_id)
        elif deleted == 0:
            raise GroupNotFoundError(group_id)
        return deleted
