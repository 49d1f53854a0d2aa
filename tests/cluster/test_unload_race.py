"""Unload while requests for the topic keep arriving at its owner (real processes, PostgreSQL).

Requests that reach the owner while it closes the topic must not bring the topic back to it
behind the ownership's back: once the unload has answered, the topic is served by exactly one
broker, the one a lookup names (every other broker answers 307 to it); and every message the
cluster answered 200 for is stored.

Each topic is tried once; the requests land in the unload's window often, not always, so the
test unloads several topics under that pressure.
"""

from __future__ import annotations

import threading
import time
from typing import Any

import httpx

from tests.cluster.conftest import StartCluster
from tests.cluster.harness import (
    KEEP_ALL,
    Broker,
    CarefulClient,
    Cluster,
    admin,
    data,
    direct,
    lookup_path,
    read_all,
    subscribe,
)
from tests.support import wait_until

TOPICS = [f"unload-race-{i}" for i in range(6)]


class Hammer:
    """Threads sending produces and receives for one topic straight to one broker (307s not
    followed), keeping the message ids it was answered with."""

    def __init__(self, broker: Broker, topic: str, threads: int = 6) -> None:
        self.url = broker.url + data(topic)
        self.stop = threading.Event()
        self.stored: list[str] = []
        self.statuses: list[int] = []
        self._threads = [threading.Thread(target=self._run, args=(k,), daemon=True) for k in range(threads)]

    def __enter__(self) -> Hammer:
        for t in self._threads:
            t.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        for t in self._threads:
            t.join(timeout=30)

    def _run(self, k: int) -> None:
        seq = 0
        with httpx.Client(timeout=10) as http:
            while not self.stop.is_set():
                seq += 1
                try:
                    if k % 2:
                        body = {
                            "producer_name": f"h{k}",
                            "messages": [{"value": f"h{k}:{seq}", "sequence_id": seq}],
                        }
                        r = http.post(self.url + "/messages", json=body)
                        if r.status_code == 200:
                            self.stored.append(r.json()["results"][0]["message_id"])
                    else:
                        r = http.get(self.url + "/subscriptions/s/messages", params={"max_messages": 1})
                    self.statuses.append(r.status_code)
                except httpx.HTTPError:
                    self.statuses.append(0)


def serving(cluster: Cluster, topic: str) -> dict[str, Any]:
    """What each broker answers for the topic's stats, redirects not followed."""
    out: dict[str, Any] = {}
    for b in cluster.brokers:
        r = direct("GET", b.url + admin(topic) + "/stats")
        out[b.url] = (
            (200, f"http://{r.json()['ownerBroker']}")
            if r.status_code == 200
            else (r.status_code, r.headers.get("location", ""))
        )
    return out


def test_unload_under_concurrent_requests_leaves_one_owner(start_cluster: StartCluster) -> None:
    cluster = start_cluster(1, QUIRE_DEDUPLICATION_ENABLED="true", **KEEP_ALL)
    (a,) = cluster.brokers
    with CarefulClient([a.url]) as client:
        for topic in TOPICS:  # all owned by the only broker
            subscribe(client, topic, "s")
    b = cluster.start_broker()
    wait_until(lambda: direct("GET", b.url + lookup_path("probe")).status_code == 200, 30, "B serving")
    problems: list[str] = []
    stored: dict[str, list[str]] = {}
    for topic in TOPICS:
        with Hammer(a, topic) as hammer:
            time.sleep(0.3)  # requests in flight at the owner when the unload comes
            r = direct("PUT", a.url + admin(topic) + "/unload")
            assert r.status_code == 204, r.text
            time.sleep(0.3)
        stored[topic] = hammer.stored
        owner = direct("GET", b.url + lookup_path(topic)).json()["httpUrl"]
        answers = serving(cluster, topic)
        expected = {
            u: (200, owner) if u == owner else (307, owner + admin(topic) + "/stats") for u in answers
        }
        if answers != expected:
            problems.append(f"{topic}: lookup names {owner}, but the brokers answer {answers}")
    with CarefulClient(cluster.urls) as client:
        for topic in TOPICS:
            ids = {m["message_id"] for m in read_all(client, topic)}
            lost = [i for i in stored[topic] if i not in ids]
            if lost:
                problems.append(
                    f"{topic}: {len(lost)} of {len(stored[topic])} messages answered 200 not stored"
                )
    assert not problems, "\n".join(problems) + "\n" + cluster.logs()
