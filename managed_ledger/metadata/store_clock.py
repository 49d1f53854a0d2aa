"""The metadata store's clock: the one clock that stamps and judges broker leases.

A lease written with one process's wall clock and judged with another's is only as good as the
two clocks agree (reliability review 2026-11-28, findings 5 and 11). So a lease end is written
as store time plus the lease, and judged against store time, in the same statement: for
PostgreSQL its `clock_timestamp()` (the server's clock at that moment, not the transaction's
start); for SQLite and the in-memory store, which live in the one process or machine that uses
them, this process's `common.clock.wall_clock_ms`.
"""

from __future__ import annotations

from sqlalchemy import BigInteger, ColumnElement, Connection, literal_column

from common.clock import wall_clock_ms

# The server's milliseconds since the epoch when the statement runs.
POSTGRES_NOW_MS = "(floor(extract(epoch from clock_timestamp()) * 1000))::bigint"


def sql_now_ms(conn: Connection) -> ColumnElement[int] | int:
    """The store's now, as an expression evaluated inside the statement that uses it."""
    if conn.dialect.name == "postgresql":
        return literal_column(POSTGRES_NOW_MS, BigInteger)
    return wall_clock_ms()


def judged_at(conn: Connection, now_ms: int | None) -> ColumnElement[int] | int:
    """`now_ms` when a caller gives one (tests, tools), else the store's clock."""
    return sql_now_ms(conn) if now_ms is None else now_ms
