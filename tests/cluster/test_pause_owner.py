"""A paused owner (SIGSTOP past its lease, then SIGCONT), real processes on PostgreSQL.

While it is stopped, the other broker takes its topics over (the producers' careful clients
time out on it and move on). Once resumed, the stale broker must not write: a produce that
waited in its socket all along, and new ones sent straight to it, are answered 307 (to the new
owner) or 503, never 200 with a message id that then is missing. The topics are not forked:
from `earliest` every accepted message is there once, in order. The resumed broker registers a
new session, shows in /admin/v2/brokers again, and is given topics again.
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
    admin,
    brokers_listed,
    data,
    id_key,
    owner_url,
    produce,
    read_all,
    threads_running,
)
from tests.cluster.load import TopicLoad, check_stored
from tests.support import wait_until

TOPICS = [f"pause-{i}" for i in range(4)]
BOUND_S = 60.0
ATTEMPT = httpx.Timeout(2.0, connect=1.0)  # a paused broker accepts connections, answers nothing


class Stale:
    """Produces sent straight to the paused broker, and what it answered."""

    def __init__(self, broker: Broker) -> None:
        self.broker = broker
        self.answers: list[tuple[str, str, int, str, Any]] = []  # topic, producer, status, location, body
        self.lock = threading.Lock()
        self._n = 0

    def send(self, topic: str, timeout_s: float) -> None:
        with self.lock:
            self._n += 1
            producer = f"stale-{self._n}"
        body = {"producer_name": producer, "messages": [{"value": producer, "sequence_id": 0}]}
        try:
            r = httpx.post(self.broker.url + data(topic) + "/messages", json=body, timeout=timeout_s)
        except httpx.HTTPError as exc:
            answer = (topic, producer, 0, "", repr(exc))
        else:
            answer = (topic, producer, r.status_code, r.headers.get("location", ""), r.json())
        with self.lock:
            self.answers.append(answer)


def test_a_paused_owner_cannot_write_once_resumed_and_comes_back(start_cluster: StartCluster) -> None:
    cluster = start_cluster(2, QUIRE_DEDUPLICATION_ENABLED="true", **KEEP_ALL)
    loads = {t: TopicLoad(t, cluster.urls, timeout=ATTEMPT) for t in TOPICS}
    with CarefulClient(cluster.urls) as client:
        for topic in TOPICS:
            assert client.put(admin(topic)).status_code == 204
        owners = {t: owner_url(client, t) for t in TOPICS}
    paused = max(cluster.brokers, key=lambda b: list(owners.values()).count(b.url))
    (other,) = [b for b in cluster.brokers if b is not paused]
    moved = [t for t in TOPICS if owners[t] == paused.url]
    stale = Stale(paused)
    queued: list[threading.Thread] = []
    with threads_running([x.produce_loop for x in loads.values()]) as producers:
        wait_until(
            lambda: all(len(x.accepted) >= 20 for x in loads.values()) or producers.is_set(),
            BOUND_S,
            "load on every topic",
        )
        cluster.pause(paused)
        paused_at = time.monotonic()
        # Requests that wait in the paused broker's socket: it serves them first when resumed.
        queued = [threading.Thread(target=stale.send, args=(t, 60.0), daemon=True) for t in moved]
        for thread in queued:
            thread.start()
        wait_until(
            lambda: paused.broker_id not in brokers_listed(other.url),
            BOUND_S,
            "the paused broker's lease ending",
        )
        wait_until(
            lambda: (
                all(loads[t].first_accept_by_other(paused.url, paused_at) for t in moved)
                or producers.is_set()
            ),
            BOUND_S,
            "the other broker accepting the paused broker's topics",
        )
        taken_after = (
            max(loads[t].first_accept_by_other(paused.url, paused_at) or 0 for t in moved) - paused_at
        )
        cluster.resume(paused)
        resumed_at = time.monotonic()
        while time.monotonic() < resumed_at + 2.0:  # straight at the stale broker, as it wakes up
            for topic in moved:
                stale.send(topic, 10.0)
        for thread in queued:
            thread.join(timeout=BOUND_S)
        wait_until(
            lambda: paused.broker_id in brokers_listed(other.url),
            BOUND_S,
            "the resumed broker registered again",
        )
    print(
        f"\nSIGSTOP of {paused.broker_id} (owner of {len(moved)} topics): the other broker accepted "
        f"all of them {taken_after:.2f}s after the pause; answers of the resumed broker: "
        f"{sorted({a[2] for a in stale.answers})} over {len(stale.answers)} produces"
    )
    with CarefulClient(cluster.urls) as client:
        problems = [p for load in loads.values() for p in check_stored(client, load)]
        problems += check_stale_answers(client, stale, other)
    assert not problems, "\n".join(problems) + "\n" + cluster.logs()
    assert len(stale.answers) > len(moved)
    assert "lost session" in paused.log()
    check_owns_again(cluster.urls, paused)


def check_stale_answers(client: CarefulClient, stale: Stale, other: Broker) -> list[str]:
    """307 to the new owner or 503; a 200 only if its message is there, once, at its id."""
    problems: list[str] = []
    for topic, producer, status, location, body in stale.answers:
        if status == 307:
            if not location.startswith(other.url + "/"):
                problems.append(f"{topic}: 307 from the stale broker to {location}, not the new owner")
        elif status == 200:
            message_id = body["results"][0]["message_id"]
            found = [m for m in read_all(client, topic) if m["producer_name"] == producer]
            if [m["message_id"] for m in found] != [message_id]:
                problems.append(
                    f"{topic}: the stale broker answered 200 {message_id} for {producer}; stored: {found}"
                )
        elif status != 503:
            problems.append(f"{topic}: the stale broker answered {status} {body}")
    return problems


def check_owns_again(urls: list[str], broker: Broker) -> None:
    """New topics are assigned to the resumed broker (it owns none now, so it is least loaded)."""
    with CarefulClient(urls) as client:
        deadline = time.monotonic() + BOUND_S
        i = 0
        while time.monotonic() < deadline:
            topic = f"after-{i}"
            i += 1
            if owner_url(client, topic) != broker.url:
                continue
            (accepted,) = produce(client, topic, "p", [0])
            assert accepted.served_by == broker.url
            r = client.get(admin(topic) + "/stats")
            assert r.status_code == 200 and r.json()["ownerBroker"] == broker.broker_id
            assert [id_key(m["message_id"]) for m in read_all(client, topic)] == [
                id_key(accepted.message_id or "")
            ]
            return
    raise AssertionError(f"no new topic was given to the resumed broker in {BOUND_S}s ({i} tried)")
