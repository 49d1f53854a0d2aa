"""The schema versions contract of every MetadataStore (in-memory, SQLite, PostgreSQL): versions
read back in order with their bytes and properties, a taken version refused with
AlreadyExistsError (the race the schema registry retries on), topics kept apart, and deleting a
topic's versions."""

from __future__ import annotations

import pytest

from managed_ledger.metadata.api import AlreadyExistsError, MetadataStore, SchemaVersion
from tests.managed_ledger.test_metadata_contract import opener, store

__all__ = ["opener", "store"]  # the fixtures, imported so pytest finds them here

T1 = "public/default/orders"
T2 = "public/default/prices"


def test_versions_read_back_in_order_with_bytes_and_properties(store: MetadataStore) -> None:
    assert store.get_schema_versions(T1) == []
    second = SchemaVersion(T1, 1, "AVRO", b'{"type": "string"}\x00\xff', {"k": "v"}, 20)
    first = SchemaVersion(T1, 0, "STRING", b"", {}, 10)
    store.add_schema_version(second)
    store.add_schema_version(first)
    mark = SchemaVersion(T1, 2, "NONE", b"", {}, 30, deleted=True)
    store.add_schema_version(mark)
    assert store.get_schema_versions(T1) == [first, second, mark]
    assert store.get_schema_versions(T2) == []


def test_a_taken_version_is_refused_and_the_first_kept(store: MetadataStore) -> None:
    store.add_schema_version(SchemaVersion(T1, 0, "STRING", b"", {}, 10))
    with pytest.raises(AlreadyExistsError):
        store.add_schema_version(SchemaVersion(T1, 0, "AVRO", b"{}", {}, 11))
    store.add_schema_version(SchemaVersion(T2, 0, "AVRO", b"{}", {}, 12))  # another topic: its own line
    assert [v.schema_type for v in store.get_schema_versions(T1)] == ["STRING"]


def test_deleting_a_topics_versions(store: MetadataStore) -> None:
    for version in range(3):
        store.add_schema_version(SchemaVersion(T1, version, "STRING", b"", {}, version))
    store.add_schema_version(SchemaVersion(T2, 0, "STRING", b"", {}, 0))
    assert store.delete_schema_versions(T1) == 3
    assert store.get_schema_versions(T1) == []
    assert len(store.get_schema_versions(T2)) == 1
    assert store.delete_schema_versions(T1) == 0


@pytest.mark.parametrize(
    "bad",
    [SchemaVersion("", 0, "AVRO", b""), SchemaVersion(T1, -1, "AVRO", b""), SchemaVersion(T1, 0, "", b"")],
)
def test_a_version_without_topic_version_or_type_is_refused(store: MetadataStore, bad: SchemaVersion) -> None:
    with pytest.raises(ValueError):
        store.add_schema_version(bad)
