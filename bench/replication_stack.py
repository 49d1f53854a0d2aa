"""The processes `make bench-replication` starts: Quire bookies, a broker and an autorecovery
process sharing one SQLite metadata store (a `devtools.cluster.LocalCluster`), and a
three-server NATS JetStream cluster.

Every process runs in a session of its own and is stopped by process group (SIGTERM, then
SIGKILL after a bounded wait) when its `Stack` closes, on success and on error alike, so
nothing the benchmark started outlives it. Every port is a free loopback port picked at start.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from types import TracebackType
from typing import Self

from devtools.cluster import FAST_RECOVERY, LocalCluster
from devtools.procs import HOST, START_TIMEOUT_S, STOP_TIMEOUT_S, Proc, free_port


class Stack:
    """The processes of one row (or of the JetStream peer), stopped together on exit. The Quire
    ones are `cluster`'s; `env` may name the metadata store (QUIRE_DATABASE_URL), else SQLite."""

    def __init__(self, tmp: Path, env: dict[str, str] | None = None) -> None:
        settings = dict(env or {})
        database = settings.pop("QUIRE_DATABASE_URL", "sqlite")
        self.tmp = tmp
        self.cluster = LocalCluster(tmp, database, settings, START_TIMEOUT_S)
        self.db_url = self.cluster.database_url
        self.others: list[Proc] = []  # processes that are not Quire's (nats-server)
        self.bookies: dict[str, Proc] = {}

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    def close(self) -> None:
        for proc in reversed(self.others):
            proc.stop(STOP_TIMEOUT_S)
        self.others.clear()
        self.cluster.close()

    def spawn(self, args: list[str], port: int, name: str) -> Proc:
        """Any command as a process of this stack; listening on `port` when this returns."""
        proc = Proc(args, {}, self.tmp / f"{name}.log").start()
        self.others.append(proc)
        proc.wait_port(port, name, START_TIMEOUT_S)
        return proc

    def quire(
        self, process: str, port: int, name: str, *extra: str, env: dict[str, str] | None = None
    ) -> Proc:
        """`quire <process> --port <port>`; listening on `port` when this returns."""
        node = self.cluster.spawn(process, [process, "--port", str(port), *extra], port, env, name)
        self.cluster.wait_port(node)
        return node.proc

    def bookie(self) -> str:
        """One more bookie on a free port with a data directory of its own; its address."""
        node = self.cluster.bookie()
        self.bookies[node.address] = node.proc
        return node.address

    def kill9(self, address: str) -> None:
        self.bookies[address].kill9()

    def broker(self, quorum: tuple[int, int, int], bookies: list[str]) -> str:
        """A broker writing ledgers at E/Qw/Qa = `quorum`; its base URL once /readyz says 200."""
        e, qw, qa = quorum
        env = {
            "QUIRE_DATA_DIR": str(self.tmp / "broker"),
            "QUIRE_ENSEMBLE_SIZE": str(e),
            "QUIRE_WRITE_QUORUM": str(qw),
            "QUIRE_ACK_QUORUM": str(qa),
        }
        return self.cluster.broker(env=env, bookies=bookies).url

    def autorecovery(self) -> int:
        """An autorecovery process with short grace periods; the port of its /metrics."""
        return self.cluster.autorecovery(env=FAST_RECOVERY).port


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
