"""Two ways to serve the API in tests.

- Live: a real server stack, a `quire bookie` process and a `quire broker` process on free ports,
  SQLite metadata in a temporary directory (PostgreSQL where a test asks for `metadata_url`).
  The live tests talk to it through the generated client (quire_client).
- In process (`served`, and the `env`/`client` fixtures): the app around the real TopicService
  over the in-memory ledger client and metadata store, called through httpx's ASGI transport.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import NamedTuple

import httpx
import pytest

from app.main import QuireApp, create_app
from managed_ledger.metadata.memory import InMemoryMetadataStore
from tests.kinds import kind
from tests.support import QuireProcess, free_port, port_open, wait_until
from tests.topics.conftest import Env, make_env
from topics.config import TopicsConfig

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
        try:
            self.bookie = QuireProcess(
                ["bookie", "--data-dir", str(bookie_dir), "--port", str(self.bookie_port)],
                self.env(),
                self.root / "bookie.log",
            ).start()
            self._wait(self.bookie, self.bookie_port, "bookie")
            self.start_broker()
        except BaseException:
            self.stop()  # a stack that failed to start leaves no process behind
            raise
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


@contextmanager
def postgres_stack(root: Path, postgres_url: str, **extra_env: str) -> Iterator[Stack]:
    """A bookie and a broker on a fresh PostgreSQL schema, stopped and the schema dropped on exit."""
    from tests.conftest import drop_postgres_schema, fresh_postgres_schema_url

    url, schema = fresh_postgres_schema_url(postgres_url)
    s = start_stack(root, url, **extra_env)
    try:
        yield s
    finally:
        s.stop()
        drop_postgres_schema(postgres_url, schema)


@pytest.fixture(scope="module")
@kind("live")
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


# --- in process: the app over the real TopicService on in-memory storage -----------------------

# Small limits, so the tests can cross each one cheaply.
LIMITS = TopicsConfig(
    max_message_size_bytes=1000, max_batch_size_bytes=5000, max_batch_messages=20, max_wait_ms=500
)


class Served(NamedTuple):
    env: Env
    app: QuireApp
    client: httpx.AsyncClient


@asynccontextmanager
async def served(config: TopicsConfig = LIMITS) -> AsyncIterator[Served]:
    """The app around a real TopicService (in-memory ledgers and metadata, a manual clock),
    with an httpx client that calls it in process; everything is closed on the way out."""
    env = await make_env(InMemoryMetadataStore(), config)
    app = create_app(env.service, close_topics=False)
    transport = httpx.ASGITransport(app=app, raise_app_exceptions=False)
    try:
        async with httpx.AsyncClient(transport=transport, base_url="http://quire") as client:
            yield Served(env, app, client)
    finally:
        await env.service.close()
        await env.factory.close()


@pytest.fixture
async def in_process() -> AsyncIterator[Served]:
    async with served() as s:
        yield s


@pytest.fixture
def env(in_process: Served) -> Env:
    return in_process.env


@pytest.fixture
def client(in_process: Served) -> httpx.AsyncClient:
    return in_process.client
