"""A private PostgreSQL server for the campaign, so that stopping it is a fault like any other.

`initdb` into the campaign's temporary directory and `postgres` on a free loopback port, both as
the `postgres` OS user when the campaign runs as root (initdb refuses root). The postmaster is a
`Proc` of its own session: a stop is SIGINT (fast shutdown) or SIGQUIT (immediate: the next start
runs crash recovery), and the cleanup at the end kills its whole group. The system PostgreSQL
(port 5432) is never touched.

When no private server can be made here (no initdb, no `postgres` user), the campaign falls back
to the shared server at QUIRE_TEST_POSTGRES_URL with a fresh schema and skips the PostgreSQL
fault, saying why (`SharedPostgres`).
"""

from __future__ import annotations

import asyncio
import glob
import os
import pwd
import shutil
import signal
import subprocess
import time
import uuid
from pathlib import Path

from bench.chaos.procs import HOST, Proc
from bench.common import free_port

SHARED_URL = os.environ.get("QUIRE_TEST_POSTGRES_URL", "postgresql+psycopg://postgres@127.0.0.1:5432/test")
START_TIMEOUT_S = 60.0


def find_binary(name: str) -> str | None:
    found = shutil.which(name) or (
        f"/usr/local/bin/{name}" if os.access(f"/usr/local/bin/{name}", os.X_OK) else None
    )
    if found:
        return found
    candidates = sorted(glob.glob(f"/usr/lib/postgresql/*/bin/{name}"))
    return candidates[-1] if candidates else None


def private_unavailable() -> str | None:
    """Why no private server can be made here, or None."""
    if find_binary("initdb") is None or find_binary("postgres") is None:
        return "no initdb/postgres binaries found (PATH, /usr/local/bin, /usr/lib/postgresql)"
    if os.geteuid() == 0:
        try:
            pwd.getpwnam("postgres")
        except KeyError:
            return "running as root and there is no `postgres` OS user to run initdb"
    return None


def _connects(dsn: str) -> bool:
    import psycopg

    try:
        with psycopg.connect(dsn, connect_timeout=2):
            return True
    except Exception:
        return False


class PrivatePostgres:
    """initdb + postgres under `root`; `url` is for Quire's processes (SQLAlchemy + psycopg)."""

    can_stop = True

    def __init__(self, root: Path) -> None:
        self.root = root
        self.port = free_port()
        self.user: str | None = None
        self.proc: Proc | None = None
        self.url = f"postgresql+psycopg://postgres@{HOST}:{self.port}/postgres"
        self.dsn = f"postgresql://postgres@{HOST}:{self.port}/postgres"
        self.description = f"private PostgreSQL on port {self.port}"

    def init(self) -> None:
        """initdb; raises RuntimeError with the reason when it cannot be done here."""
        reason = private_unavailable()
        if reason is not None:
            raise RuntimeError(reason)
        initdb, postgres = find_binary("initdb"), find_binary("postgres")
        assert initdb is not None and postgres is not None
        if os.geteuid() == 0:
            self.user = "postgres"
        pg_root = self.root / "postgres"
        pg_root.mkdir(parents=True)
        if self.user is not None:
            os.chmod(self.root, 0o755)
            shutil.chown(pg_root, self.user)
        data = pg_root / "data"
        done = subprocess.run(
            [initdb, "-D", str(data), "-A", "trust", "-U", "postgres", "--no-sync", "-E", "UTF8"],
            capture_output=True,
            text=True,
            timeout=120,
            user=self.user,
        )
        if done.returncode != 0:
            raise RuntimeError(f"initdb failed: {done.stderr.strip()[-500:]}")
        args = [
            postgres, "-D", str(data), "-p", str(self.port), "-k", str(pg_root),
            "-c", f"listen_addresses={HOST}", "-c", "max_connections=400", "-c", "fsync=off",
            "-c", "full_page_writes=off", "-c", "log_min_messages=warning",
        ]  # fmt: skip
        self.proc = Proc("postgres", args, {}, self.root / "postgres.log", self.port, user=self.user)
        self.description = f"private PostgreSQL ({Path(postgres).parent.parent.name}) on port {self.port}"

    async def start(self) -> None:
        assert self.proc is not None
        self.proc.start()
        deadline = time.monotonic() + START_TIMEOUT_S
        while time.monotonic() < deadline:
            if not self.proc.alive():
                raise RuntimeError(f"postgres exited:\n{self.proc.tail()}")
            if await asyncio.to_thread(_connects, self.dsn):
                return
            await asyncio.sleep(0.2)
        raise TimeoutError(f"postgres did not accept connections within {START_TIMEOUT_S:g} s")

    def stop(self, immediate: bool) -> None:
        """Fast (SIGINT) or immediate (SIGQUIT) shutdown of the postmaster, bounded."""
        assert self.proc is not None
        self.proc.terminate(signal.SIGQUIT if immediate else signal.SIGINT, wait_s=30.0)

    def close(self) -> None:
        if self.proc is not None:
            self.proc.terminate(signal.SIGQUIT, wait_s=10.0)


class SharedPostgres:
    """The fallback: a fresh schema on the shared server, dropped at the end; never stopped."""

    can_stop = False

    def __init__(self, reason: str) -> None:
        self.schema = f"chaos_{uuid.uuid4().hex[:12]}"
        self.base_dsn = SHARED_URL.replace("postgresql+psycopg://", "postgresql://")
        sep = "&" if "?" in SHARED_URL else "?"
        self.url = f"{SHARED_URL}{sep}options=-csearch_path%3D{self.schema}"
        self.reason = reason
        self.description = f"shared PostgreSQL ({SHARED_URL}), schema {self.schema}"
        self.proc: Proc | None = None

    async def start(self) -> None:
        import psycopg

        def create() -> None:
            with psycopg.connect(self.base_dsn, autocommit=True, connect_timeout=5) as conn:
                conn.execute(f'CREATE SCHEMA "{self.schema}"')

        await asyncio.to_thread(create)

    def stop(self, immediate: bool) -> None:
        raise RuntimeError("the shared PostgreSQL is never stopped")

    def close(self) -> None:
        import psycopg

        try:
            with psycopg.connect(self.base_dsn, autocommit=True, connect_timeout=5) as conn:
                conn.execute(f'DROP SCHEMA IF EXISTS "{self.schema}" CASCADE')
        except Exception as exc:
            print(f"chaos: could not drop schema {self.schema}: {exc}")
