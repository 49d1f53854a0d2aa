"""A local cluster of real Quire processes, for tests and benchmarks (BookKeeper's
LocalBookKeeper): bookies, brokers, a compactor and autorecovery over one metadata store, SQLite
or an own schema on a PostgreSQL server.

    with LocalCluster(tmp, database="postgres") as cluster:
        bookie = cluster.bookie()
        broker = cluster.broker()          # writes to every bookie started so far, ready on return
        cluster.kill9(bookie)

Every process runs this checkout's code in a session of its own, on a free loopback port, logs to
`<root>/<name>.log`, and is stopped by process group when the cluster closes, on success and on
error alike; a PostgreSQL schema the cluster created goes with it. Every wait is bounded.
"""

from __future__ import annotations

import signal
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import Self

import orjson

from devtools import postgres
from devtools.procs import HOST, START_TIMEOUT_S, STOP_TIMEOUT_S, Proc, free_port

# Short failure detection: a bookie killed with -9 shows as down within a few seconds.
BOOKIE_HEARTBEAT = {"QUIRE_BOOKIE_HEARTBEAT_INTERVAL_MS": "500", "QUIRE_BOOKIE_HEARTBEAT_TIMEOUT_MS": "5000"}
FAST_HEARTBEAT = {"QUIRE_BOOKIE_HEARTBEAT_INTERVAL_MS": "200", "QUIRE_BOOKIE_HEARTBEAT_TIMEOUT_MS": "2000"}
SHORT_LEASES = {"QUIRE_BROKER_LEASE_MS": "2000", "QUIRE_BROKER_HEARTBEAT_INTERVAL_MS": "500"}
FAST_RECOVERY = {
    "QUIRE_AUTORECOVERY_LOST_BOOKIE_GRACE_MS": "500",
    "QUIRE_AUTORECOVERY_AUDIT_INTERVAL_MS": "200",
    "QUIRE_AUTORECOVERY_LEASE_MS": "2000",
    "QUIRE_AUTORECOVERY_CLAIM_MS": "10000",
    "QUIRE_AUTORECOVERY_OPEN_LEDGER_GRACE_MS": "500",
    "QUIRE_AUTORECOVERY_POLL_INTERVAL_MS": "100",
}
# Keep every message readable from `earliest` (the default retention deletes acked ledgers).
KEEP_ALL = {"QUIRE_RETENTION_TIME_MINUTES": "-1", "QUIRE_RETENTION_SIZE_MB": "-1"}


@dataclass
class Node:
    """One process of the cluster: what it is, its port, its `Proc`."""

    name: str
    role: str  # bookie, broker, compactor, autorecovery
    port: int
    proc: Proc
    paused: bool = False

    @property
    def address(self) -> str:
        return f"{HOST}:{self.port}"

    @property
    def url(self) -> str:
        return f"http://{HOST}:{self.port}"

    @property
    def pid(self) -> int:
        return self.proc.pid

    def alive(self) -> bool:
        return self.proc.alive()

    def log(self) -> str:
        return self.proc.log()


@dataclass
class LocalCluster:
    """The processes of one cluster; `database` is a metadata URL, "sqlite" (a file in `root`) or
    "postgres" (a new schema on the server at QUIRE_TEST_POSTGRES_URL, dropped on close)."""

    root: Path
    database: str = "sqlite"
    env: dict[str, str] = field(default_factory=dict)  # settings of every process
    start_timeout_s: float = START_TIMEOUT_S
    nodes: list[Node] = field(default_factory=list)
    database_url: str = ""
    _schema: tuple[str, str] | None = None
    _count: dict[str, int] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.root.mkdir(parents=True, exist_ok=True)
        if self.database == "sqlite":
            self.database_url = f"sqlite:///{self.root / 'metadata.db'}"
        elif self.database == "postgres":
            base = postgres.server_url()
            self.database_url, schema = postgres.create_schema(base, "cluster")
            self._schema = (base, schema)
        else:
            self.database_url = self.database

    @property
    def schema(self) -> str | None:
        """The PostgreSQL schema this cluster created (and drops on close), if any."""
        return None if self._schema is None else self._schema[1]

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    # --- processes ----------------------------------------------------------------------------
    def _name(self, role: str) -> str:
        n = self._count.get(role, 0)
        self._count[role] = n + 1
        return f"{role}-{n}"

    def spawn(
        self, role: str, args: list[str], port: int, env: dict[str, str] | None = None, name: str = ""
    ) -> Node:
        """`quire <args>` as a node of this cluster, started (not waited for)."""
        name = name or self._name(role)
        full_env = {"QUIRE_DATABASE_URL": self.database_url, **self.env, **(env or {})}
        node = Node(name, role, port, Proc.quire(args, full_env, self.root / f"{name}.log"))
        self.nodes.append(node)
        node.proc.start()
        return node

    def bookie(self, port: int | None = None, env: dict[str, str] | None = None, wait: bool = True) -> Node:
        """One more bookie with a data directory of its own; listening when this returns."""
        port = port or free_port()
        name = self._name("bookie")
        args = ["bookie", "--data-dir", str(self.root / name), "--port", str(port)]
        node = self.spawn("bookie", args, port, {"QUIRE_BOOKIE_HOST": HOST, **(env or {})}, name)
        if wait:
            self.wait_port(node)
        return node

    @property
    def bookies(self) -> list[Node]:
        return [n for n in self.nodes if n.role == "bookie" and n.alive()]

    def broker_env(self, port: int, name: str, bookies: list[str] | None = None) -> dict[str, str]:
        addresses = bookies if bookies is not None else [b.address for b in self.bookies]
        return {
            "QUIRE_DATA_DIR": str(self.root / name),
            "QUIRE_BOOKIES": orjson.dumps(addresses).decode(),
            "QUIRE_HOST": HOST,
            "QUIRE_PORT": str(port),
            "QUIRE_BOOKIE_WAIT_TIMEOUT_MS": str(int(self.start_timeout_s * 1000)),
        }

    def broker(
        self,
        port: int | None = None,
        env: dict[str, str] | None = None,
        bookies: list[str] | None = None,
        wait: bool = True,
    ) -> Node:
        """One more broker (writing to `bookies`, else every live bookie); ready when this
        returns unless `wait` is false."""
        port = port or free_port()
        name = self._name("broker")
        full = {**self.broker_env(port, name, bookies), **(env or {})}
        node = self.spawn("broker", ["broker"], port, full, name)
        if wait:
            self.wait_ready(node)
        return node

    def autorecovery(self, port: int | None = None, env: dict[str, str] | None = None) -> Node:
        """An autorecovery process; listening on `port` (its /metrics) when this returns."""
        port = port or free_port()
        name = self._name("autorecovery")
        full = {"QUIRE_DATA_DIR": str(self.root / name), **(env or {})}
        node = self.spawn("autorecovery", ["autorecovery", "--port", str(port)], port, full, name)
        self.wait_port(node)
        return node

    def compactor(self, port: int | None = None, env: dict[str, str] | None = None) -> Node:
        """A compactor process; listening on `port` (its /metrics) when this returns."""
        port = port or free_port()
        name = self._name("compactor")
        full = {
            "QUIRE_DATA_DIR": str(self.root / name),
            "QUIRE_COMPACTOR_METRICS_PORT": str(port),
            **(env or {}),
        }
        node = self.spawn("compactor", ["compactor"], port, full, name)
        self.wait_port(node)
        return node

    def wait_port(self, node: Node) -> None:
        node.proc.wait_port(node.port, node.name, self.start_timeout_s)

    def wait_ready(self, node: Node) -> None:
        node.proc.wait_ready(node.url, node.name, self.start_timeout_s)

    # --- faults -------------------------------------------------------------------------------
    def kill9(self, node: Node) -> None:
        node.proc.kill9()

    def sigterm(self, node: Node, timeout_s: float = 30.0) -> int:
        """SIGTERM (a graceful stop) and wait for the exit; its exit code."""
        node.proc.signal(signal.SIGTERM)
        try:
            return node.proc.wait(timeout_s)
        finally:
            node.proc.stop()

    def pause(self, node: Node) -> None:
        node.proc.signal(signal.SIGSTOP)
        node.paused = True

    def resume(self, node: Node) -> None:
        node.proc.signal(signal.SIGCONT)
        node.paused = False

    def close(self) -> None:
        """Stop every process, newest first, then drop the schema this cluster created."""
        for node in reversed(self.nodes):
            node.proc.stop(STOP_TIMEOUT_S)
        if self._schema is not None:
            postgres.drop_schema(*self._schema)
            self._schema = None

    def logs(self, tail: int = 4000) -> str:
        return "\n".join(f"--- {n.name} ({n.address}) ---\n{n.log()[-tail:]}" for n in self.nodes)
