"""The campaign's child processes: each in a session of its own, stopped by process group.

A `Proc` is one long-lived role (bookie 1, broker 0, the compactor, PostgreSQL) that may be
started many times: every fault that kills it is followed by a start of the same command on the
same port and data directory. Processes are spawned from the thread that runs the event loop
(never from a worker thread): each child asks the kernel for SIGKILL when its parent thread
dies (PR_SET_PDEATHSIG), so a campaign killed outright leaves no process behind either.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path

from bench.common import REPO, port_open

HOST = "127.0.0.1"
STOP_WAIT_S = 15.0


def _die_with_parent() -> None:
    """In the child, before exec: SIGKILL when the campaign's thread dies (Linux only)."""
    with contextlib.suppress(Exception):
        import ctypes

        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG


class Proc:
    """One role of the cluster; `start` (re)spawns it, the other methods signal its group."""

    def __init__(
        self,
        name: str,
        args: Sequence[str],
        env: dict[str, str],
        log: Path,
        port: int | None,
        user: str | None = None,
        host: str = HOST,
    ) -> None:
        self.name = name
        self.args = list(args)
        self.env = env
        self.log = log
        self.port = port
        self.user = user
        self.host = host  # where `port` listens (a bookie in a network namespace: its address)
        self.popen: subprocess.Popen[bytes] | None = None
        self.stopped = False  # SIGSTOP sent and no SIGCONT yet

    def start(self, extra_args: Sequence[str] = (), extra_env: dict[str, str] | None = None) -> None:
        """Spawn it; `extra_env` for this start only (a skewed clock, say)."""
        assert not self.alive(), f"{self.name} is running"
        extra_env = extra_env or {}
        with open(self.log, "ab") as out:
            started = f"start {self.name} at {time.time():.3f} {extra_env or ''}"
            out.write(f"\n===== chaos: {started} =====\n".encode())
            out.flush()
            self.popen = subprocess.Popen(
                [*self.args, *extra_args],
                cwd=REPO,
                env={
                    "QUIRE_KAFKA_PORT": "0",
                    "QUIRE_PULSAR_PORT": "0",
                    **os.environ,
                    **self.env,
                    **extra_env,
                },  # no port clash
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
                preexec_fn=_die_with_parent,
                user=self.user,
            )
        self.stopped = False

    def alive(self) -> bool:
        return self.popen is not None and self.popen.poll() is None

    def signal_group(self, sig: int) -> None:
        if self.popen is not None:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(self.popen.pid, sig)

    def kill9(self) -> None:
        self.signal_group(signal.SIGKILL)
        if self.popen is not None:
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.popen.wait(timeout=STOP_WAIT_S)
        self.stopped = False

    def pause(self) -> None:
        self.signal_group(signal.SIGSTOP)
        self.stopped = True

    def resume(self) -> None:
        self.signal_group(signal.SIGCONT)
        self.stopped = False

    def terminate(self, sig: int = signal.SIGTERM, wait_s: float = STOP_WAIT_S) -> int | None:
        """`sig` to the group (after a SIGCONT, so a paused one can act on it), then SIGKILL."""
        if self.popen is None:
            return None
        if self.alive():
            self.signal_group(signal.SIGCONT)
            self.signal_group(sig)
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.popen.wait(timeout=wait_s)
        self.signal_group(signal.SIGKILL)  # the leader may be gone while its group is not
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.popen.wait(timeout=STOP_WAIT_S)
        self.stopped = False
        return self.popen.returncode

    def tail(self, chars: int = 3000) -> str:
        if not self.log.exists():
            return ""
        with open(self.log, "rb") as f:
            f.seek(max(0, self.log.stat().st_size - chars))
            return f.read().decode(errors="replace")

    async def wait_port(self, timeout_s: float) -> None:
        """Until the port takes connections; raise (with the log's tail) if the process exits."""
        assert self.port is not None
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if not self.alive():
                code = None if self.popen is None else self.popen.returncode
                raise RuntimeError(f"{self.name} exited with {code}:\n{self.tail()}")
            if await asyncio.to_thread(port_open, self.port, self.host):
                return
            await asyncio.sleep(0.1)
        raise TimeoutError(f"{self.name} did not listen on {self.port} within {timeout_s:g} s")


def quire_args(process: str, *extra: str) -> list[str]:
    return [sys.executable, "-m", "app.cli", process, *extra]
