"""One `quire standalone` with its Kafka listener on free ports, for the real-client tests: start,
stop and restart on the same data directory and ports, REST calls beside the Kafka ones, and a
compaction run triggered and waited for. Every wait is bounded; the standalone is stopped by its
process group however a test ends."""

from __future__ import annotations

import base64
import contextlib
import functools
import os
import random
import re
import signal
import socket
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

from tests.support import QuireProcess, port_open, wait_until

START_TIMEOUT_S = 120.0  # a loaded 2-core machine starts the bookie, compactor and broker slowly
HTTP_TIMEOUT_S = 30.0
COMPACTION_TIMEOUT_S = (
    300.0  # the compactor's Spark session takes 10-30 s to warm up, 80 s+ on a loaded machine
)

# Small group timings, so that joins and rebalances take well under a second or two.
FAST_GROUPS = {"QUIRE_KAFKA_GROUP_INITIAL_REBALANCE_DELAY_MS": "100"}


def free_ports(count: int) -> list[int]:
    """`count` distinct ports free now, below Linux's ephemeral range (32768 on), so that no
    outgoing connection takes one before the standalone binds it, nor between a stop and a
    restart on the same ports."""
    rng = random.Random()
    ports: list[int] = []
    for _ in range(1000):
        port = rng.randrange(20_000, 32_768)
        if port in ports:
            continue
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
        ports.append(port)
        if len(ports) == count:
            return ports
    raise RuntimeError(f"no {count} free ports")


@dataclass
class Standalone:
    """`quire standalone` (one bookie, the compactor, the broker with its Kafka listener)."""

    root: Path
    database_url: str
    extra_env: dict[str, str] = field(default_factory=dict)
    ports: list[int] = field(default_factory=lambda: free_ports(5))
    process: QuireProcess | None = None

    @property
    def http_port(self) -> int:
        return self.ports[0]

    @property
    def kafka_port(self) -> int:
        return self.ports[2]

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.kafka_port}"

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.http_port}"

    def start(self) -> Standalone:
        http, bookie, kafka, bookie_metrics, compactor_metrics = self.ports
        env = {
            "QUIRE_DATABASE_URL": self.database_url,
            "QUIRE_KAFKA_ADVERTISED_ADDRESS": f"127.0.0.1:{kafka}",
            "QUIRE_BOOKIE_METRICS_PORT": str(bookie_metrics),
            "QUIRE_COMPACTOR_METRICS_PORT": str(compactor_metrics),
            **FAST_GROUPS,
            **self.extra_env,
        }
        args = ["standalone", "--data-dir", str(self.root / "data"), "--port", str(http)]
        args += ["--bookie-port", str(bookie), "--kafka-port", str(kafka)]
        self.process = QuireProcess(args, env, self.root / "standalone.log").start()
        try:
            wait_until(self._ready, START_TIMEOUT_S, "the standalone's /readyz and Kafka port", 0.2)
        except BaseException:
            self.stop()
            raise
        return self

    def _ready(self) -> bool:
        assert self.process is not None
        if not self.process.alive():
            raise RuntimeError(f"the standalone exited at start:\n{self.process.log()[-3000:]}")
        try:
            ready = httpx.get(f"{self.base_url}/readyz", timeout=2).status_code == 200
        except httpx.HTTPError:
            return False
        return ready and port_open(self.kafka_port)

    def stop(self, fast: bool = False) -> None:
        """Stop the standalone (SIGTERM, then SIGKILL after a bounded wait). `fast` kills its
        compactor first: a compactor still warming up its Spark session takes the standalone's
        whole 10 s stop timeout, which a test's teardown need not wait for."""
        if self.process is None:
            return
        if fast:
            # the last one: the log is appended to across restarts
            for pid in re.findall(r"started compactor \(pid (\d+)\)", self.process.log())[-1:]:
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.kill(int(pid), signal.SIGKILL)
        self.process.stop(timeout_s=30.0)
        self.process = None

    def restart(self) -> None:
        """Stop (SIGTERM, as an operator would) and start again on the same data and ports."""
        self.stop()
        self.start()

    def log(self) -> str:
        path = self.root / "standalone.log"
        return path.read_text(errors="replace") if path.exists() else ""

    # --- REST ----------------------------------------------------------------------------------
    def rest(self, method: str, path: str, **kwargs: Any) -> httpx.Response:
        return httpx.request(method, f"{self.base_url}{path}", timeout=HTTP_TIMEOUT_S, **kwargs)

    def rest_produce(self, topic: str, messages: list[dict[str, Any]]) -> list[str]:
        r = self.rest("POST", f"/v1/topics/public/default/{topic}/messages", json={"messages": messages})
        assert r.status_code == 200, r.text
        return [row["message_id"] for row in r.json()["results"]]

    def rest_read(self, topic: str, limit: int = 10_000, **params: Any) -> list[dict[str, Any]]:
        """Every message from the earliest on (pages followed until the reader is at the end)."""
        out: list[dict[str, Any]] = []
        start = "earliest"
        while len(out) < limit:
            query = {"start": start, "max_messages": 1000, "value_encoding": "base64", **params}
            r = self.rest("GET", f"/v1/topics/public/default/{topic}/messages", params=query)
            assert r.status_code == 200, r.text
            body = r.json()
            out += body["messages"]
            if body["next"] is None or not body["messages"]:
                return out
            start = body["next"]
        return out

    def admin(self, method: str, topic: str, what: str = "", **kwargs: Any) -> httpx.Response:
        suffix = f"/{what}" if what else ""
        return self.rest(method, f"/admin/v2/persistent/public/default/{topic}{suffix}", **kwargs)

    def request_compaction(self, topics: Iterable[str]) -> set[str]:
        """Ask for a compaction run of each topic; the topics whose run was accepted (the others
        were refused with 409: a run is going, maybe one the topic's compaction policy started)."""
        accepted = set()
        for topic in topics:
            r = self.admin("PUT", topic, "compaction")
            assert r.status_code in (204, 409), r.text
            if r.status_code == 204:
                accepted.add(topic)
        return accepted

    def compact(
        self, topics: list[str], accepted: Iterable[str] = (), timeout_s: float = COMPACTION_TIMEOUT_S
    ) -> None:
        """Wait until a run of each topic asked for after its writes has succeeded: the
        `accepted` ones were asked for already, the others are asked for (again while refused)."""
        deadline = time.monotonic() + timeout_s
        pending = set(topics) - set(accepted)
        while pending:
            pending -= self.request_compaction(sorted(pending))
            if pending:
                assert time.monotonic() < deadline, f"compaction of {pending} never started"
                time.sleep(0.5)
        for topic in topics:
            wait_until(
                functools.partial(self._compacted, topic),
                max(1.0, deadline - time.monotonic()),
                f"compaction of {topic}",
                0.5,
            )

    def _compacted(self, topic: str) -> bool:
        r = self.admin("GET", topic, "compaction")
        assert r.status_code == 200, r.text
        status = r.json()
        assert status["status"] != "ERROR", status
        return bool(status["status"] == "SUCCESS")


def rest_value(message: dict[str, Any]) -> bytes:
    """A REST message's value as bytes (read with value_encoding=base64)."""
    value = message["value"] or ""
    if message.get("value_encoding") == "base64":
        return base64.b64decode(value)
    return str(value).encode()


@contextlib.contextmanager
def standalone(root: Path, database_url: str | None = None, **extra_env: str) -> Iterator[Standalone]:
    """A started standalone (SQLite under `root` unless a database URL is given), stopped on exit."""
    url = database_url or f"sqlite:///{root / 'metadata.db'}"
    s = Standalone(root, url, dict(extra_env)).start()
    try:
        yield s
    finally:
        s.stop(fast=True)
