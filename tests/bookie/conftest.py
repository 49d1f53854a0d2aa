"""Bookies for the bookie tests: an in-process server on the in-memory storage (fast unit tests,
in a thread of its own so that blocking raw-socket tests can talk to it) and real
`quire bookie` processes on the real engine (process, contract and fault tests)."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from bookie.server import BookieServer, ServerConfig
from tests.bookie.fakes import MemoryStorage
from tests.kinds import kind
from tests.support import QuireProcess, free_port, port_open, wait_until

START_TIMEOUT_S = 30.0


class ThreadBookie:
    """A BookieServer on MemoryStorage, running its own event loop in a daemon thread."""

    def __init__(self, config: ServerConfig) -> None:
        self.storage = MemoryStorage()
        self.config = config
        self.loop = asyncio.new_event_loop()
        self.server = BookieServer(self.storage, config)
        self._thread = threading.Thread(target=self.loop.run_forever, daemon=True)

    def start(self) -> ThreadBookie:
        self._thread.start()
        asyncio.run_coroutine_threadsafe(self.server.start(), self.loop).result(timeout=10)
        return self

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.server.port}"

    @property
    def port(self) -> int:
        return self.server.port

    def stop(self) -> None:
        asyncio.run_coroutine_threadsafe(self.server.close(drain_timeout_s=2), self.loop).result(timeout=10)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(timeout=10)
        self.loop.close()


@pytest.fixture
def memory_bookie() -> Iterator[ThreadBookie]:
    bookie = ThreadBookie(
        ServerConfig(port=0, max_frame_bytes=1024 * 1024, max_requests_in_flight=64)
    ).start()
    try:
        yield bookie
    finally:
        bookie.stop()


class BookieProcess:
    """A real `quire bookie` process; restartable on the same data dir and port."""

    def __init__(self, data_dir: Path, log_path: Path, env: dict[str, str] | None = None) -> None:
        self.data_dir = data_dir
        self.port = free_port()
        self.log_path = log_path
        self.env = env or {}
        self.process: QuireProcess | None = None

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    def start(self) -> BookieProcess:
        args = ["bookie", "--data-dir", str(self.data_dir), "--port", str(self.port)]
        self.process = QuireProcess(
            args, {"QUIRE_BOOKIE_HOST": "127.0.0.1", **self.env}, self.log_path
        ).start()
        try:
            wait_until(lambda: port_open(self.port) or not self.alive(), START_TIMEOUT_S, "bookie port")
        except TimeoutError:
            self.stop()
            raise
        if not self.alive():
            raise RuntimeError(f"bookie exited at start:\n{self.log()}")
        return self

    def alive(self) -> bool:
        return self.process is not None and self.process.alive()

    def kill9(self) -> None:
        assert self.process is not None
        self.process.kill9()
        self.process.stop()

    def stop(self) -> int | None:
        return self.process.stop() if self.process is not None else None

    def log(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""


def start_bookie_process(
    tmp_path: Path, name: str = "bookie", env: dict[str, str] | None = None
) -> BookieProcess:
    return BookieProcess(tmp_path / name, tmp_path / f"{name}.log", env).start()


@pytest.fixture
@kind("process")
def bookie_process(tmp_path: Path) -> Iterator[BookieProcess]:
    bookie = start_bookie_process(tmp_path)
    try:
        yield bookie
    finally:
        bookie.stop()
