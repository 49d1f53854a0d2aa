"""Kafka consumer groups' committed offsets, for the Kafka listener's group coordinator
(app/kafka_listener) and the admin API: the metadata store's offsets with the names checked.

Membership is not here: the coordinator keeps it in memory; only the offsets are durable.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import replace

from bookie.metadata_calls import call_store
from managed_ledger.metadata.api import GroupOffset
from topics import names
from topics.errors import InvalidArgumentError
from topics.registry import TopicRegistry

# Kafka sets no limit; this one keeps a group id a short key of the offsets' table.
MAX_GROUP_ID_LENGTH = 255


def validate_group(group: str) -> str:
    """A Kafka group id: 1 to MAX_GROUP_ID_LENGTH printable characters."""
    if not group or len(group) > MAX_GROUP_ID_LENGTH or not group.isprintable():
        raise InvalidArgumentError(
            f"group id {group[:MAX_GROUP_ID_LENGTH]!r} is not valid: 1 to {MAX_GROUP_ID_LENGTH} "
            "printable characters"
        )
    return group


def _checked(offset: GroupOffset) -> GroupOffset:
    validate_group(offset.group)
    if offset.partition < 0:
        raise InvalidArgumentError(f"partition {offset.partition} of {offset.topic} is negative")
    return replace(offset, topic=names.validate_topic(offset.topic))


class GroupOffsets:
    """Kafka consumer groups' committed offsets, names checked."""

    def __init__(self, registry: TopicRegistry) -> None:
        self._r = registry

    async def commit_group_offsets(self, offsets: Sequence[GroupOffset]) -> None:
        checked = [_checked(o) for o in offsets]
        if checked:
            await call_store(self._r.store.commit_group_offsets, checked)

    async def group_offsets(self, group: str, topics: Collection[str] | None = None) -> list[GroupOffset]:
        validate_group(group)
        wanted = None if topics is None else sorted({names.validate_topic(t) for t in topics})
        return await call_store(self._r.store.get_group_offsets, group, wanted)

    async def list_groups(self) -> list[str]:
        return await call_store(self._r.store.list_groups)

    async def delete_group_offsets(self, group: str) -> int:
        return await call_store(self._r.store.delete_group_offsets, validate_group(group))
