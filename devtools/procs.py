"""Child processes for tests and benchmarks: each in a session of its own, with a log file,
stopped by process group (SIGTERM, then SIGKILL after a bounded wait); free loopback ports and
bounded waits.

A process started here never outlives its owner's `stop`: the group gets SIGKILL at the end even
when the leader already exited, so a grandchild (Spark's JVM, a worker) goes too.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import IO, Self

REPO = Path(__file__).resolve().parent.parent
HOST = "127.0.0.1"
START_TIMEOUT_S = 90.0  # a loaded two-core machine starts a broker in a few seconds, at worst ~30
STOP_TIMEOUT_S = 15.0


def free_port() -> int:
    """A loopback port nobody listens on right now."""
    with socket.socket() as s:
        s.bind((HOST, 0))
        return int(s.getsockname()[1])


def port_open(port: int, host: str = HOST, timeout_s: float = 0.2) -> bool:
    with contextlib.suppress(OSError), socket.create_connection((host, port), timeout=timeout_s):
        return True
    return False


def wait_until(predicate: Callable[[], bool], timeout_s: float, what: str, interval_s: float = 0.05) -> None:
    """Until `predicate()` is true; TimeoutError naming `what` past `timeout_s`. An exception the
    predicate raises (a process that died, say) ends the wait at once."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(interval_s)
    raise TimeoutError(f"timed out after {timeout_s:g}s waiting for {what}")


def ready(base_url: str) -> bool:
    """Whether the broker at `base_url` answers /readyz with 200."""
    import httpx

    try:
        return httpx.get(f"{base_url}/readyz", timeout=2).status_code == 200
    except httpx.HTTPError:
        return False


def wait_ready(base_url: str, timeout_s: float = START_TIMEOUT_S) -> None:
    """Until the broker at `base_url` answers /readyz 200 (TimeoutError past `timeout_s`)."""
    wait_until(lambda: ready(base_url), timeout_s, f"{base_url}/readyz", interval_s=0.1)


class Proc:
    """One child process: `command` run in `cwd`, the environment of this process overlaid with
    `env`, stdout and stderr appended to `log_path`, in a session of its own."""

    def __init__(
        self, command: Sequence[str], env: Mapping[str, str], log_path: Path, cwd: Path = REPO
    ) -> None:
        self.command = list(command)
        self.env = dict(env)
        self.log_path = log_path
        self.cwd = cwd
        self.proc: subprocess.Popen[bytes] | None = None
        self._log: IO[bytes] | None = None

    @classmethod
    def quire(cls, args: Sequence[str], env: Mapping[str, str], log_path: Path) -> Self:
        """`quire <args>` on this checkout's code (`python -m app.cli` from the repository, which
        comes first on its PYTHONPATH, before an installed Quire)."""
        path = os.pathsep.join(p for p in (str(REPO), os.environ.get("PYTHONPATH", "")) if p)
        return cls([sys.executable, "-m", "app.cli", *args], {"PYTHONPATH": path, **env}, log_path)

    def start(self) -> Self:
        # No Kafka or Pulsar listener unless asked for: the default ports would clash between processes.
        full_env = {"QUIRE_KAFKA_PORT": "0", "QUIRE_PULSAR_PORT": "0", **os.environ, **self.env}
        assert not self.alive(), f"{self.command} is running already"
        if self._log is not None:  # started before: the same command again, the same log
            self._log.close()
        self._log = open(self.log_path, "ab")  # noqa: SIM115 - closed in stop()
        self.proc = subprocess.Popen(
            self.command,
            env=full_env,
            cwd=self.cwd,
            stdout=self._log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        return self

    @property
    def pid(self) -> int:
        assert self.proc is not None, "not started"
        return self.proc.pid

    @property
    def returncode(self) -> int | None:
        return None if self.proc is None else self.proc.poll()

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def signal(self, sig: int) -> None:
        """`sig` to the whole process group (nothing if it is gone)."""
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.pid, sig)

    def wait(self, timeout_s: float = STOP_TIMEOUT_S) -> int:
        assert self.proc is not None, "not started"
        return self.proc.wait(timeout=timeout_s)

    def kill9(self) -> None:
        if self.alive():
            self.signal(signal.SIGKILL)
            self.wait()

    def stop(self, timeout_s: float = STOP_TIMEOUT_S) -> int | None:
        """SIGTERM to the group, SIGKILL if it is still there after `timeout_s`; its exit code."""
        if self.proc is None:
            return None
        if self.alive():
            self.signal(signal.SIGCONT)  # a paused process cannot act on SIGTERM
            self.signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=timeout_s)
            except subprocess.TimeoutExpired:
                self.kill9()
        self.signal(signal.SIGKILL)  # any grandchildren left behind
        self._wait_group_gone(timeout_s)
        if self._log is not None:
            self._log.close()
        return self.proc.returncode

    def _wait_group_gone(self, timeout_s: float) -> None:
        """Until no process of the group is left (a killed grandchild, such as the compactor's
        Spark JVM, exits a moment after the SIGKILL), bounded by `timeout_s`."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            try:
                os.killpg(self.pid, 0)
            except ProcessLookupError:
                return
            time.sleep(0.05)

    def log(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""

    def wait_port(self, port: int, what: str, timeout_s: float = START_TIMEOUT_S) -> None:
        """Until something listens on `port`; RuntimeError with the log's tail if this process
        exits first."""

        def up() -> bool:
            if not self.alive():
                raise RuntimeError(f"{what} exited with {self.returncode} at start:\n{self.log()[-3000:]}")
            return port_open(port)

        wait_until(up, timeout_s, f"{what} on port {port}")

    def wait_ready(self, base_url: str, what: str, timeout_s: float = START_TIMEOUT_S) -> None:
        """Until the broker this process is answers /readyz 200; RuntimeError if it exits first."""

        def up() -> bool:
            if not self.alive():
                raise RuntimeError(f"{what} exited with {self.returncode} at start:\n{self.log()[-3000:]}")
            return ready(base_url)

        wait_until(up, timeout_s, f"{what} /readyz", interval_s=0.1)


@contextlib.contextmanager
def running(process: Proc) -> Iterator[Proc]:
    """Start `process`; stop it on the way out, whatever happened."""
    process.start()
    try:
        yield process
    finally:
        process.stop()
