"""Fixtures of the connector's tests: one `quire standalone` and one local Spark session for the
whole folder (a JVM and a stack started once, not per module; each test uses topics of its own).

The session is `local[2,4]`: two cores, and a failed task is tried up to four times (plain
`local[2]` never retries, and the sink's tests kill tasks on purpose). Python workers run this
interpreter, with the worktree on their path (where `quire_spark` is imported from).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from tests.kafka_clients.support import Standalone, standalone

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="package")
def quire(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Standalone]:
    with standalone(tmp_path_factory.mktemp("standalone")) as s:
        # keep closed ledgers (the default retention removes them once no subscription needs them)
        keep = {"retentionTimeInMinutes": -1, "retentionSizeInMB": -1}
        r = s.rest("POST", "/admin/v2/namespaces/public/default/retention", json=keep)
        assert r.status_code == 204, r.text
        yield s


@pytest.fixture(scope="package")
def spark(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SparkSession]:
    from pyspark.sql import SparkSession

    from quire_spark import QuireDataSource

    os.environ["PYSPARK_PYTHON"] = sys.executable
    paths = os.environ.get("PYTHONPATH", "").split(os.pathsep)
    if str(REPO) not in paths:
        os.environ["PYTHONPATH"] = os.pathsep.join([str(REPO), *[p for p in paths if p]])
    session = (
        SparkSession.builder.master("local[2,4]")
        .appName("quire-spark-tests")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.driver.host", "127.0.0.1")
        # a loaded 2-core machine starts a Python worker slowly (the default wait is 15 s)
        .config("spark.python.authenticate.socketTimeout", "120s")
        .config("spark.local.dir", str(tmp_path_factory.mktemp("spark-local")))
        .getOrCreate()
    )
    session.sparkContext.setLogLevel("ERROR")
    session.dataSource.register(QuireDataSource)
    try:
        yield session
    finally:
        session.stop()
