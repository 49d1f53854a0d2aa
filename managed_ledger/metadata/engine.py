"""Building the one SQLAlchemy Engine a store (or a migration run) uses.

SQLite: the driver's own transaction handling is switched off (isolation_level None) and every
transaction starts with an explicit BEGIN, as SQLAlchemy's pysqlite notes advise; otherwise
pysqlite opens transactions lazily and a SELECT followed by an UPDATE is not one transaction, and
DDL in a migration would not be transactional. Write transactions use BEGIN IMMEDIATE: they take
the write lock up front and wait for it (busy_timeout) instead of failing half-way with
SQLITE_BUSY when a reader upgrades. WAL lets readers run beside the writer; foreign keys are on
for the cascades; check_same_thread is off because callers come from the threads of
`bookie.metadata_calls`.

PostgreSQL: a normal pool with pre-ping, so a restarted server costs one failed checkout, not
a failed call.
"""

from __future__ import annotations

import sqlite3
import time
from contextlib import AbstractContextManager
from typing import Any, Protocol

from sqlalchemy import Engine, create_engine, event
from sqlalchemy.engine import Connection, make_url
from sqlalchemy.pool import StaticPool

from managed_ledger.metadata.api import MetadataError

SQLITE_BUSY_TIMEOUT_MS = 30_000
PG_CONNECT_TIMEOUT_S = 10
WRITE_OPTION = "quire_write"  # execution option: this connection's transaction will write


def is_sqlite(url: str) -> bool:
    return make_url(url).get_backend_name() == "sqlite"


def make_engine(url: str) -> Engine:
    if is_sqlite(url):
        return _sqlite_engine(url)
    # A bounded connect: an unreachable server is an error the caller sees, not a hang.
    connect_args = {"connect_timeout": PG_CONNECT_TIMEOUT_S} if url.startswith("postgresql+psycopg") else {}
    return create_engine(url, pool_pre_ping=True, pool_size=5, max_overflow=10, connect_args=connect_args)


def _enable_wal(cur: Any) -> None:
    """Switch the file to WAL (a lasting property of the file). The switch needs an exclusive
    lock and SQLite does not wait on the busy handler for it, so the first connections to a
    new file, opened at once by processes starting together, retry for a bounded time."""
    deadline = time.monotonic() + SQLITE_BUSY_TIMEOUT_MS / 1000
    while True:
        try:
            if cur.execute("PRAGMA journal_mode").fetchone()[0].lower() != "wal":
                cur.execute("PRAGMA journal_mode=WAL")
            return
        except sqlite3.OperationalError as exc:
            if "locked" not in str(exc) or time.monotonic() > deadline:
                raise
            time.sleep(0.01)


def _sqlite_engine(url: str) -> Engine:
    database = make_url(url).database
    in_memory = database in (None, "", ":memory:")
    engine = create_engine(
        url,
        connect_args={"check_same_thread": False, "timeout": SQLITE_BUSY_TIMEOUT_MS / 1000},
        # An in-memory database lives in one connection: share it (tests only).
        poolclass=StaticPool if in_memory else None,
    )

    @event.listens_for(engine, "connect")
    def _on_connect(dbapi_connection: Any, _record: Any) -> None:
        dbapi_connection.isolation_level = None  # we send BEGIN ourselves, see module docstring
        cur = dbapi_connection.cursor()
        cur.execute(f"PRAGMA busy_timeout={SQLITE_BUSY_TIMEOUT_MS}")
        if not in_memory:
            _enable_wal(cur)
        cur.execute("PRAGMA foreign_keys=ON")
        cur.close()

    @event.listens_for(engine, "begin")
    def _on_begin(conn: Connection) -> None:
        write = conn.get_execution_options().get(WRITE_OPTION, True)
        conn.exec_driver_sql("BEGIN IMMEDIATE" if write else "BEGIN")

    return engine


class Transactional(Protocol):
    """What the store's mixins (bookies, recovery, ownership) use of SqlMetadataStore: one read
    transaction, or one write transaction whose integrity error becomes `conflict`."""

    def _read(self) -> AbstractContextManager[Connection]: ...

    def _write(self, conflict: MetadataError | None = None) -> AbstractContextManager[Connection]: ...
