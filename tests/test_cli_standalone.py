"""`quire standalone`: starts a bookie and a broker (and the compactor when it exists) as child
processes, serves the API, and stops every child on SIGTERM; a child that dies stops the whole
standalone with exit code 1."""

from __future__ import annotations

import os
import re
import signal
from pathlib import Path

import httpx
import psutil

from tests.support import QuireProcess, free_port, wait_until

START_TIMEOUT_S = 90.0


def start(tmp_path: Path) -> tuple[QuireProcess, int]:
    port, bookie_port = free_port(), free_port()
    proc = QuireProcess(
        [
            "standalone",
            "--data-dir",
            str(tmp_path / "data"),
            "--port",
            str(port),
            "--bookie-port",
            str(bookie_port),
        ],
        {},
        tmp_path / "standalone.log",
    ).start()

    def ready() -> bool:
        assert proc.alive(), proc.log()
        try:
            return httpx.get(f"http://127.0.0.1:{port}/readyz", timeout=2).status_code == 200
        except httpx.HTTPError:
            return False

    wait_until(ready, START_TIMEOUT_S, "standalone ready")
    return proc, port


def children(proc: QuireProcess) -> dict[str, int]:
    return {name: int(pid) for name, pid in re.findall(r"started (\w+) \(pid (\d+)\)", proc.log())}


def test_standalone_serves_and_stops_every_child_on_sigterm(tmp_path: Path) -> None:
    proc, port = start(tmp_path)
    kids = children(proc)
    assert {"bookie", "broker"} <= kids.keys()
    r = httpx.post(
        f"http://127.0.0.1:{port}/v1/topics/public/default/t/messages", json={"messages": [{"value": "x"}]}
    )
    assert r.status_code == 200
    assert (tmp_path / "data" / "metadata.db").exists()
    os.kill(proc.pid, signal.SIGTERM)
    assert proc.proc is not None and proc.proc.wait(timeout=60) == 0
    for name, pid in kids.items():
        assert not psutil.pid_exists(pid) or psutil.Process(pid).status() == psutil.STATUS_ZOMBIE, name
    proc.stop()


def test_a_dead_child_stops_the_standalone_with_exit_1(tmp_path: Path) -> None:
    proc, _ = start(tmp_path)
    kids = children(proc)
    os.kill(kids["bookie"], signal.SIGKILL)
    assert proc.proc is not None and proc.proc.wait(timeout=60) == 1
    assert "bookie" in proc.log() and "exited with code" in proc.log()
    assert (
        not psutil.pid_exists(kids["broker"])
        or psutil.Process(kids["broker"]).status() == psutil.STATUS_ZOMBIE
    )
    proc.stop()
