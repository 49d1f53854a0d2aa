"""What only the SQL store has: statement counting, CAS under many threads and processes'
engines, SQLite's journal mode, and database failures surfacing as MetadataErrors."""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import pytest

from managed_ledger.metadata.api import (
    AlreadyExistsError,
    BadVersionError,
    CursorMetadata,
    MetadataUnavailableError,
    TopicMetadata,
)
from managed_ledger.metadata.sql import SqlMetadataStore
from tests.support import free_port


@pytest.fixture
def store(metadata_url: str) -> Iterator[SqlMetadataStore]:
    s = SqlMetadataStore(metadata_url)
    try:
        yield s
    finally:
        s.close()


def test_a_batched_cursor_flush_is_one_statement(store: SqlMetadataStore) -> None:
    store.create_managed_ledger("ml")
    cursors = [store.create_cursor(CursorMetadata("ml", f"c{i}", (1, -1))) for i in range(50)]
    before = store.statement_count
    moved = store.update_cursors([replace(c, mark_delete=(1, 99), individually_deleted=()) for c in cursors])
    assert store.statement_count - before == 1
    assert all(c.version == 2 for c in moved)
    assert {c.mark_delete for c in store.list_cursors("ml")} == {(1, 99)}


def test_no_delivery_state_is_sql_null(store: SqlMetadataStore) -> None:
    """None is stored as SQL NULL (the column is nullable), not as the JSON value null, by the
    insert and by the batched update alike."""
    store.create_managed_ledger("ml")
    created = store.create_cursor(CursorMetadata("ml", "c", (1, -1), delivery_state={"v": 1}))
    nulls = "SELECT count(*) FROM cursors WHERE delivery_state IS NULL"
    with store._engine.connect() as conn:
        assert conn.exec_driver_sql(nulls).scalar() == 0
    store.update_cursors([replace(created, delivery_state=None)])
    store.create_cursor(CursorMetadata("ml", "d", (1, -1)))
    with store._engine.connect() as conn:
        assert conn.exec_driver_sql(nulls).scalar() == 2
    assert [c.delivery_state for c in store.list_cursors("ml")] == [None, None]


def test_statement_count_counts_each_statement(store: SqlMetadataStore) -> None:
    before = store.statement_count
    ledger = store.create_ledger(("b:1",), 1, 1, 0)
    store.update_ledger(replace(ledger, last_entry_id=5))
    store.get_ledger(ledger.ledger_id)
    # Insert (plus the sequence's nextval on PostgreSQL), update, select; BEGIN is not counted.
    assert store.statement_count - before in (3, 4)


def test_cas_under_many_threads_loses_no_update(store: SqlMetadataStore, metadata_url: str) -> None:
    """Threads on two store instances add to one ledger's length with read-CAS-retry loops."""
    other = SqlMetadataStore(metadata_url)
    ledger_id = store.create_ledger(("b:1",), 1, 1, 0).ledger_id
    conflicts: list[int] = []

    def add(s: SqlMetadataStore, times: int) -> None:
        for _ in range(times):
            while True:
                current = s.get_ledger(ledger_id)
                try:
                    s.update_ledger(replace(current, length_bytes=current.length_bytes + 1))
                    break
                except BadVersionError:
                    conflicts.append(1)

    threads = [threading.Thread(target=add, args=(s, 20)) for s in (store, other, store, other)]
    try:
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=120)
    finally:
        other.close()
    final = store.get_ledger(ledger_id)
    assert final.length_bytes == 80 and final.version == 81


def test_racing_creators_one_wins(store: SqlMetadataStore, metadata_url: str) -> None:
    other = SqlMetadataStore(metadata_url)
    outcomes: list[str] = []
    barrier = threading.Barrier(2)

    def create(s: SqlMetadataStore) -> None:
        barrier.wait(timeout=10)
        try:
            s.create_topic(TopicMetadata("public/default/raced", partitions=2))
            outcomes.append("created")
        except AlreadyExistsError:
            outcomes.append("exists")

    threads = [threading.Thread(target=create, args=(s,)) for s in (store, other)]
    try:
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=60)
    finally:
        other.close()
    assert sorted(outcomes) == ["created", "exists"]


def test_sqlite_file_is_in_wal_mode_with_records_durable(tmp_path: Path) -> None:
    path = tmp_path / "m.db"
    store = SqlMetadataStore(f"sqlite:///{path}")
    ledger = store.create_ledger(("b:1",), 1, 1, 7)
    store.close()
    with sqlite3.connect(path) as raw:
        assert raw.execute("PRAGMA journal_mode").fetchone() == ("wal",)
    reopened = SqlMetadataStore(f"sqlite:///{path}")
    try:
        assert reopened.get_ledger(ledger.ledger_id) == ledger
    finally:
        reopened.close()


def test_unreachable_postgres_is_a_retriable_metadata_error() -> None:
    url = f"postgresql+psycopg://postgres@127.0.0.1:{free_port()}/test"
    with pytest.raises(MetadataUnavailableError) as info:
        SqlMetadataStore(url)
    assert info.value.retriable


def test_a_locked_sqlite_database_is_unavailable_not_a_crash(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from managed_ledger.metadata import engine

    path = tmp_path / "m.db"
    SqlMetadataStore(f"sqlite:///{path}").close()
    monkeypatch.setattr(engine, "SQLITE_BUSY_TIMEOUT_MS", 100)
    store = SqlMetadataStore(f"sqlite:///{path}")
    holder = sqlite3.connect(path, isolation_level=None)
    try:
        holder.execute("BEGIN IMMEDIATE")  # another process holds the write lock
        with pytest.raises(MetadataUnavailableError):
            store.create_tenant("blocked")
        holder.execute("ROLLBACK")
        store.create_tenant("blocked")  # and once the lock is free, it works
        assert "blocked" in store.list_tenants()
    finally:
        holder.close()
        store.close()
