"""The metadata store's clock: the one clock that stamps and judges broker leases.

A lease written with one process's wall clock and judged with another's is only as good as the
two clocks agree (reliability review 2026-11-28, findings 5 and 11). So a lease end is written
as store time plus the lease, and judged against store time, in the same statement: for
PostgreSQL its `clock_timestamp()` (the server's clock at that moment, not the transaction's
start); for SQLite and the in-memory store, which live in the one process or machine that uses
them, this process's `common.clock.wall_clock_ms`.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable

from sqlalchemy import BigInteger, ColumnElement, Connection, literal_column

from common.clock import wall_clock_ms
from managed_ledger.metadata.api import MetadataError

log = logging.getLogger("quire.store_clock")

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


class StoreClock:
    """A `managed_ledger.clock.Clock` on the store's time, for processes whose leases and
    claims are read-judge-CAS cycles in their own code (the auditor's and the recovery workers'
    claims, compaction runs): every process then stamps and judges them on the one clock.

    The store is asked at most every `refresh_ms`; in between its time is carried on with this
    process's monotonic clock from when the answer arrived, which puts it behind by at most one
    round trip: another's lease looks a little longer, this process's own a little shorter, both
    the safe way. When the store cannot answer, the last sample carries on (a process that never
    got one raises, as any store call would)."""

    def __init__(
        self,
        store_now_ms: Callable[[], int],
        refresh_ms: int = 1_000,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self._store_now_ms = store_now_ms
        self._refresh_s = refresh_ms / 1000
        self._monotonic = monotonic
        self._lock = threading.Lock()
        self._sample: tuple[int, float] | None = None  # (store ms, local monotonic s at receipt)

    def now_ms(self) -> int:
        with self._lock:
            if self._sample is None or self._monotonic() - self._sample[1] >= self._refresh_s:
                try:
                    self._sample = (self._store_now_ms(), self._monotonic())
                except MetadataError:
                    if self._sample is None:
                        raise
                    log.warning("the store's clock is unreachable; carrying on from the last sample")
            store_ms, at_s = self._sample
            return store_ms + int((self._monotonic() - at_s) * 1000)
