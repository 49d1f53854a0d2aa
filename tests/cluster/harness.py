"""A cluster of real processes for the several-brokers tests: one `quire bookie` and N
`quire broker`s on one PostgreSQL schema, and a careful client that knows every broker.

Every process runs this worktree's code (`python -m app.cli` with the worktree as cwd and
PYTHONPATH), in a session of its own, on free ports, and is killed by process group at the end.
Every wait is bounded.

The careful client is what a real client of a multi-broker Quire does: it follows `307` to the
owner of a topic (httpx `follow_redirects`), and on `503` or a connection error (a dead, paused
or restarting broker) it moves to the next broker it knows and tries again, for at most
`total_s`. A produce it retries carries the same producer name and sequence ids, so with
deduplication on a retry is never stored twice.
"""

from __future__ import annotations

import contextlib
import os
import signal
import threading
import time
from collections import Counter
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

from tests.support import REPO, QuireProcess, free_port, port_open, wait_until

START_TIMEOUT_S = 90.0  # a loaded two-core machine starts a broker in a few seconds, at worst ~30
STOP_TIMEOUT_S = 30.0
LEASE_MS = 2_000
HEARTBEAT_MS = 500
SHORT_LEASES = {
    "QUIRE_BROKER_LEASE_MS": str(LEASE_MS),
    "QUIRE_BROKER_HEARTBEAT_INTERVAL_MS": str(HEARTBEAT_MS),
}
BOOKIE_HEARTBEAT = {"QUIRE_BOOKIE_HEARTBEAT_INTERVAL_MS": "500", "QUIRE_BOOKIE_HEARTBEAT_TIMEOUT_MS": "5000"}
# Keep every message readable from `earliest` (the default retention deletes acked ledgers).
KEEP_ALL = {"QUIRE_RETENTION_TIME_MINUTES": "-1", "QUIRE_RETENTION_SIZE_MB": "-1"}
NS = "public/default"


@dataclass
class Broker:
    """One `quire broker` process; `port` is kept by its replacement."""

    name: str
    port: int
    process: QuireProcess
    paused: bool = False

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

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
        return f"127.0.0.1:{self.port}"

    @property
    def pid(self) -> int:
        return self.process.pid

    def alive(self) -> bool:
        return self.process.alive()

    def log(self) -> str:
        return self.process.log()


@dataclass
class Cluster:
    root: Path
    database_url: str
    env: dict[str, str] = field(default_factory=dict)  # extra settings of every broker
    short_leases: bool = True  # else the settings' default lease and heartbeat
    bookie_port: int = field(default_factory=free_port)
    bookie: QuireProcess | None = None
    brokers: list[Broker] = field(default_factory=list)
    _retired: list[Broker] = field(default_factory=list)
    _starts: int = 0

    # --- processes ---------------------------------------------------------------------------
    def start(self, brokers: int) -> Cluster:
        """The bookie and the brokers start together (a broker waits for a live bookie, and the
        schema migration is serialised by a lock), which saves a slow machine a few seconds."""
        try:
            self._spawn_bookie()
            started = [self._spawn_broker() for _ in range(brokers)]
            self._wait_bookie()
            with ThreadPoolExecutor(len(started)) as pool:
                list(pool.map(self.wait_ready, started))
        except BaseException:
            self.stop()  # a cluster that failed to start leaves no process behind
            raise
        return self

    def _spawn_bookie(self) -> None:
        env = {
            "PYTHONPATH": str(REPO),
            "QUIRE_DATABASE_URL": self.database_url,
            "QUIRE_BOOKIE_HOST": "127.0.0.1",
            **BOOKIE_HEARTBEAT,
        }
        args = ["bookie", "--data-dir", str(self.root / "bookie"), "--port", str(self.bookie_port)]
        self.bookie = QuireProcess(args, env, self.root / "bookie.log").start()

    def _wait_bookie(self) -> None:
        bookie = self.bookie
        assert bookie is not None

        def up() -> bool:
            if not bookie.alive():
                raise RuntimeError(f"bookie exited at start:\n{bookie.log()[-3000:]}")
            return port_open(self.bookie_port)

        wait_until(up, START_TIMEOUT_S, "bookie port")

    def broker_env(self, port: int, name: str, extra: dict[str, str] | None = None) -> dict[str, str]:
        return {
            "PYTHONPATH": str(REPO),
            "QUIRE_DATA_DIR": str(self.root / name),
            "QUIRE_DATABASE_URL": self.database_url,
            "QUIRE_BOOKIES": f'["127.0.0.1:{self.bookie_port}"]',
            "QUIRE_HOST": "127.0.0.1",
            "QUIRE_PORT": str(port),
            "QUIRE_BOOKIE_WAIT_TIMEOUT_MS": str(int(START_TIMEOUT_S * 1000)),
            **BOOKIE_HEARTBEAT,
            **(SHORT_LEASES if self.short_leases else {}),
            **self.env,
            **(extra or {}),
            # "auto": a Kafka (Pulsar) listener on a port of each broker's own
            **({"QUIRE_KAFKA_PORT": str(free_port())} if self.env.get("QUIRE_KAFKA_PORT") == "auto" else {}),
            **{k: str(free_port()) for k in ("QUIRE_PULSAR_PORT",) if self.env.get(k) == "auto"},
        }

    def _spawn_broker(self, port: int | None = None, env: dict[str, str] | None = None) -> Broker:
        self._starts += 1
        name = f"broker{self._starts}"
        port = port or free_port()
        process = QuireProcess(
            ["broker"], self.broker_env(port, name, env), self.root / f"{name}.log"
        ).start()
        broker = Broker(name, port, process)
        self.brokers.append(broker)
        return broker

    def start_broker(self, port: int | None = None, env: dict[str, str] | None = None) -> Broker:
        """A new broker (on `port`, e.g. a stopped one's; with `env`: settings of its own),
        ready when this returns."""
        broker = self._spawn_broker(port, env)
        self.wait_ready(broker)
        return broker

    def wait_ready(self, broker: Broker) -> None:
        def ready() -> bool:
            if not broker.alive():
                raise RuntimeError(f"{broker.name} exited at start:\n{broker.log()[-3000:]}")
            try:
                return httpx.get(f"{broker.url}/readyz", timeout=2).status_code == 200
            except httpx.HTTPError:
                return False

        wait_until(ready, START_TIMEOUT_S, f"{broker.name} /readyz", interval_s=0.1)

    def kill9(self, broker: Broker) -> None:
        broker.process.kill9()
        broker.process.stop()
        self._retire(broker)

    def sigterm(self, broker: Broker, timeout_s: float = STOP_TIMEOUT_S) -> int | None:
        """SIGTERM (the graceful handover) and wait for the exit; its exit code."""
        assert broker.process.proc is not None
        os.killpg(broker.pid, signal.SIGTERM)
        try:
            code = broker.process.proc.wait(timeout=timeout_s)
        finally:
            broker.process.stop()
            self._retire(broker)
        return code

    def pause(self, broker: Broker) -> None:
        os.killpg(broker.pid, signal.SIGSTOP)
        broker.paused = True

    def resume(self, broker: Broker) -> None:
        os.killpg(broker.pid, signal.SIGCONT)
        broker.paused = False

    def _retire(self, broker: Broker) -> None:
        if broker in self.brokers:
            self.brokers.remove(broker)
            self._retired.append(broker)

    def stop(self) -> None:
        for broker in [*self.brokers, *self._retired]:
            if broker.paused:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(broker.pid, signal.SIGCONT)
            broker.process.stop(timeout_s=15)
        if self.bookie is not None:
            self.bookie.stop()

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
