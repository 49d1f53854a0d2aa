"""A `quire standalone` with its Pulsar listener on free ports, for tests that drive it with the
`pulsar-client` library (one module-scoped process; every wait bounded)."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

from tests.conftest import drop_postgres_schema, fresh_postgres_schema_url
from tests.support import QuireProcess, free_port, wait_until
from tests.test_cli_standalone import free_port_run

START_TIMEOUT_S = 90.0
STORES = ["sqlite", "postgres"]  # the metadata stores the listener's tests run on
CLIENT_TIMEOUT_S = 30


@dataclass
class Standalone:
    process: QuireProcess
    http_port: int
    pulsar_port: int

    @property
    def http(self) -> str:
        return f"http://127.0.0.1:{self.http_port}"

    @property
    def service_url(self) -> str:
        return f"pulsar://127.0.0.1:{self.pulsar_port}"


def start_standalone(tmp_path: Path, env: dict[str, str] | None = None) -> Standalone:
    port, pulsar_port = free_port(), free_port()
    process = QuireProcess(
        [
            "standalone",
            "--data-dir",
            str(tmp_path / "data"),
            "--port",
            str(port),
            "--bookie-port",
            str(free_port_run(2)),
            "--pulsar-port",
            str(pulsar_port),
        ],
        {
            "QUIRE_HOST": "127.0.0.1",
            "QUIRE_BOOKIE_HOST": "127.0.0.1",
            "QUIRE_BOOKIE_METRICS_PORT": str(free_port_run(2)),
            "QUIRE_COMPACTOR_METRICS_PORT": str(free_port()),
            **(env or {}),
        },
        tmp_path / "standalone.log",
    ).start()

    def ready() -> bool:
        assert process.alive(), process.log()[-4000:]
        try:
            return httpx.get(f"http://127.0.0.1:{port}/readyz", timeout=2).status_code == 200
        except httpx.HTTPError:
            return False

    try:
        wait_until(ready, START_TIMEOUT_S, "standalone ready")
    except BaseException:
        process.stop()
        raise
    return Standalone(process, port, pulsar_port)


def serving(tmp_path: Path, env: dict[str, str] | None = None) -> Iterator[Standalone]:
    standalone = start_standalone(tmp_path, env)
    try:
        yield standalone
    finally:
        standalone.process.stop()


def serving_on(
    request: pytest.FixtureRequest, tmp_path: Path, env: dict[str, str] | None = None
) -> Iterator[Standalone]:
    """A standalone on the metadata store `request.param` names (STORES): its own SQLite file,
    or a fresh PostgreSQL schema dropped afterwards."""
    if request.param == "sqlite":
        yield from serving(tmp_path, env)
        return
    base = request.getfixturevalue("postgres_url")
    url, schema = fresh_postgres_schema_url(base)
    try:
        yield from serving(tmp_path, {**(env or {}), "QUIRE_DATABASE_URL": url})
    finally:
        drop_postgres_schema(base, schema)
