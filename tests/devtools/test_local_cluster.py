"""`devtools.cluster.LocalCluster`, the one local cluster of tests and benchmarks: it starts each
kind of process ready to use, and leaves no process and no PostgreSQL schema behind."""

from __future__ import annotations

import os
from pathlib import Path

import httpx
import psycopg
import pytest

from devtools.cluster import LocalCluster, Node

pytestmark = pytest.mark.process


def gone(node: Node) -> bool:
    try:
        os.killpg(node.pid, 0)
    except ProcessLookupError:
        return True
    return False


def test_a_sqlite_cluster_serves_and_its_processes_go_with_it(tmp_path: Path) -> None:
    with LocalCluster(tmp_path) as cluster:
        bookie = cluster.bookie()
        broker = cluster.broker()
        recovery = cluster.autorecovery()
        compactor = cluster.compactor()
        r = httpx.post(
            f"{broker.url}/v1/topics/public/default/t/messages", json={"messages": [{"value": "a"}]}
        )
        assert r.status_code == 200, r.text
        for node in (recovery, compactor):
            assert httpx.get(f"{node.url}/metrics", timeout=10).status_code == 200
        cluster.kill9(bookie)
        assert not bookie.alive() and gone(bookie)
        assert cluster.bookies == []
    assert all(gone(node) for node in cluster.nodes)
    assert "bookie-0" in cluster.logs()


def test_a_process_that_exits_at_start_says_why_and_leaves_nothing(tmp_path: Path) -> None:
    with LocalCluster(tmp_path, start_timeout_s=60) as cluster:
        cluster.bookie()
        with pytest.raises(RuntimeError, match="broker-0 exited with 2"):
            cluster.broker(env={"QUIRE_ENSEMBLE_SIZE": "0"})
    assert all(gone(node) for node in cluster.nodes)


@pytest.mark.postgres
def test_a_postgres_cluster_gets_a_schema_of_its_own_and_drops_it(tmp_path: Path, postgres_url: str) -> None:
    dsn = postgres_url.replace("postgresql+psycopg://", "postgresql://")

    def schemas() -> set[str]:
        with psycopg.connect(dsn) as conn:
            return {row[0] for row in conn.execute("SELECT schema_name FROM information_schema.schemata")}

    with LocalCluster(tmp_path, database="postgres") as cluster:
        schema = cluster.schema
        assert schema is not None
        assert schema in schemas()
        cluster.bookie()
        broker = cluster.broker()
        assert httpx.get(f"{broker.url}/readyz", timeout=10).status_code == 200
    assert schema not in schemas()
