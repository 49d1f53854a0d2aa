"""Helpers the benchmarks share: free ports, an open-port probe, a percentile, and a real
`quire bookie` process."""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def port_open(port: int, timeout_s: float = 0.3) -> bool:
    with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), timeout=timeout_s):
        return True
    return False


def pct(xs: list[float], q: float) -> float:
    """The q-th percentile (0..100) of `xs`, nearest rank; NaN for no samples."""
    s = sorted(xs)
    return s[min(len(s) - 1, int(len(s) * q / 100))] if s else float("nan")


def start_bookie(data_dir: Path, port: int, log_path: Path) -> subprocess.Popen[bytes]:
    env = {**os.environ, "QUIRE_BOOKIE_HOST": "127.0.0.1"}
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
