"""A port that is taken ends a process with one line naming the setting to change and exit code
2, never a traceback: for every listener of every process (`app/listen.py`), and for
`quire standalone` before it starts anything.

Each case holds a port with a listening socket of its own, runs the real command on it, and
reads what the command printed."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support import REPO, free_port

pytestmark = [pytest.mark.process, pytest.mark.timeout(120)]


@pytest.fixture
def taken() -> Iterator[int]:
    """A port another process listens on."""
    with socket.create_server(("127.0.0.1", 0)) as holder:
        yield holder.getsockname()[1]


def _run(
    args: list[str], tmp_path: Path, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    full_env = {
        **os.environ,
        "QUIRE_HOST": "127.0.0.1",
        "QUIRE_BOOKIE_HOST": "127.0.0.1",
        "QUIRE_KAFKA_PORT": "0",
        "QUIRE_PULSAR_PORT": "0",
        "QUIRE_BOOKIE_WAIT_TIMEOUT_MS": "60000",  # a broker that got past its ports would wait
        **(env or {}),
    }
    return subprocess.run(
        [sys.executable, "-m", "app.cli", *args, "--data-dir", str(tmp_path / "data")],
        cwd=REPO,
        env=full_env,
        capture_output=True,
        text=True,
        timeout=90,
    )


def _assert_one_line(done: subprocess.CompletedProcess[str], port: int, setting: str) -> None:
    out = done.stdout + done.stderr
    assert done.returncode == 2, out
    assert "Traceback" not in out, out
    lines = [line for line in done.stderr.splitlines() if "cannot listen" in line]
    assert len(lines) == 1, out
    assert f":{port} " in lines[0] and setting in lines[0] and "in use" in lines[0], lines[0]


def test_broker_http_port(taken: int, tmp_path: Path) -> None:
    _assert_one_line(_run(["broker", "--port", str(taken)], tmp_path), taken, "QUIRE_PORT (--port)")


def test_broker_kafka_port(taken: int, tmp_path: Path) -> None:
    args = ["broker", "--port", str(free_port()), "--kafka-port", str(taken)]
    _assert_one_line(_run(args, tmp_path), taken, "QUIRE_KAFKA_PORT (--kafka-port")


def test_broker_pulsar_port(taken: int, tmp_path: Path) -> None:
    args = ["broker", "--port", str(free_port()), "--pulsar-port", str(taken)]
    _assert_one_line(_run(args, tmp_path), taken, "QUIRE_PULSAR_PORT (--pulsar-port")


def test_bookie_port(taken: int, tmp_path: Path) -> None:
    _assert_one_line(_run(["bookie", "--port", str(taken)], tmp_path), taken, "QUIRE_BOOKIE_PORT (--port)")


def test_bookie_metrics_port(taken: int, tmp_path: Path) -> None:
    args = ["bookie", "--port", str(free_port()), "--metrics-port", str(taken)]
    _assert_one_line(_run(args, tmp_path), taken, "QUIRE_BOOKIE_METRICS_PORT (--metrics-port)")


def test_autorecovery_port(taken: int, tmp_path: Path) -> None:
    _assert_one_line(_run(["autorecovery", "--port", str(taken)], tmp_path), taken, "QUIRE_PORT (--port)")


@pytest.mark.spark
def test_compactor_metrics_port(taken: int, tmp_path: Path) -> None:
    args = ["compactor", "--metrics-port", str(taken)]
    _assert_one_line(_run(args, tmp_path), taken, "QUIRE_COMPACTOR_METRICS_PORT (--metrics-port)")


@pytest.mark.parametrize(
    ("flag", "setting"),
    [
        ("--port", "QUIRE_PORT (--port)"),
        ("--kafka-port", "QUIRE_KAFKA_PORT (--kafka-port"),
        ("--pulsar-port", "QUIRE_PULSAR_PORT (--pulsar-port"),
        ("--bookie-port", "QUIRE_BOOKIE_PORT (--bookie-port)"),
    ],
)
def test_standalone_refuses_before_starting_anything(
    flag: str, setting: str, taken: int, tmp_path: Path
) -> None:
    ports = {"--port": free_port(), "--kafka-port": free_port(), "--bookie-port": free_port(), flag: taken}
    ports.setdefault("--pulsar-port", free_port())
    args = ["standalone", *(f"{k}={v}" for k, v in ports.items())]
    env = {"QUIRE_BOOKIE_METRICS_PORT": str(free_port()), "QUIRE_COMPACTOR_METRICS_PORT": str(free_port())}
    done = _run(args, tmp_path, env)
    _assert_one_line(done, taken, setting)
    assert "started" not in done.stdout + done.stderr  # no child was spawned
