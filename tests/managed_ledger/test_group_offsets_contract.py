"""The Kafka group offsets contract of every MetadataStore (in-memory, SQLite, PostgreSQL):
upserts in one transaction, reads of all or some topics, the list of groups, deleting a group's
offsets, and a deleted topic taking every group's offsets of it along."""

from __future__ import annotations

import threading

import pytest

from managed_ledger.metadata.api import GroupOffset, MetadataStore, TopicMetadata
from tests.managed_ledger.test_metadata_contract import Opener, opener, store

__all__ = ["opener", "store"]  # the fixtures, imported so pytest finds them here

T1 = "public/default/orders"
T2 = "public/default/prices"


def test_committed_offsets_read_back_by_topic_and_partition(store: MetadataStore) -> None:
    assert store.get_group_offsets("g") == [] and store.list_groups() == []
    store.commit_group_offsets(
        [
            GroupOffset("g", T2, 0, 7, "m", commit_time_ms=10),
            GroupOffset("g", T1, 1, 42, "", commit_time_ms=11),
            GroupOffset("g", T1, 0, 5, "meta data", commit_time_ms=12),
        ]
    )
    assert store.get_group_offsets("g") == [
        GroupOffset("g", T1, 0, 5, "meta data", 12),
        GroupOffset("g", T1, 1, 42, "", 11),
        GroupOffset("g", T2, 0, 7, "m", 10),
    ]
    assert store.get_group_offsets("g", [T2]) == [GroupOffset("g", T2, 0, 7, "m", 10)]
    assert store.get_group_offsets("g", []) == []
    assert store.get_group_offsets("g", ["public/default/none"]) == []
    assert store.get_group_offsets("other") == []


def test_a_commit_replaces_and_the_last_of_a_batch_wins(store: MetadataStore) -> None:
    store.commit_group_offsets([GroupOffset("g", T1, 0, 5, "a", 1)])
    store.commit_group_offsets([GroupOffset("g", T1, 0, 9, "b", 2), GroupOffset("g", T1, 0, 3, "c", 3)])
    assert store.get_group_offsets("g") == [GroupOffset("g", T1, 0, 3, "c", 3)]
    store.commit_group_offsets([])  # nothing to do, no error
    assert store.get_group_offsets("g") == [GroupOffset("g", T1, 0, 3, "c", 3)]


def test_large_offsets_and_long_metadata_round_trip(store: MetadataStore) -> None:
    big = GroupOffset("g", T1, 2**31 - 1, 2**63 - 1, "é" * 4096, 2**62)
    store.commit_group_offsets([big])
    assert store.get_group_offsets("g") == [big]


def test_groups_are_listed_and_deleted(store: MetadataStore) -> None:
    store.commit_group_offsets([GroupOffset("b", T1, 0, 1), GroupOffset("a", T1, 0, 1)])
    store.commit_group_offsets([GroupOffset("a", T2, 3, 1)])
    assert store.list_groups() == ["a", "b"]
    assert store.delete_group_offsets("a") == 2
    assert store.delete_group_offsets("a") == 0
    assert store.list_groups() == ["b"] and store.get_group_offsets("a") == []


def test_deleting_a_topic_deletes_its_offsets_in_every_group(store: MetadataStore) -> None:
    store.create_topic(TopicMetadata(T1, partitions=2))
    store.commit_group_offsets(
        [GroupOffset("a", T1, 0, 1), GroupOffset("a", T1, 1, 1), GroupOffset("b", T1, 0, 4)]
    )
    store.commit_group_offsets([GroupOffset("a", T2, 0, 2), GroupOffset("a", f"{T1}-x", 0, 3)])
    store.delete_topic(T1)
    assert store.get_group_offsets("a") == [GroupOffset("a", T1 + "-x", 0, 3), GroupOffset("a", T2, 0, 2)]
    assert store.list_groups() == ["a"]


def test_invalid_offsets_are_refused_and_nothing_is_written(store: MetadataStore) -> None:
    for bad in (GroupOffset("", T1, 0, 1), GroupOffset("g", "", 0, 1), GroupOffset("g", T1, -1, 1)):
        with pytest.raises(ValueError):
            store.commit_group_offsets([GroupOffset("g", T2, 0, 1), bad])
    assert store.list_groups() == []


def test_commits_from_separate_instances_are_seen_by_each(opener: Opener) -> None:
    a, b = opener(), opener()
    a.commit_group_offsets([GroupOffset("g", T1, 0, 10)])
    assert b.get_group_offsets("g") == [GroupOffset("g", T1, 0, 10)]
    errors: list[BaseException] = []

    def commit(s: MetadataStore, partition: int) -> None:
        try:
            for i in range(20):
                s.commit_group_offsets([GroupOffset("g", T1, partition, i), GroupOffset("g", T2, 0, i)])
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=commit, args=(s, p)) for s, p in ((a, 1), (b, 2))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    assert errors == []
    got = {(o.topic, o.partition): o.offset for o in a.get_group_offsets("g")}
    assert got == {(T1, 0): 10, (T1, 1): 19, (T1, 2): 19, (T2, 0): 19}
