"""Helpers the benchmarks share: a percentile, a real `quire bookie` process and the bookie
client config to talk to it. Processes, ports, waits and PostgreSQL schemas are
`devtools.procs`' and `devtools.postgres`'; their names are kept here for the benchmarks."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

from devtools.postgres import create_schema, drop_schema
from devtools.postgres import execute as postgres_sql
from devtools.procs import HOST, REPO, Proc, free_port, port_open, wait_ready

if TYPE_CHECKING:
    from bookie.connection import BookieClientConfig

__all__ = [
    "REPO",
    "bookie_client_config",
    "create_schema",
    "drop_schema",
    "free_port",
    "pct",
    "port_open",
    "postgres_sql",
    "scraping",
    "start_bookie",
    "stop_bookie",
    "wait_ready",
]


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


def start_bookie(data_dir: Path, port: int, log_path: Path) -> Proc:
    """A `quire bookie` on `port`, listening when this returns (SystemExit with its log if not)."""
    args = ["bookie", "--data-dir", str(data_dir), "--port", str(port)]
    proc = Proc.quire(args, {"QUIRE_BOOKIE_HOST": HOST}, log_path).start()
    try:
        proc.wait_port(port, "bookie", timeout_s=30)
    except (RuntimeError, TimeoutError) as exc:
        proc.stop()
        raise SystemExit(f"bookie did not start: {exc}\n{proc.log()}") from None
    return proc


def stop_bookie(proc: Proc) -> None:
    proc.stop()


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
