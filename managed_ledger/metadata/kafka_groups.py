"""The metadata stores' Kafka group methods (`managed_ledger.metadata.api.GroupOffsetStore`):
consumer groups' committed offsets, for the SQL store and the in-memory one, mixed into each.

A commit is an upsert of every (group, topic, partition) it names, in one transaction: Kafka's
OffsetCommit has no compare-and-set (the group coordinator decides who may commit), so the last
writer wins. Group membership is not stored: it lives in the coordinator's memory
(app/kafka_listener), and a client that loses it rejoins; the offsets are what must survive.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Collection, Sequence
from typing import Any, cast

from sqlalchemy import Table, delete, select
from sqlalchemy.dialects import postgresql, sqlite

from managed_ledger.metadata.api import GroupOffset
from managed_ledger.metadata.engine import Transactional
from managed_ledger.metadata.models import KafkaGroupOffsetRow

GROUP_OFFSETS = cast(Table, KafkaGroupOffsetRow.__table__)


def _checked(offsets: Sequence[GroupOffset]) -> list[GroupOffset]:
    """The offsets to write, one per key (the last one given wins), after the invariants."""
    latest: dict[tuple[str, str, int], GroupOffset] = {}
    for o in offsets:
        if not o.group or not o.topic or o.partition < 0:
            raise ValueError(f"a committed offset needs a group, a topic and a partition >= 0: {o}")
        latest[(o.group, o.topic, o.partition)] = GroupOffset(
            o.group, o.topic, int(o.partition), int(o.offset), str(o.metadata), int(o.commit_time_ms)
        )
    return list(latest.values())


def _from_row(row: Any) -> GroupOffset:
    return GroupOffset(
        group=row["group_id"],
        topic=row["topic"],
        partition=int(row["partition"]),
        offset=int(row["committed_offset"]),
        metadata=row["committed_metadata"],
        commit_time_ms=int(row["commit_time_ms"]),
    )


def _params(o: GroupOffset) -> dict[str, Any]:
    return {
        "group_id": o.group,
        "topic": o.topic,
        "partition": o.partition,
        "committed_offset": o.offset,
        "committed_metadata": o.metadata,
        "commit_time_ms": o.commit_time_ms,
    }


class SqlGroupOffsetMethods:
    """Mixed into SqlMetadataStore: uses its `_read` / `_write` transactions."""

    def commit_group_offsets(self: Transactional, offsets: Sequence[GroupOffset]) -> None:
        batch = _checked(offsets)
        if not batch:
            return
        with self._write() as conn:
            dialect_insert: Callable[..., Any] = (
                postgresql.insert if conn.dialect.name == "postgresql" else sqlite.insert
            )
            stmt = dialect_insert(GROUP_OFFSETS)
            stmt = stmt.on_conflict_do_update(
                index_elements=[GROUP_OFFSETS.c.group_id, GROUP_OFFSETS.c.topic, GROUP_OFFSETS.c.partition],
                set_={
                    "committed_offset": stmt.excluded.committed_offset,
                    "committed_metadata": stmt.excluded.committed_metadata,
                    "commit_time_ms": stmt.excluded.commit_time_ms,
                },
            )
            conn.execute(stmt, [_params(o) for o in batch])

    def get_group_offsets(
        self: Transactional, group: str, topics: Collection[str] | None = None
    ) -> list[GroupOffset]:
        if topics is not None and not topics:
            return []
        stmt = select(GROUP_OFFSETS).where(GROUP_OFFSETS.c.group_id == group)
        if topics is not None:
            stmt = stmt.where(GROUP_OFFSETS.c.topic.in_(sorted(set(topics))))
        with self._read() as conn:
            found = [_from_row(r) for r in conn.execute(stmt).mappings().all()]
        # Sorted here, not by ORDER BY: PostgreSQL's collation may order names unlike Python.
        return sorted(found, key=lambda o: (o.topic, o.partition))

    def list_groups(self: Transactional) -> list[str]:
        with self._read() as conn:
            return sorted(conn.execute(select(GROUP_OFFSETS.c.group_id).distinct()).scalars())

    def delete_group_offsets(self: Transactional, group: str) -> int:
        with self._write() as conn:
            return int(conn.execute(delete(GROUP_OFFSETS).where(GROUP_OFFSETS.c.group_id == group)).rowcount)


class InMemoryGroupOffsetMethods:
    """Mixed into InMemoryMetadataStore: its own lock and dictionary."""

    def __init__(self) -> None:
        self._group_offsets_lock = threading.Lock()
        self._group_offsets: dict[tuple[str, str, int], GroupOffset] = {}

    def commit_group_offsets(self, offsets: Sequence[GroupOffset]) -> None:
        batch = _checked(offsets)
        with self._group_offsets_lock:
            for o in batch:
                self._group_offsets[(o.group, o.topic, o.partition)] = o

    def get_group_offsets(self, group: str, topics: Collection[str] | None = None) -> list[GroupOffset]:
        wanted = None if topics is None else set(topics)
        with self._group_offsets_lock:
            return [
                o
                for key, o in sorted(self._group_offsets.items())
                if key[0] == group and (wanted is None or o.topic in wanted)
            ]

    def list_groups(self) -> list[str]:
        with self._group_offsets_lock:
            return sorted({group for group, _, _ in self._group_offsets})

    def delete_group_offsets(self, group: str) -> int:
        with self._group_offsets_lock:
            keys = [k for k in self._group_offsets if k[0] == group]
            for k in keys:
                del self._group_offsets[k]
            return len(keys)

    def _delete_topic_group_offsets(self, topic: str) -> None:
        """delete_topic's share: every group's offsets of `topic`."""
        with self._group_offsets_lock:
            for k in [k for k in self._group_offsets if k[1] == topic]:
                del self._group_offsets[k]
