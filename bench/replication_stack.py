"""The processes `make bench-replication` starts: Quire bookies, a broker and an autorecovery
process sharing one SQLite metadata store, and a three-server NATS JetStream cluster.

Every process runs in a session of its own and is stopped by process group (SIGTERM, then
SIGKILL after a bounded wait) when its `Stack` closes, on success and on error alike, so
nothing the benchmark started outlives it. Every port is a free loopback port picked at start.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from types import TracebackType
from typing import Self

from bench.common import REPO, free_port, wait_ready

HOST = "127.0.0.1"
START_TIMEOUT_S = 90.0
STOP_TIMEOUT_S = 15.0

# Short heartbeats so that a bookie killed with -9 shows as down within two seconds: the
# re-replication row times the copying, not the default ten-second failure detection.
FAST_HEARTBEAT = {"QUIRE_BOOKIE_HEARTBEAT_INTERVAL_MS": "200", "QUIRE_BOOKIE_HEARTBEAT_TIMEOUT_MS": "2000"}
FAST_RECOVERY = {
    "QUIRE_AUTORECOVERY_LOST_BOOKIE_GRACE_MS": "500",
    "QUIRE_AUTORECOVERY_AUDIT_INTERVAL_MS": "200",
    "QUIRE_AUTORECOVERY_LEASE_MS": "2000",
    "QUIRE_AUTORECOVERY_CLAIM_MS": "10000",
    "QUIRE_AUTORECOVERY_OPEN_LEDGER_GRACE_MS": "500",
    "QUIRE_AUTORECOVERY_POLL_INTERVAL_MS": "100",
}


def wait_port(port: int, proc: subprocess.Popen[bytes], what: str, log: Path) -> None:
    deadline = time.monotonic() + START_TIMEOUT_S
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            tail = log.read_text(errors="replace")[-2000:]
            raise RuntimeError(f"{what} exited with {proc.returncode}:\n{tail}")
        with contextlib.suppress(OSError), socket.create_connection((HOST, port), timeout=0.2):
            return
        time.sleep(0.1)
    raise TimeoutError(f"{what} did not listen on {port} within {START_TIMEOUT_S:g} s")


def stop_group(proc: subprocess.Popen[bytes]) -> None:
    """SIGTERM to the process group, SIGKILL if it is still there after STOP_TIMEOUT_S."""
    if proc.poll() is None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGTERM)
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(timeout=STOP_TIMEOUT_S)
    # The leader may be gone while a child of its group is not: the group gets SIGKILL anyway.
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGKILL)
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(timeout=STOP_TIMEOUT_S)


class Stack:
    """The processes of one row (or of the JetStream peer), stopped together on exit."""

    def __init__(self, tmp: Path, env: dict[str, str] | None = None) -> None:
        self.tmp = tmp
        self.tmp.mkdir(parents=True, exist_ok=True)
        self.db_url = f"sqlite:///{tmp / 'metadata.db'}"
        self.env = {"QUIRE_DATABASE_URL": self.db_url, "QUIRE_BOOKIE_HOST": HOST, **(env or {})}
        self.procs: list[subprocess.Popen[bytes]] = []
        self.bookies: dict[str, subprocess.Popen[bytes]] = {}

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    def close(self) -> None:
        for proc in reversed(self.procs):
            stop_group(proc)
        self.procs.clear()

    def spawn(
        self, args: list[str], port: int, name: str, env: dict[str, str] | None = None
    ) -> subprocess.Popen[bytes]:
        log = self.tmp / f"{name}.log"
        with open(log, "ab") as out:
            proc = subprocess.Popen(
                args,
                cwd=REPO,
                stdout=out,
                stderr=subprocess.STDOUT,
                env={
                    "QUIRE_KAFKA_PORT": "0",
                    "QUIRE_PULSAR_PORT": "0",
                    **os.environ,
                    **self.env,
                    **(env or {}),
                },
                start_new_session=True,
            )
        self.procs.append(proc)
        wait_port(port, proc, name, log)
        return proc

    def quire(
        self, process: str, port: int, name: str, *extra: str, env: dict[str, str] | None = None
    ) -> subprocess.Popen[bytes]:
        args = [sys.executable, "-m", "app.cli", process, "--port", str(port), *extra]
        return self.spawn(args, port, name, env)

    def bookie(self) -> str:
        """One more bookie on a free port with a data directory of its own; its address."""
        port = free_port()
        data = self.tmp / f"bookie-{len(self.bookies)}"
        proc = self.quire("bookie", port, f"bookie-{len(self.bookies)}", "--data-dir", str(data))
        address = f"{HOST}:{port}"
        self.bookies[address] = proc
        return address

    def kill9(self, address: str) -> None:
        proc = self.bookies[address]
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=STOP_TIMEOUT_S)

    def broker(self, quorum: tuple[int, int, int], bookies: list[str]) -> str:
        """A broker writing ledgers at E/Qw/Qa = `quorum`; its base URL once /readyz says 200."""
        port = free_port()
        e, qw, qa = quorum
        env = {
            "QUIRE_DATA_DIR": str(self.tmp / "broker"),
            "QUIRE_BOOKIES": "[" + ", ".join(f'"{b}"' for b in bookies) + "]",
            "QUIRE_ENSEMBLE_SIZE": str(e),
            "QUIRE_WRITE_QUORUM": str(qw),
            "QUIRE_ACK_QUORUM": str(qa),
        }
        self.quire("broker", port, "broker", env=env)
        base = f"http://{HOST}:{port}"
        wait_ready(base, START_TIMEOUT_S)
        return base

    def autorecovery(self) -> int:
        """An autorecovery process with short grace periods; the port of its /metrics."""
        port = free_port()
        env = {"QUIRE_DATA_DIR": str(self.tmp / "autorecovery"), **FAST_RECOVERY}
        self.quire("autorecovery", port, "autorecovery", env=env)
        return port


def quire_stack(
    tmp: Path, quorum: tuple[int, int, int], bookies: int, env: dict[str, str] | None = None
) -> tuple[Stack, str]:
    """`bookies` bookies and a broker at `quorum`; the caller closes the stack."""
    stack = Stack(tmp, env)
    try:
        addresses = [stack.bookie() for _ in range(bookies)]
        return stack, stack.broker(quorum, addresses)
    except BaseException:
        stack.close()
        raise


def nats_server_path() -> str | None:
    """Debian installs nats-server in /usr/sbin, which a user's PATH may lack."""
    found = shutil.which("nats-server")
    return found or ("/usr/sbin/nats-server" if os.access("/usr/sbin/nats-server", os.X_OK) else None)


def nats_cluster(tmp: Path) -> tuple[Stack, list[str]]:
    """Three `nats-server -js` processes routed to each other on loopback, each with a store
    directory of its own; their client URLs. The caller closes the stack."""
    server = nats_server_path()
    if server is None:
        raise RuntimeError("nats-server is not installed (apt-get install nats-server)")
    stack = Stack(tmp)
    clients = [free_port() for _ in range(3)]
    routes = [free_port() for _ in range(3)]
    route_urls = ",".join(f"nats-route://{HOST}:{p}" for p in routes)
    try:
        for i in range(3):
            args = [
                server, "-js", "-a", HOST, "-p", str(clients[i]), "-n", f"quire-bench-{i}",
                "-sd", str(tmp / f"nats-{i}"), "--cluster_name", "quire-bench",
                "--cluster", f"nats://{HOST}:{routes[i]}", "--routes", route_urls,
            ]  # fmt: skip
            stack.spawn(args, clients[i], f"nats-{i}")
    except BaseException:
        stack.close()
        raise
    return stack, [f"nats://{HOST}:{p}" for p in clients]
