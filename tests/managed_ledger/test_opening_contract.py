"""The reads an open makes in one call (`load_managed_ledger`, `get_policies_of`), against every
MetadataStore: the in-memory fake, SQLite and PostgreSQL."""

from __future__ import annotations

from dataclasses import replace

from managed_ledger.metadata.api import CursorMetadata, DedupSnapshot, LedgerState, MetadataStore
from tests.managed_ledger.test_metadata_contract import Opener, opener, store

__all__ = ["opener", "store"]  # the fixtures, imported so pytest finds them here


def test_load_of_a_missing_managed_ledger_is_none(store: MetadataStore) -> None:
    assert store.load_managed_ledger("nope") is None


def test_load_of_a_new_managed_ledger_has_nothing_else(store: MetadataStore) -> None:
    created = store.create_managed_ledger("ml")
    loaded = store.load_managed_ledger("ml")
    assert loaded is not None
    assert loaded.meta == created
    assert (dict(loaded.ledgers), loaded.cursors, loaded.dedup) == ({}, (), None)


def test_load_reads_the_record_its_ledgers_cursors_and_dedup(store: MetadataStore) -> None:
    meta = store.create_managed_ledger("ml")
    closed = store.create_ledger(("b1:3181",), 1, 1, created_ms=1)
    closed = store.update_ledger(replace(closed, state=LedgerState.CLOSED, last_entry_id=4, length_bytes=50))
    open_ = store.create_ledger(("b1:3181",), 1, 1, created_ms=2)
    other = store.create_ledger(("b1:3181",), 1, 1, created_ms=3)  # not listed: not read
    gone = 10_000 + other.ledger_id  # listed, but has no row
    meta = store.update_managed_ledger(replace(meta, ledger_ids=(closed.ledger_id, open_.ledger_id, gone)))
    store.create_managed_ledger("neighbour")
    store.create_cursor(CursorMetadata("neighbour", "x", (1, 1)))
    b = store.create_cursor(CursorMetadata("ml", "b", (closed.ledger_id, 2)))
    a = store.create_cursor(CursorMetadata("ml", "a", (closed.ledger_id, 1), delivery_state={"k": 1}))
    snapshot = store.put_dedup_snapshot(DedupSnapshot("ml", (closed.ledger_id, 4), {"p": 7}))

    loaded = store.load_managed_ledger("ml")
    assert loaded is not None
    assert loaded.meta == meta
    assert dict(loaded.ledgers) == {closed.ledger_id: closed, open_.ledger_id: open_}
    assert loaded.ledgers[closed.ledger_id].state == LedgerState.CLOSED
    assert loaded.cursors == (a, b)  # by name
    assert loaded.dedup == snapshot


def test_load_sees_what_another_instance_wrote(opener: Opener) -> None:
    first, second = opener(), opener()
    meta = first.create_managed_ledger("ml")
    meta = first.update_managed_ledger(replace(meta, properties={"k": "v"}))
    loaded = second.load_managed_ledger("ml")
    assert loaded is not None and loaded.meta == meta


def test_policies_of_several_scopes_at_once(store: MetadataStore) -> None:
    store.set_policies("public/default", {"retention": {"size": 1}})
    store.update_policies("public/default/x", {"ttl": 5})
    got = store.get_policies_of(["public/default", "public/default/x", "public/default/none"])
    assert got == {
        "public/default": {"retention": {"size": 1}},
        "public/default/x": {"ttl": 5},
        "public/default/none": {},
    }
    assert store.get_policies_of([]) == {}
    assert got["public/default"] == store.get_policies("public/default")
