"""A compaction on a real Spark standalone cluster: a master and a worker started from the installed
PySpark's own launcher (`bin/spark-class`), `quire compactor` pointed at it via QUIRE_SPARK_MASTER.

The compactor process ships Quire's code to the executor itself; the worker's work directory
holding the application's executor proves the tasks ran on the cluster, not in local mode.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import pyspark
import pytest

from bookie.client import BookieLedgerClient
from managed_ledger.entry_format import Message
from managed_ledger.metadata.api import CompactionStatus
from managed_ledger.metadata.sql import SqlMetadataStore
from managed_ledger.position import MessageId
from tests.compactor.conftest import Bookie
from tests.compactor.test_spark_job import compacted_view
from tests.compactor.topic_writer import TopicWriter, model
from tests.support import QuireProcess, free_port, port_open, wait_until

pytestmark = [pytest.mark.slow, pytest.mark.spark]
SPARK_HOME = Path(pyspark.__file__).resolve().parent
ML = "public/default/cluster"


def spark_daemon(args: list[str], root: Path, name: str) -> subprocess.Popen[bytes]:
    env = {
        **os.environ,
        "SPARK_HOME": str(SPARK_HOME),
        "SPARK_LOG_DIR": str(root / "logs"),
        "PYSPARK_PYTHON": sys.executable,
        "SPARK_WORKER_DIR": str(root / "work"),
    }
    log = open(root / f"{name}.log", "ab")  # noqa: SIM115 - the child keeps it; closed at stop
    return subprocess.Popen(
        [str(SPARK_HOME / "bin" / "spark-class"), *args],
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )


def stop(proc: subprocess.Popen[bytes]) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGTERM)
    try:
        proc.wait(timeout=20)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=10)


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[tuple[str, Path]]:
    """(master URL, worker work dir) of a one-worker standalone cluster on loopback."""
    root = tmp_path / "spark"
    (root / "work").mkdir(parents=True)
    master_port, worker_port = free_port(), free_port()
    master = spark_daemon(
        ["org.apache.spark.deploy.master.Master", "--host", "127.0.0.1", "--port", str(master_port),
         "--webui-port", str(free_port())],
        root,
        "master",
    )  # fmt: skip
    procs = [master]
    try:
        wait_until(lambda: port_open(master_port) or master.poll() is not None, 120, "the Spark master")
        url = f"spark://127.0.0.1:{master_port}"
        worker = spark_daemon(
            ["org.apache.spark.deploy.worker.Worker", "--host", "127.0.0.1", "--port", str(worker_port),
             "--webui-port", str(free_port()), "--cores", "2", "--memory", "1g",
             "--work-dir", str(root / "work"), url],
            root,
            "worker",
        )  # fmt: skip
        procs.append(worker)
        wait_until(lambda: port_open(worker_port) or worker.poll() is not None, 120, "the Spark worker")
        assert master.poll() is None and worker.poll() is None, (root / "worker.log").read_text()
        yield url, root / "work"
    finally:
        for p in reversed(procs):
            stop(p)


def test_compaction_runs_on_a_standalone_cluster(tmp_path: Path, cluster: tuple[str, Path]) -> None:
    master_url, work_dir = cluster
    db = f"sqlite:///{tmp_path / 'metadata.db'}"
    store = SqlMetadataStore(db)
    # Registered in the test's store: the compactor places its ledger on live registered bookies.
    bookie = Bookie(tmp_path / "bookie", {"QUIRE_DATABASE_URL": db}).start()
    try:
        _compact_on_cluster(tmp_path, bookie, store, db, master_url, work_dir)
    finally:
        bookie.stop()


def _compact_on_cluster(
    tmp_path: Path, bookie: Bookie, store: SqlMetadataStore, db: str, master_url: str, work_dir: Path
) -> None:

    async def write() -> TopicWriter:
        client = BookieLedgerClient()
        topic = TopicWriter(store, client, ML, (bookie.address,))
        for i in range(40):
            await topic.append([Message(value=b"v%d" % i, key=f"k{(i * 7 + j) % 13}") for j in range(5)])
        await topic.append([Message(value=b"", key="k0")])
        await topic.close_ledger()  # as the owner does when it requests a run (a run plans to the LAC)
        await client.close()
        return topic

    topic = asyncio.run(write())
    store.put_compaction(replace(store.get_compaction(ML), requested=True))
    env = {
        "QUIRE_DATA_DIR": str(tmp_path / "data"),
        "QUIRE_DATABASE_URL": db,
        "QUIRE_BOOKIES": json.dumps([bookie.address]),
        "QUIRE_SPARK_MASTER": master_url,
        "QUIRE_COMPACTION_POLL_INTERVAL_MS": "200",
    }
    compactor = QuireProcess(["compactor"], env, tmp_path / "compactor.log").start()
    try:
        wait_until(
            lambda: (
                store.get_compaction(ML).status in (CompactionStatus.SUCCESS, CompactionStatus.ERROR)
                or not compactor.alive()
            ),
            240,
            "the compaction on the cluster",
            interval_s=0.5,
        )
        state = store.get_compaction(ML)
        assert state.status == CompactionStatus.SUCCESS, (state.last_error, compactor.log()[-3000:])
    finally:
        compactor.stop(timeout_s=30)
    assert list(work_dir.glob("app-*/*")), "no executor ran on the worker"

    async def check() -> None:
        client = BookieLedgerClient()
        got = await compacted_view(store, client, ML)  # type: ignore[arg-type]
        await client.close()
        assert state.horizon is not None
        assert got == model(topic.written, MessageId(*state.horizon), "drop")
        assert len(got) == 12  # 13 keys, k0 deleted

    asyncio.run(check())
    store.close()
