"""`quire compactor` started while its metadata database does not answer waits for it (a try a
second) instead of exiting, then serves; SIGTERM meanwhile or after ends it with 0, also while
its Spark session is still starting. A real process and a real PostgreSQL (a database that does
not exist yet, then is created)."""

from __future__ import annotations

import contextlib
import os
import signal
import tempfile
import uuid
from pathlib import Path

import psutil
import psycopg
import pytest

from tests.support import QuireProcess, free_port, wait_until


def _compactor(tmp_path: Path, database_url: str) -> QuireProcess:
    """`quire compactor` on `database_url`, its bookie a port nobody listens on, local Spark."""
    env = {
        "QUIRE_DATABASE_URL": database_url,
        "QUIRE_BOOKIES": f'["127.0.0.1:{free_port()}"]',
        "QUIRE_SPARK_MASTER": "local[1]",
    }
    return QuireProcess(["compactor"], env, tmp_path / "compactor.log").start()


def _admin(base_url: str, sql: str) -> None:
    with psycopg.connect(base_url.replace("postgresql+psycopg://", "postgresql://"), autocommit=True) as c:
        c.execute(sql)


@pytest.mark.spark
def test_a_compactor_started_before_its_database_waits_for_it(tmp_path: Path, postgres_url: str) -> None:
    name = f"quire_late_{uuid.uuid4().hex[:10]}"
    base, _, _ = postgres_url.rpartition("/")
    compactor = _compactor(tmp_path, f"{base}/{name}")
    try:
        wait_until(lambda: "metadata store not reachable" in compactor.log(), 120, "the compactor waiting")
        assert compactor.alive(), compactor.log()
        _admin(postgres_url, f'CREATE DATABASE "{name}"')
        wait_until(lambda: "compactor up" in compactor.log(), 120, "the compactor up")
        assert compactor.alive(), compactor.log()
        os.kill(compactor.pid, signal.SIGTERM)
        assert compactor.proc is not None and compactor.proc.wait(timeout=120) == 0, compactor.log()
    finally:
        compactor.stop()
        _admin(postgres_url, f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@pytest.mark.spark
def test_a_stop_during_the_spark_warm_up_does_not_wait_for_it(tmp_path: Path) -> None:
    """SIGTERM while the session is still starting ends the process with 0 at once, the session
    never up (the old compactor sat through the JVM's start, then stopped it: `quire standalone`
    killed it after 10 s), and Spark's JVM and work directory go with it."""
    compactor = _compactor(tmp_path, f"sqlite:///{tmp_path / 'metadata.db'}")
    try:
        wait_until(lambda: "compactor up" in compactor.log(), 120, "the compactor up", interval_s=0.02)
        os.kill(compactor.pid, signal.SIGTERM)
        assert compactor.proc is not None and compactor.proc.wait(timeout=120) == 0, compactor.log()
        assert "spark session up" not in compactor.log(), "the stop waited for the warm-up"
        work = f"quire-spark-{compactor.pid}-"
        wait_until(lambda: not _running_with(work), 60, "Spark's JVM to end with the compactor")
        assert not list(Path(tempfile.gettempdir()).glob(f"{work}*")), "the work directory was left"
    finally:
        compactor.stop()


def _running_with(text: str) -> list[int]:
    """Processes whose command line names `text` (the JVM's classpath names the work directory)."""
    found = []
    for p in psutil.process_iter(["cmdline"]):
        with contextlib.suppress(psutil.Error):
            if text in " ".join(p.info["cmdline"] or ()):
                found.append(p.pid)
    return found
