"""The campaign's cluster on one machine: bookies, brokers, a compactor and an autorecovery
process on one PostgreSQL, all under a temporary directory, each process a `Proc` of its own
session.

Settings are chosen so that faults show within seconds: broker leases of 2 s renewed every
500 ms, bookie heartbeats every 500 ms that expire after 2.5 s, an add timeout of 3 s, a
compaction run lease of 6 s, auto-recovery with short grace periods, and a consumer idle time of
3 s (a failover or key_shared consumer silent that long is gone). Retention is unlimited
(the checker reads every topic from its first message at the end), ledgers roll every 1,000
entries, and dedup is on for every topic.

Every client reaches a bookie through that bookie's proxy (it advertises the proxy's address),
and each broker reaches PostgreSQL through a proxy of its own (`proxy.py`), so that the campaign
can cut a link, cut it one way or hold its replies. With `links="netns"` each bookie runs in a
network namespace of its own instead, and its links are cut there (`netns.py`). Each broker
also has a Kafka listener on a free port of its own, advertised as such (`kafka_bootstrap` lists
them all).

One bookie (the first) may keep its data on a tmpfs of its own (`mount -t tmpfs`, root only), so
that its disk can be filled and freed; where that mount is refused the disk fault is skipped.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import shutil
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
from sqlalchemy.engine import make_url

from bench.chaos.netns import Netns, NetnsLink
from bench.chaos.procs import HOST, Proc, quire_args
from bench.chaos.proxy import Proxy
from bench.common import free_port
from bookie.storage.diskio import CONTROL_VARIABLE

FAST_SETTINGS = {
    "QUIRE_DEDUPLICATION_ENABLED": "true",
    "QUIRE_BROKER_LEASE_MS": "2000",
    "QUIRE_BROKER_HEARTBEAT_INTERVAL_MS": "500",
    "QUIRE_BOOKIE_HEARTBEAT_INTERVAL_MS": "500",
    "QUIRE_BOOKIE_HEARTBEAT_TIMEOUT_MS": "2500",
    "QUIRE_ADD_ENTRY_TIMEOUT_MS": "3000",
    "QUIRE_RETENTION_TIME_MINUTES": "-1",
    "QUIRE_RETENTION_SIZE_MB": "-1",
    "QUIRE_MAX_ENTRIES_PER_LEDGER": "1000",
    "QUIRE_MIN_ROLLOVER_TIME_MS": "0",
    "QUIRE_COMPACTION_LEASE_MS": "6000",
    "QUIRE_COMPACTION_POLL_INTERVAL_MS": "500",
    "QUIRE_COMPACTION_CHECK_INTERVAL_MS": "2000",
    "QUIRE_SPARK_MASTER": "local[1]",
    "QUIRE_BOOKIE_WAIT_TIMEOUT_MS": "120000",
    "QUIRE_DISK_CHECK_INTERVAL_S": "1",
    "QUIRE_JOURNAL_MAX_SIZE_BYTES": str(8 * 1024 * 1024),
    "QUIRE_AUTORECOVERY_LOST_BOOKIE_GRACE_MS": "3000",
    "QUIRE_AUTORECOVERY_AUDIT_INTERVAL_MS": "500",
    "QUIRE_AUTORECOVERY_LEASE_MS": "3000",
    "QUIRE_AUTORECOVERY_CLAIM_MS": "6000",  # renewed every 2 s; pause-autorecovery outlasts it
    "QUIRE_AUTORECOVERY_OPEN_LEDGER_GRACE_MS": "2000",
    "QUIRE_AUTORECOVERY_POLL_INTERVAL_MS": "250",
    # failover and key_shared: a consumer silent this long is gone (the load's silences are longer)
    "QUIRE_EXCLUSIVE_CONSUMER_IDLE_MS": "3000",
    "PYTHONUNBUFFERED": "1",
}
START_TIMEOUT_S = 120.0


def control_file(root: Path, bookie_name: str) -> Path:
    """A bookie's disk fault control file (`disk_faults.py`); empty or absent: no fault."""
    return root / f"{bookie_name}.disk-faults.json"


def shim_env(root: Path, bookie_name: str) -> dict[str, str]:
    return {CONTROL_VARIABLE: str(control_file(root, bookie_name))}


@dataclass(frozen=True)
class ClusterConfig:
    bookies: int = 4  # one more than the ensemble: a spare to replace a failed bookie and copy onto
    brokers: int = 3
    ensemble: tuple[int, int, int] = (3, 2, 2)
    cursor_flush_ms: int = 500
    tmpfs_mb: int = 512
    settings: dict[str, str] = field(default_factory=dict)  # overrides of FAST_SETTINGS
    links: str = "proxy"  # a bookie's links: "proxy" (`proxy.py`) or "netns" (`netns.py`)

    def setting(self, name: str) -> int:
        return int({**FAST_SETTINGS, **self.settings}[name])


class Cluster:
    def __init__(self, root: Path, database_url: str, config: ClusterConfig) -> None:
        self.root = root
        self.config = config
        self.bookie_ports = [free_port() for _ in range(config.bookies)]
        self.broker_ports = [free_port() for _ in range(config.brokers)]
        self.kafka_ports = [free_port() for _ in range(config.brokers)]  # each broker's Kafka listener
        if config.links not in ("proxy", "netns"):
            raise ValueError(f"links must be proxy or netns, not {config.links!r}")
        self.netns = Netns(str(os.getpid())) if config.links == "netns" else None
        self.database_url = database_url
        self.store_port = store_port = _port_of(database_url)
        # A namespaced bookie's forwarder to PostgreSQL on its management link, by bookie name.
        self.bookie_stores: dict[str, Proxy] = {}
        self.bookie_links = [self._bookie_link(i, port) for i, port in enumerate(self.bookie_ports)]
        self.store_proxies = [Proxy(f"broker-{i}-store", store_port) for i in range(config.brokers)]
        e, qw, qa = config.ensemble
        self.env = {
            **FAST_SETTINGS,
            "QUIRE_CURSOR_FLUSH_INTERVAL_MS": str(config.cursor_flush_ms),
            **config.settings,
            "QUIRE_DATABASE_URL": database_url,
            "QUIRE_BOOKIE_HOST": HOST,
            "QUIRE_HOST": HOST,
            "QUIRE_BOOKIES": json.dumps([link.address for link in self.bookie_links]),
            "QUIRE_ENSEMBLE_SIZE": str(e),
            "QUIRE_WRITE_QUORUM": str(qw),
            "QUIRE_ACK_QUORUM": str(qa),
        }
        self.tmpfs: Path | None = None
        self.tmpfs_refused = ""
        self.bookies = [
            self._bookie(i, port, link)
            for i, (port, link) in enumerate(zip(self.bookie_ports, self.bookie_links, strict=True))
        ]
        self._next_bookie = config.bookies
        self.brokers = [
            self._quire(f"broker-{i}", "broker", port, "--port", str(port))
            for i, port in enumerate(self.broker_ports)
        ]
        for broker, proxy, kafka in zip(self.brokers, self.store_proxies, self.kafka_ports, strict=True):
            broker.env = {
                **self.env,
                "QUIRE_DATABASE_URL": _with_port(database_url, proxy.port),
                "QUIRE_KAFKA_PORT": str(kafka),
                "QUIRE_KAFKA_ADVERTISED_ADDRESS": f"{HOST}:{kafka}",
            }
        self.compactor = self._quire("compactor", "compactor", None)
        recovery_port = free_port()
        self.autorecovery = self._quire(
            "autorecovery", "autorecovery", recovery_port, "--port", str(recovery_port)
        )
        self.urls = [f"http://{HOST}:{p}" for p in self.broker_ports]
        self.kafka_bootstrap = ",".join(f"{HOST}:{p}" for p in self.kafka_ports)
        self.http = httpx.AsyncClient(timeout=3.0)

    def _quire(self, name: str, process: str, port: int | None, *extra: str) -> Proc:
        data = self.root / name
        data.mkdir(parents=True, exist_ok=True)
        args = quire_args(process, "--data-dir", str(data), *extra)
        return Proc(name, args, self.env, self.root / f"{name}.log", port)

    def _bookie_link(self, i: int, port: int) -> Proxy | NetnsLink:
        """Bookie i's link: a proxy in front of its port, or its network namespace (the forwarder
        to PostgreSQL on its management link with it)."""
        if self.netns is None:
            return Proxy(f"bookie-{i}", port)
        link = self.netns.plan(f"bookie-{i}", i, port)
        self.bookie_stores[link.name] = Proxy(f"{link.name}-store", self.store_port, host=link.store_host)
        return link

    def _bookie(self, i: int, port: int, link: Proxy | NetnsLink) -> Proc:
        name = f"bookie-{i}"
        data = self.root / name
        data.mkdir(parents=True)
        if i == 0:
            self._mount_tmpfs(data)
        env = {
            **self.env,
            "QUIRE_BOOKIE_ADVERTISED_ADDRESS": link.address,
            **shim_env(self.root, name),  # the disk faults' control file (empty: none)
        }
        args = quire_args("bookie", "--data-dir", str(data), "--port", str(port))
        if isinstance(link, Proxy):
            return Proc(name, args, env, self.root / f"{name}.log", port)
        store = self.bookie_stores[name]
        env["QUIRE_BOOKIE_HOST"] = link.host
        env["QUIRE_DATABASE_URL"] = _with_port(self.database_url, store.port, link.store_host)
        return Proc(name, [*link.exec_prefix(), *args], env, self.root / f"{name}.log", port, host=link.host)

    def in_namespace(self, bookie: Proc, args: list[str]) -> list[str]:
        """`args` run where `bookie` runs (its network namespace, if it has one)."""
        link = self.bookie_links[self.bookies.index(bookie)]
        return [*link.exec_prefix(), *args] if isinstance(link, NetnsLink) else args

    def _mount_tmpfs(self, where: Path) -> None:
        try:
            done = subprocess.run(
                ["mount", "-t", "tmpfs", "-o", f"size={self.config.tmpfs_mb}m", "tmpfs", str(where)],
                capture_output=True, text=True, timeout=30,
            )  # fmt: skip
        except (OSError, subprocess.TimeoutExpired) as exc:
            self.tmpfs_refused = f"cannot mount a tmpfs here: {exc}"
            return
        if done.returncode != 0:
            self.tmpfs_refused = f"cannot mount a tmpfs here: {done.stderr.strip()}"
            return
        self.tmpfs = where

    async def add_bookie(self) -> Proc:
        """A new bookie under a new id (a proxy of its own), started; it joins the cluster."""
        i, self._next_bookie = self._next_bookie, self._next_bookie + 1
        port = free_port()
        link = self._bookie_link(i, port)
        await self._start_link(link)
        self.bookie_ports.append(port)
        self.bookie_links.append(link)
        bookie = self._bookie(i, port, link)
        self.bookies.append(bookie)
        bookie.start()
        return bookie

    async def retire(self, bookie: Proc) -> None:
        """A bookie gone for good: no longer part of the cluster (its proxy closed, or its
        namespace deleted)."""
        at = self.bookies.index(bookie)
        del self.bookies[at], self.bookie_ports[at]
        link = self.bookie_links.pop(at)
        if isinstance(link, Proxy):
            await link.close()
            return
        await self.bookie_stores.pop(link.name).close()
        if self.netns is not None:
            await asyncio.to_thread(self.netns.remove, link)

    async def _start_link(self, link: Proxy | NetnsLink) -> None:
        if isinstance(link, Proxy):
            await link.start()
            return
        assert self.netns is not None
        await asyncio.to_thread(self.netns.make, link)
        await self.bookie_stores[link.name].start()

    async def decommission(self, bookie_id: str) -> int:
        """Ask a broker to decommission `bookie_id`; the HTTP status (0: no broker answered)."""
        for url in self.urls:
            try:
                r = await self.http.post(f"{url}/admin/v2/bookies/{bookie_id}/decommission")
            except httpx.HTTPError:
                continue
            return r.status_code
        return 0

    def data_dir(self, bookie: Proc) -> Path:
        return self.root / bookie.name

    def bookie_id(self, bookie: Proc) -> str:
        """The id a bookie registers under: its proxy's address (its own, in a namespace)."""
        return self.bookie_links[self.bookies.index(bookie)].address

    def proxy_of(self, proc: Proc) -> Proxy | NetnsLink:
        """A bookie's link (all its clients: its proxy or its namespace's data link), or a
        broker's link to PostgreSQL (a proxy)."""
        if proc in self.bookies:
            return self.bookie_links[self.bookies.index(proc)]
        return self.store_proxies[self.brokers.index(proc)]

    def procs(self) -> list[Proc]:
        return [*self.bookies, *self.brokers, self.compactor, self.autorecovery]

    async def start(self) -> None:
        """The proxies, the compactor and bookies, then autorecovery and brokers; until all are
        healthy."""
        if self.netns is not None:
            await asyncio.to_thread(self.netns.start)
        for link in self.bookie_links:
            await self._start_link(link)
        for proxy in self.store_proxies:
            await proxy.start()
        self.compactor.start()  # first: its Spark session takes longest to warm up
        for bookie in self.bookies:
            bookie.start()
        await asyncio.gather(*(b.wait_port(START_TIMEOUT_S) for b in self.bookies))
        self.autorecovery.start()
        for broker in self.brokers:
            broker.start()
        await asyncio.gather(*(b.wait_port(START_TIMEOUT_S) for b in self.brokers))
        await self.autorecovery.wait_port(START_TIMEOUT_S)
        await self.wait_healthy(START_TIMEOUT_S)

    async def restart(
        self, proc: Proc, timeout_s: float = START_TIMEOUT_S, *extra: str, env: dict[str, str] | None = None
    ) -> None:
        proc.start(extra, env)
        if proc.port is not None:
            await proc.wait_port(timeout_s)

    async def _get(self, url: str) -> tuple[int, Any]:
        try:
            r = await self.http.get(url)
        except httpx.HTTPError as exc:
            return 0, type(exc).__name__
        try:
            return r.status_code, r.json()
        except ValueError:
            return r.status_code, r.text

    async def health(self) -> str:
        """'' when every process runs, every broker is ready and every bookie writable; else why not."""
        for proc in self.procs():
            if not proc.alive():
                return f"{proc.name} is not running"
            if proc.stopped:
                return f"{proc.name} is stopped"
        for url in self.urls:
            status, body = await self._get(f"{url}/readyz")
            if status != 200:
                return f"{url}/readyz: {status} {body}"
        status, body = await self._get(f"{self.urls[0]}/admin/v2/bookies/all")
        if status != 200:
            return f"bookies/all: {status} {body}"
        states = {b["bookieId"]: b["state"] for b in body["bookies"]}
        for bookie in self.bookies:
            state = states.get(self.bookie_id(bookie))
            if state != "writable":
                return f"{bookie.name} ({self.bookie_id(bookie)}) is {state}"
        return ""

    async def wait_healthy(self, timeout_s: float) -> str:
        """Until `health()` is ''; the last reason when it is not within the time."""
        deadline = time.monotonic() + timeout_s
        reason = await self.health()
        while reason and time.monotonic() < deadline:
            await asyncio.sleep(0.25)
            reason = await self.health()
        return reason

    async def underreplicated(self) -> int | None:
        for url in self.urls:
            status, body = await self._get(f"{url}/admin/v2/bookies/underreplicated")
            if status == 200:
                return len(body["ledgers"])
        return None

    async def bookie_state(self, bookie: Proc) -> str | None:
        for url in self.urls:
            status, body = await self._get(f"{url}/admin/v2/bookies/all")
            if status == 200:
                for b in body["bookies"]:
                    if b["bookieId"] == self.bookie_id(bookie):
                        return str(b["state"])
        return None

    def wipe(self, bookie: Proc) -> None:
        """Everything in the bookie's data directory goes (the directory itself stays: it may be
        the tmpfs mount point)."""
        data = self.data_dir(bookie)
        for child in data.iterdir():
            if child.is_dir() and not child.is_symlink():
                shutil.rmtree(child)
            else:
                child.unlink()

    async def close(self) -> None:
        for proc in reversed(self.procs()):
            if proc.popen is not None:
                await asyncio.to_thread(proc.terminate)
        await self.http.aclose()
        for proxy in (*self.bookie_links, *self.store_proxies, *self.bookie_stores.values()):
            if isinstance(proxy, Proxy):
                await proxy.close()
        if self.netns is not None:
            await asyncio.to_thread(self.netns.close)
        if self.tmpfs is not None:
            with contextlib.suppress(OSError, subprocess.TimeoutExpired):
                await asyncio.to_thread(
                    subprocess.run, ["umount", "-l", str(self.tmpfs)], capture_output=True, timeout=30
                )


def _port_of(database_url: str) -> int:
    return int(make_url(database_url).port or 5432)


def _with_port(database_url: str, port: int, host: str = HOST) -> str:
    """The same database through another port (a proxy's) on this host, or on `host`."""
    return make_url(database_url).set(host=host, port=port).render_as_string(hide_password=False)
