"""`cluster`: start one bookie and N brokers on a fresh PostgreSQL schema (dropped afterwards);
every process is stopped at the end of the test, whatever happened."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.cluster.harness import Cluster
from tests.conftest import drop_postgres_schema, fresh_postgres_schema_url
from tests.kinds import kind

StartCluster = Callable[..., Cluster]


@pytest.fixture
@kind("process")
def start_cluster(tmp_path: Path, postgres_url: str) -> Iterator[StartCluster]:
    url, schema = fresh_postgres_schema_url(postgres_url)
    clusters: list[Cluster] = []

    def start(brokers: int = 3, short_leases: bool = True, **env: str) -> Cluster:
        cluster = Cluster(tmp_path / f"cluster{len(clusters)}", url, dict(env), short_leases)
        cluster.root.mkdir(parents=True)
        clusters.append(cluster)
        return cluster.start(brokers)

    try:
        yield start
    finally:
        for cluster in clusters:
            cluster.stop()
        drop_postgres_schema(postgres_url, schema)
