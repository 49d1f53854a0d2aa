"""The compactor's Spark session: created once, kept warm between runs, quiet, UI off.

`QUIRE_SPARK_MASTER` (CompactorConfig.spark_master) picks the master: `local[*]` by default, or
`spark://host:7077`, `yarn`, `k8s://...`. Executors on other machines do not have Quire
installed, so the driver zips Quire's own packages (every layer up to the compactor: a task's
imports reach down to `common`) and ships the zip with `SparkContext.addPyFile`. Python workers
run this interpreter (PYSPARK_PYTHON), which must have pyarrow and msgpack wherever executors run.

The session's work directory (its log4j2 configuration, Spark's local dir, the zip) is
`$TMPDIR/quire-spark-<pid>-*`: removed when the process exits, and a directory whose process is
gone (killed with -9) is removed by the next compactor that starts on the machine.
"""

from __future__ import annotations

import atexit
import logging
import os
import shutil
import sys
import tempfile
import threading
import zipfile
from pathlib import Path
from typing import TYPE_CHECKING

from compactor.config import CompactorConfig

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

log = logging.getLogger(__name__)
# Every package below app/: shipping one that a task does not import costs a few kilobytes, missing
# one fails every task on a real cluster (local[*] would not notice: it shares the driver's path).
SHIPPED_PACKAGES = ("common", "bookie", "managed_ledger", "topics", "quire_spark", "compactor")
REPO_ROOT = Path(__file__).resolve().parent.parent
_QUIET_LOG4J2 = """\
rootLogger.level = error
logger.repl.name = org.apache.spark.repl.Main
logger.repl.level = error
logger.gateway.name = org.apache.spark.api.python.PythonGatewayServer
logger.gateway.level = error
rootLogger.appenderRef.stderr.ref = stderr
appender.stderr.type = Console
appender.stderr.name = stderr
appender.stderr.target = SYSTEM_ERR
appender.stderr.layout.type = PatternLayout
appender.stderr.layout.pattern = %d{HH:mm:ss} %p %c{1}: %m%n
"""

_lock = threading.Lock()
_session: SparkSession | None = None
_work_dir: Path | None = None


def zip_packages(dest: Path) -> Path:
    """A zip of Quire's packages a Spark task imports (sources only, no caches)."""
    path = dest / "quire-code.zip"
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as zf:
        for package in SHIPPED_PACKAGES:
            for file in sorted((REPO_ROOT / package).rglob("*.py")):
                zf.write(file, file.relative_to(REPO_ROOT).as_posix())
    return path


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _sweep_work_dirs() -> None:
    """Remove the work directories of compactors that are gone."""
    for path in Path(tempfile.gettempdir()).glob("quire-spark-*-*"):
        pid = path.name.split("-")[2]
        if pid.isdigit() and int(pid) != os.getpid() and not _alive(int(pid)):
            shutil.rmtree(path, ignore_errors=True)


def _work() -> Path:
    global _work_dir
    if _work_dir is None:
        _sweep_work_dirs()
        _work_dir = Path(tempfile.mkdtemp(prefix=f"quire-spark-{os.getpid()}-"))
        atexit.register(shutil.rmtree, _work_dir, True)
        (_work_dir / "conf").mkdir()
        (_work_dir / "conf" / "log4j2.properties").write_text(_QUIET_LOG4J2)
    return _work_dir


def _master_is_loopback(master: str) -> bool:
    return master.startswith("local") or any(h in master for h in ("//127.0.0.1:", "//localhost:"))


def _defaults(config: CompactorConfig, work: Path) -> dict[str, str]:
    java_opts = f"-Dlog4j2.configurationFile=file:{work / 'conf' / 'log4j2.properties'}"
    return {
        "spark.ui.enabled": "false",
        "spark.ui.showConsoleProgress": "false",
        "spark.sql.shuffle.partitions": "4",
        "spark.sql.adaptive.enabled": "false",  # partitions are sized by the job; AQE only adds jobs
        "spark.driver.extraJavaOptions": java_opts,
        "spark.executor.extraJavaOptions": java_opts,
        "spark.executorEnv.PYSPARK_PYTHON": sys.executable,
        "spark.python.worker.reuse": "true",
        "spark.local.dir": str(work / "local"),
        # a master on this machine (local[*], or a test's standalone cluster) talks over loopback
        "spark.driver.host": "127.0.0.1" if _master_is_loopback(config.spark_master) else "",
        "spark.sql.execution.arrow.maxRecordsPerBatch": "10000",
    }


def get_session(config: CompactorConfig) -> SparkSession:
    """The warm session (created on first use; again if it was stopped)."""
    global _session
    with _lock:
        if _session is not None and _session.sparkContext._jsc is not None:
            return _session
        from pyspark.sql import SparkSession

        os.environ["PYSPARK_PYTHON"] = sys.executable
        os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
        work = _work()
        # spark-submit puts SPARK_CONF_DIR on the driver's classpath: our quiet log4j2.properties
        # is read before the first log line (extraJavaOptions alone come too late for that)
        os.environ.setdefault("SPARK_CONF_DIR", str(work / "conf"))
        builder = SparkSession.builder.master(config.spark_master).appName("quire-compactor")
        settings = {**_defaults(config, work), **dict(config.spark_conf)}
        for key, value in settings.items():
            if value:
                builder = builder.config(key, value)
        session = builder.getOrCreate()
        session.sparkContext.setLogLevel("ERROR")
        session.sparkContext.addPyFile(str(zip_packages(work)))
        from quire_spark import QuireDataSource

        session.dataSource.register(QuireDataSource)  # format "quire" in the compactor's session too
        log.info("spark session up: master %s", config.spark_master)
        _session = session
        return session


def stop_session() -> None:
    """Stop the warm session. One still being created (a stop during the warm-up) is left to
    end with the process: waiting for the lock would sit through the JVM's start."""
    global _session
    if not _lock.acquire(blocking=False):
        return
    try:
        if _session is not None:
            _session.stop()
            _session = None
    finally:
        _lock.release()
