"""A cluster of real processes for the several-brokers tests: one `quire bookie` and N
`quire broker`s on one PostgreSQL schema, and a careful client that knows every broker.

The processes are `devtools.cluster.LocalCluster`'s: this worktree's code (`python -m app.cli`),
each in a session of its own, on free ports, killed by process group at the end.
Every wait is bounded.

The careful client is what a real client of a multi-broker Quire does: it follows `307` to the
owner of a topic (httpx `follow_redirects`), and on `503` or a connection error (a dead, paused
or restarting broker) it moves to the next broker it knows and tries again, for at most
`total_s`. A produce it retries carries the same producer name and sequence ids, so with
deduplication on a retry is never stored twice.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections import Counter
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

from devtools.cluster import BOOKIE_HEARTBEAT, SHORT_LEASES, LocalCluster, Node
from devtools.cluster import KEEP_ALL as KEEP_ALL  # the tests import it from here
from devtools.procs import Proc, free_port

START_TIMEOUT_S = 90.0  # a loaded two-core machine starts a broker in a few seconds, at worst ~30
STOP_TIMEOUT_S = 30.0
LEASE_MS = int(SHORT_LEASES["QUIRE_BROKER_LEASE_MS"])
HEARTBEAT_MS = int(SHORT_LEASES["QUIRE_BROKER_HEARTBEAT_INTERVAL_MS"])
NS = "public/default"


@dataclass
class Broker:
    """One `quire broker` process; `port` is kept by its replacement."""

    node: Node

    @property
    def name(self) -> str:
        return self.node.name

    @property
    def port(self) -> int:
        return self.node.port

    @property
    def process(self) -> Proc:
        return self.node.proc

    @property
    def paused(self) -> bool:
        return self.node.paused

    @property
    def url(self) -> str:
        return self.node.url

    @property
    def kafka(self) -> str:
        """host:port of its Kafka listener (a cluster started with QUIRE_KAFKA_PORT="auto")."""
        return f"127.0.0.1:{self.process.env['QUIRE_KAFKA_PORT']}"

    @property
    def pulsar(self) -> str:
        """Its Pulsar service URL (a cluster started with QUIRE_PULSAR_PORT="auto")."""
        return f"pulsar://127.0.0.1:{self.process.env['QUIRE_PULSAR_PORT']}"

    @property
    def broker_id(self) -> str:
        return self.node.address

    @property
    def pid(self) -> int:
        return self.node.pid

    def alive(self) -> bool:
        return self.node.alive()

    def log(self) -> str:
        return self.node.log()


@dataclass
class Cluster:
    """One bookie and N brokers over `devtools.cluster.LocalCluster` (which owns the processes)."""

    root: Path
    database_url: str
    env: dict[str, str] = field(default_factory=dict)  # extra settings of every broker
    short_leases: bool = True  # else the settings' default lease and heartbeat
    bookie_port: int = field(default_factory=free_port)
    bookie: Node | None = None
    brokers: list[Broker] = field(default_factory=list)
    _retired: list[Broker] = field(default_factory=list)
    _local: LocalCluster | None = None

    # --- processes ---------------------------------------------------------------------------
    @property
    def local(self) -> LocalCluster:
        if self._local is None:
            self._local = LocalCluster(self.root, self.database_url, dict(BOOKIE_HEARTBEAT), START_TIMEOUT_S)
        return self._local

    def start(self, brokers: int) -> Cluster:
        """The bookie and the brokers start together (a broker waits for a live bookie, and the
        schema migration is serialised by a lock), which saves a slow machine a few seconds."""
        try:
            self.bookie = self.local.bookie(self.bookie_port, wait=False)
            started = [self._spawn_broker() for _ in range(brokers)]
            self.local.wait_port(self.bookie)
            with ThreadPoolExecutor(len(started)) as pool:
                list(pool.map(self.wait_ready, started))
        except BaseException:
            self.stop()  # a cluster that failed to start leaves no process behind
            raise
        return self

    def broker_env(self, extra: dict[str, str] | None = None) -> dict[str, str]:
        return {
            **(SHORT_LEASES if self.short_leases else {}),
            **self.env,
            **(extra or {}),
            # "auto": a Kafka (Pulsar) listener on a port of each broker's own
            **({"QUIRE_KAFKA_PORT": str(free_port())} if self.env.get("QUIRE_KAFKA_PORT") == "auto" else {}),
            **{k: str(free_port()) for k in ("QUIRE_PULSAR_PORT",) if self.env.get(k) == "auto"},
        }

    def _spawn_broker(self, port: int | None = None, env: dict[str, str] | None = None) -> Broker:
        bookies = [f"127.0.0.1:{self.bookie_port}"]
        broker = Broker(self.local.broker(port, self.broker_env(env), bookies, wait=False))
        self.brokers.append(broker)
        return broker

    def start_broker(self, port: int | None = None, env: dict[str, str] | None = None) -> Broker:
        """A new broker (on `port`, e.g. a stopped one's; with `env`: settings of its own),
        ready when this returns."""
        broker = self._spawn_broker(port, env)
        self.wait_ready(broker)
        return broker

    def wait_ready(self, broker: Broker) -> None:
        self.local.wait_ready(broker.node)

    def kill9(self, broker: Broker) -> None:
        self.local.kill9(broker.node)
        broker.process.stop()
        self._retire(broker)

    def sigterm(self, broker: Broker, timeout_s: float = STOP_TIMEOUT_S) -> int | None:
        """SIGTERM (the graceful handover) and wait for the exit; its exit code."""
        try:
            return self.local.sigterm(broker.node, timeout_s)
        finally:
            self._retire(broker)

    def pause(self, broker: Broker) -> None:
        self.local.pause(broker.node)

    def resume(self, broker: Broker) -> None:
        self.local.resume(broker.node)

    def _retire(self, broker: Broker) -> None:
        if broker in self.brokers:
            self.brokers.remove(broker)
            self._retired.append(broker)

    def stop(self) -> None:
        if self._local is not None:
            self._local.close()

    # --- clients -----------------------------------------------------------------------------
    @property
    def urls(self) -> list[str]:
        return [b.url for b in self.brokers]

    def client(self, start: int = 0, **kwargs: Any) -> CarefulClient:
        return CarefulClient(self.urls, start=start, **kwargs)

    def logs(self, tail: int = 4000) -> str:
        parts = [
            f"--- {b.name} ({b.broker_id}) ---\n{b.log()[-tail:]}" for b in [*self._retired, *self.brokers]
        ]
        return "\n".join(parts)


# --- the careful client ----------------------------------------------------------------------
class GaveUp(Exception):
    """The careful client found no broker that answered within its time bound."""


class CarefulClient:
    """An httpx client over every broker: follows 307, retries 503 and connection errors on the
    next broker with a growing pause, for at most `total_s` a request. Not thread-safe: one per
    thread."""

    def __init__(
        self,
        urls: list[str],
        *,
        start: int = 0,
        total_s: float = 30.0,
        timeout: httpx.Timeout | None = None,
    ) -> None:
        self.urls = list(urls)
        self._i = start
        self.total_s = total_s
        self.http = httpx.Client(follow_redirects=True, timeout=timeout or httpx.Timeout(5.0, connect=1.0))
        self.retries: Counter[str] = Counter()  # why a request was tried again

    def close(self) -> None:
        self.http.close()

    def __enter__(self) -> CarefulClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def request(self, method: str, path: str, **kwargs: Any) -> httpx.Response:
        deadline = time.monotonic() + self.total_s
        pause = 0.05
        last = ""
        while True:
            url = self.urls[self._i % len(self.urls)]
            try:
                r = self.http.request(method, url + path, **kwargs)
            except (httpx.TransportError, httpx.TooManyRedirects) as exc:
                last = f"{type(exc).__name__}: {exc}"
                self.retries[type(exc).__name__] += 1
            else:
                if r.status_code != 503:
                    return r
                last = f"503 {r.text[:300]}"
                self.retries["503"] += 1
            if time.monotonic() + pause > deadline:
                raise GaveUp(f"{method} {path}: no answer within {self.total_s}s; last: {last}")
            self._i += 1  # another broker
            time.sleep(pause)
            pause = min(pause * 2, 0.5)

    def get(self, path: str, **kwargs: Any) -> httpx.Response:
        return self.request("GET", path, **kwargs)

    def post(self, path: str, **kwargs: Any) -> httpx.Response:
        return self.request("POST", path, **kwargs)

    def put(self, path: str, **kwargs: Any) -> httpx.Response:
        return self.request("PUT", path, **kwargs)


# --- the API, as the tests use it ----------------------------------------------------------
def data(topic: str) -> str:
    return f"/v1/topics/{NS}/{topic}"


def admin(topic: str) -> str:
    return f"/admin/v2/persistent/{NS}/{topic}"


def lookup_path(topic: str) -> str:
    return f"/lookup/v2/topic/persistent/{NS}/{topic}"


def owner_url(client: CarefulClient, topic: str) -> str:
    r = client.get(lookup_path(topic))
    assert r.status_code == 200, r.text
    return str(r.json()["httpUrl"])


@dataclass(frozen=True)
class Accepted:
    """A message the cluster answered for: stored (`message_id`) or a duplicate of a stored one."""

    seq: int
    message_id: str | None
    at: float  # monotonic time of the answer
    served_by: str  # the broker URL that answered


def produce(client: CarefulClient, topic: str, producer: str, seqs: list[int]) -> list[Accepted]:
    """One batch with fixed sequence ids, through the careful client (its retries are safe with
    deduplication on); asserts a 200 in the end."""
    body = {
        "producer_name": producer,
        "messages": [{"value": f"{producer}:{s}", "sequence_id": s} for s in seqs],
    }
    r = client.post(data(topic) + "/messages", json=body)
    assert r.status_code == 200, f"{r.status_code} {r.text}"
    now = time.monotonic()
    served = f"{r.url.scheme}://{r.url.host}:{r.url.port}"
    results = r.json()["results"]
    return [
        Accepted(s, None if res["duplicate"] else res["message_id"], now, served)
        for s, res in zip(seqs, results, strict=True)
    ]


def read_all(client: CarefulClient, topic: str, bound_s: float = 60.0) -> list[dict[str, Any]]:
    """Every message of the topic from `earliest`, in topic order (a reader, page by page)."""
    out: list[dict[str, Any]] = []
    start = "earliest"
    deadline = time.monotonic() + bound_s
    while time.monotonic() < deadline:
        r = client.get(data(topic) + "/messages", params={"start": start, "max_messages": 1000})
        assert r.status_code == 200, r.text
        page = r.json()
        if page["next"] is None:
            return out
        out.extend(page["messages"])
        start = page["next"]
    raise TimeoutError(f"the reader did not reach the end of {topic} in {bound_s}s")


def id_key(message_id: str) -> tuple[int, int, int]:
    ledger, entry, index = message_id.split(":")
    return int(ledger), int(entry), int(index)


def subscribe(client: CarefulClient, topic: str, sub: str, **options: Any) -> None:
    r = client.put(data(topic) + f"/subscriptions/{sub}", json={"initial_position": "earliest", **options})
    assert r.status_code in (200, 201), r.text


def receive(
    client: CarefulClient, topic: str, sub: str, max_messages: int = 100, wait_ms: int = 200
) -> list[dict[str, Any]]:
    r = client.get(
        data(topic) + f"/subscriptions/{sub}/messages",
        params={"max_messages": max_messages, "wait_ms": wait_ms, "consumer_id": "c"},
    )
    assert r.status_code == 200, r.text
    return list(r.json()["messages"])


def ack(client: CarefulClient, topic: str, sub: str, message_ids: list[str]) -> None:
    if message_ids:
        r = client.post(data(topic) + f"/subscriptions/{sub}/ack", json={"message_ids": message_ids})
        assert r.status_code == 204, r.text


def direct(method: str, url: str, bound_s: float = 30.0, **kwargs: Any) -> httpx.Response:
    """One request to one broker, redirects not followed, asked again while it answers 503
    (retry later: e.g. a broker that could not renew its lease in time on a busy machine)."""
    deadline = time.monotonic() + bound_s
    while True:
        r = httpx.request(method, url, timeout=10, follow_redirects=False, **kwargs)
        if r.status_code != 503 or time.monotonic() > deadline:
            return r
        time.sleep(0.2)


def brokers_listed(url: str) -> dict[str, dict[str, Any]]:
    r = httpx.get(f"{url}/admin/v2/brokers", timeout=5)
    assert r.status_code == 200, r.text
    return {b["brokerId"]: b for b in r.json()}


@contextlib.contextmanager
def threads_running(targets: list[Any]) -> Iterator[threading.Event]:
    """Run each callable(stop_event) in a daemon thread; on the way out, set the event and join
    them (bounded); the first exception a thread raised is raised here."""
    stop = threading.Event()
    errors: list[BaseException] = []

    def run(target: Any) -> None:
        try:
            target(stop)
        except BaseException as exc:  # reported to the test below
            errors.append(exc)
            stop.set()

    threads = [threading.Thread(target=run, args=(t,), daemon=True) for t in targets]
    for t in threads:
        t.start()
    try:
        yield stop
    finally:
        stop.set()
        for t in threads:
            t.join(timeout=90)
    if any(t.is_alive() for t in threads):
        raise TimeoutError("a load thread did not stop within 90s")
    if errors:
        raise errors[0]
