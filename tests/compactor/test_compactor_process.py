"""`quire compactor` started while its metadata database does not answer waits for it (a try a
second) instead of exiting, then serves; SIGTERM meanwhile or after ends it with 0. A real
process and a real PostgreSQL (a database that does not exist yet, then is created)."""

from __future__ import annotations

import os
import signal
import uuid
from pathlib import Path

import psycopg
import pytest

from tests.support import QuireProcess, free_port, wait_until


def _admin(base_url: str, sql: str) -> None:
    with psycopg.connect(base_url.replace("postgresql+psycopg://", "postgresql://"), autocommit=True) as c:
        c.execute(sql)


@pytest.mark.spark
def test_a_compactor_started_before_its_database_waits_for_it(tmp_path: Path, postgres_url: str) -> None:
    name = f"quire_late_{uuid.uuid4().hex[:10]}"
    base, _, _ = postgres_url.rpartition("/")
    env = {
        "QUIRE_DATABASE_URL": f"{base}/{name}",
        "QUIRE_BOOKIES": f'["127.0.0.1:{free_port()}"]',
        "QUIRE_SPARK_MASTER": "local[1]",
    }
    compactor = QuireProcess(["compactor"], env, tmp_path / "compactor.log").start()
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
