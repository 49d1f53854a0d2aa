"""A real server stack for the live API tests: a `quire bookie` process and a `quire broker`
process on free ports, SQLite metadata in a temporary directory (PostgreSQL where a test asks
for `metadata_url`). The tests talk to it through the generated client (quire_client)."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

from tests.support import QuireProcess, free_port, port_open, wait_until

START_TIMEOUT_S = 60.0


@dataclass
class Stack:
    """One bookie and one broker; `restart_broker` and `kill_broker` for the fault tests."""

    root: Path
    database_url: str
    bookie_port: int
    port: int
    extra_env: dict[str, str]
    bookie: QuireProcess | None = None
    broker: QuireProcess | None = None

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def env(self) -> dict[str, str]:
        return {
            "QUIRE_DATA_DIR": str(self.root),
            "QUIRE_DATABASE_URL": self.database_url,
            "QUIRE_BOOKIES": f'["127.0.0.1:{self.bookie_port}"]',
            "QUIRE_BOOKIE_PORT": str(self.bookie_port),
            "QUIRE_PORT": str(self.port),
            **self.extra_env,
        }

    def start(self) -> Stack:
        bookie_dir = self.root / "bookie"
        bookie_dir.mkdir(parents=True, exist_ok=True)
        self.bookie = QuireProcess(
            ["bookie", "--data-dir", str(bookie_dir), "--port", str(self.bookie_port)],
            self.env(),
            self.root / "bookie.log",
        ).start()
        self._wait(self.bookie, self.bookie_port, "bookie")
        self.start_broker()
        return self

    def start_broker(self) -> None:
        self.broker = QuireProcess(["broker"], self.env(), self.root / "broker.log").start()
        self._wait(self.broker, self.port, "broker")
        wait_until(self._ready, START_TIMEOUT_S, "broker /readyz")

    def _ready(self) -> bool:
        try:
            return httpx.get(f"{self.base_url}/readyz", timeout=2).status_code == 200
        except httpx.HTTPError:
            return False

    def _wait(self, process: QuireProcess, port: int, what: str) -> None:
        def up() -> bool:
            if not process.alive():
                raise RuntimeError(f"{what} exited at start:\n{process.log()[-3000:]}")
            return port_open(port)

        wait_until(up, START_TIMEOUT_S, f"{what} on port {port}")

    def kill_broker(self) -> None:
        assert self.broker is not None
        self.broker.kill9()
        self.broker.stop()

    def stop(self) -> None:
        for process in (self.broker, self.bookie):
            if process is not None:
                process.stop()


def start_stack(root: Path, database_url: str | None = None, **extra_env: str) -> Stack:
    url = database_url or f"sqlite:///{root / 'metadata.db'}"
    return Stack(root, url, free_port(), free_port(), dict(extra_env)).start()


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    s = start_stack(
        tmp_path_factory.mktemp("stack"),
        QUIRE_MAX_WAIT_MS="2000",
        QUIRE_MAX_MESSAGE_SIZE_BYTES="10000",
        QUIRE_MAX_BATCH_MESSAGES="1000",
        QUIRE_DEFAULT_ACK_TIMEOUT_MS="30000",
    )
    try:
        yield s
    finally:
        s.stop()


@pytest.fixture
def api(stack: Stack) -> Iterator[object]:
    from quire_client import Client

    with Client(base_url=stack.base_url, timeout=httpx.Timeout(30.0)) as client:
        yield client
