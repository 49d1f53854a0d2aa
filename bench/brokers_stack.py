"""The processes `make bench-brokers` starts: one bookie and several brokers sharing one
PostgreSQL metadata store (several brokers on one SQLite file would contend for its lock).

Each stack gets a schema of its own in the database at QUIRE_BENCH_POSTGRES_URL (default: the
server at 127.0.0.1:5432, user postgres, db test), reached through `search_path`, created when
the stack starts and dropped with everything in it when it closes. Processes run in sessions of
their own and are stopped by process group (`replication_stack.Stack`), on success and on error.
Brokers keep the default lease and heartbeat: the failover figures are the defaults' figures.
"""

from __future__ import annotations

import contextlib
import os
import re
import time
from pathlib import Path

import httpx

from bench.common import create_schema, drop_schema, postgres_sql
from bench.replication_stack import Stack
from devtools.procs import Proc

POSTGRES_URL = os.environ.get("QUIRE_BENCH_POSTGRES_URL", "postgresql+psycopg://postgres@127.0.0.1:5432/test")
SETTLE_TIMEOUT_S = 30.0


def postgres_problem() -> str | None:
    """Why the PostgreSQL server cannot be used, or None when it can."""
    try:
        postgres_sql(POSTGRES_URL, "SELECT 1")
    except Exception as exc:  # any failure means: not usable here
        return f"PostgreSQL at {POSTGRES_URL} is not reachable ({exc}); set QUIRE_BENCH_POSTGRES_URL"
    return None


def renewals(base: str) -> float:
    """How often this broker has renewed its lease (its /metrics counter)."""
    text = httpx.get(f"{base}/metrics", timeout=5).text
    found = re.search(r"^quire_ownership_lease_renewals_total (\S+)$", text, re.M)
    return float(found.group(1)) if found else 0.0


class BrokerStack(Stack):
    """One bookie, brokers writing at 1/1/1 to it, one PostgreSQL schema; closed together."""

    def __init__(self, tmp: Path) -> None:
        url, self.schema = create_schema(POSTGRES_URL, "bench")
        try:
            super().__init__(tmp, {"QUIRE_DATABASE_URL": url})
        except BaseException:
            drop_schema(POSTGRES_URL, self.schema)
            raise
        self.brokers: dict[str, Proc] = {}  # base URL -> process
        try:
            self.bookie_address = self.bookie()
        except BaseException:
            self.close()
            raise

    def close(self) -> None:
        super().close()
        with contextlib.suppress(Exception):  # the schema goes last, with the processes gone
            drop_schema(POSTGRES_URL, self.schema)

    def start_broker(self) -> str:
        """One more broker on a free port; its base URL once /readyz says 200."""
        quorum = {"QUIRE_ENSEMBLE_SIZE": "1", "QUIRE_WRITE_QUORUM": "1", "QUIRE_ACK_QUORUM": "1"}
        node = self.cluster.broker(env=quorum, bookies=[self.bookie_address])
        self.brokers[node.url] = node.proc
        return node.url

    def kill9_broker(self, base: str) -> None:
        self.brokers.pop(base).kill9()

    def settle(self) -> None:
        """Return once every broker has seen every other: the store lists them all, and each has
        renewed its lease twice since (a renewal re-reads the live brokers), bounded in time."""
        deadline = time.monotonic() + SETTLE_TIMEOUT_S
        bases = list(self.brokers)
        while len(httpx.get(f"{bases[0]}/admin/v2/brokers", timeout=5).json()) != len(bases):
            if time.monotonic() > deadline:
                raise TimeoutError(f"the store did not list {len(bases)} brokers in {SETTLE_TIMEOUT_S:g} s")
            time.sleep(0.1)
        marks = {b: renewals(b) for b in bases}
        while any(renewals(b) < marks[b] + 2 for b in bases):
            if time.monotonic() > deadline:
                raise TimeoutError(f"brokers did not renew their leases in {SETTLE_TIMEOUT_S:g} s")
            time.sleep(0.1)


def broker_stack(tmp: Path, brokers: int) -> BrokerStack:
    """A bookie and `brokers` brokers that all know each other; the caller closes the stack."""
    stack = BrokerStack(tmp)
    try:
        for _ in range(brokers):
            stack.start_broker()
        stack.settle()
        return stack
    except BaseException:
        stack.close()
        raise
