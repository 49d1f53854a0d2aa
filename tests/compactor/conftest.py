"""Fixtures of the compactor tests: a real bookie process per module, one Spark session per module."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.kinds import kind
from tests.support import QuireProcess, free_port, port_open, wait_until


class Bookie:
    """A `quire bookie`; with `env` naming QUIRE_DATABASE_URL it registers in that metadata store
    (where a compactor process looks for live bookies to place its ledgers)."""

    def __init__(self, root: Path, env: dict[str, str] | None = None) -> None:
        self.port = free_port()
        root.mkdir(parents=True, exist_ok=True)
        self.process = QuireProcess(
            ["bookie", "--data-dir", str(root / "data"), "--port", str(self.port)],
            env or {},
            root / "bookie.log",
        )

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    def start(self) -> Bookie:
        self.process.start()
        try:
            wait_until(lambda: port_open(self.port) or not self.process.alive(), 30, "the bookie to listen")
        except TimeoutError:
            self.process.stop()
            raise
        assert self.process.alive(), self.process.log()
        return self

    def stop(self) -> None:
        self.process.stop()


@pytest.fixture(scope="module")
@kind("process")
def bookie(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Bookie]:
    b = Bookie(tmp_path_factory.mktemp("bookie")).start()
    try:
        yield b
    finally:
        b.stop()
