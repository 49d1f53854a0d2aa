"""Helpers the benchmarks share: free ports, an open-port probe, a percentile, a real
`quire bookie` process, and the bookie client config to talk to it."""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from bookie.connection import BookieClientConfig

REPO = Path(__file__).resolve().parent.parent


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def port_open(port: int, timeout_s: float = 0.3) -> bool:
    with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), timeout=timeout_s):
        return True
    return False


def bookie_client_config(**overrides: object) -> BookieClientConfig:
    """A bench's own bookie client config, with the bookie door of the settings in the
    environment (QUIRE_BOOKIE_AUTH_SECRET, QUIRE_BOOKIE_TLS_*): the bookies a bench starts inherit
    that environment, so with it set a bench runs, and measures, with the door closed."""
    from app.settings import Settings
    from app.wiring import bookie_client_security
    from bookie.connection import BookieClientConfig

    return BookieClientConfig(security=bookie_client_security(Settings()), **overrides)  # type: ignore[arg-type]


def pct(xs: list[float], q: float) -> float:
    """The q-th percentile (0..100) of `xs`, nearest rank; NaN for no samples."""
    s = sorted(xs)
    return s[min(len(s) - 1, int(len(s) * q / 100))] if s else float("nan")


def postgres_sql(base_url: str, sql: str) -> None:
    """One statement on the PostgreSQL server of a metadata URL (autocommit)."""
    import psycopg

    dsn = base_url.replace("postgresql+psycopg://", "postgresql://")
    with psycopg.connect(dsn, autocommit=True, connect_timeout=10) as conn:
        conn.execute(sql)


def create_schema(base_url: str, prefix: str) -> tuple[str, str]:
    """A new, empty schema; the metadata URL whose connections use it (search_path), and its name."""
    schema = f"{prefix}_{uuid.uuid4().hex[:12]}"
    postgres_sql(base_url, f'CREATE SCHEMA "{schema}"')
    sep = "&" if "?" in base_url else "?"
    return f"{base_url}{sep}options=-csearch_path%3D{schema}", schema


def drop_schema(base_url: str, schema: str) -> None:
    postgres_sql(base_url, f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')


def start_bookie(data_dir: Path, port: int, log_path: Path) -> subprocess.Popen[bytes]:
    env = {"QUIRE_KAFKA_PORT": "0", "QUIRE_PULSAR_PORT": "0", **os.environ, "QUIRE_BOOKIE_HOST": "127.0.0.1"}
    with open(log_path, "ab") as log:
        proc = subprocess.Popen(
            [sys.executable, "-m", "app.cli", "bookie", "--data-dir", str(data_dir), "--port", str(port)],
            cwd=REPO,
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        if port_open(port, 0.2):
            return proc
        if proc.poll() is not None:
            break
        time.sleep(0.05)
    proc.kill()
    raise SystemExit(f"bookie did not start:\n{log_path.read_text(errors='replace')}")


def stop_bookie(proc: subprocess.Popen[bytes]) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGTERM)
    try:
        proc.wait(timeout=15)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=10)


def wait_ready(base_url: str, timeout_s: float = 90) -> None:
    """Until the broker at `base_url` answers /readyz 200 (TimeoutError past `timeout_s`)."""
    import httpx

    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        with contextlib.suppress(httpx.HTTPError):
            if httpx.get(f"{base_url}/readyz").status_code == 200:
                return
        time.sleep(0.2)
    raise TimeoutError(f"{base_url} not ready")


@contextlib.contextmanager
def scraping(url: str, interval_s: float, counts: dict[str, int]) -> Iterator[None]:
    """GET the Prometheus `url` every `interval_s` while the block runs (Prometheus scrapes every
    15 s by default), so a benchmark measures with the metrics in use; `counts` gets the number
    of scrapes and of topic-labelled samples in the last one."""
    import threading

    import httpx

    stop = threading.Event()

    def loop() -> None:
        with httpx.Client(timeout=10) as client:
            while not stop.wait(interval_s):
                with contextlib.suppress(httpx.HTTPError):
                    text = client.get(url).text
                    counts["count"] = counts.get("count", 0) + 1
                    counts["series"] = text.count('topic="')

    thread = threading.Thread(target=loop, name="scraper", daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join(timeout=15)
