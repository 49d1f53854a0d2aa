"""A topic leaving its broker on purpose (real processes, PostgreSQL).

- Unload: `PUT .../unload` closes the topic on its owner and releases the ownership (no broker
  owns it until the next lookup, which may name another broker); nothing is lost across it, and
  what the subscription acked before it is not delivered again (closing flushed the cursor).
- Long polls: a receive or a reader waiting with wait_ms=10000 on a topic whose owner unloads
  it, or gets SIGTERM, answers promptly: an empty list, or a 307 to the new owner.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

import httpx
import pytest

from tests.cluster.conftest import StartCluster
from tests.cluster.harness import (
    KEEP_ALL,
    Broker,
    CarefulClient,
    Cluster,
    ack,
    admin,
    brokers_listed,
    data,
    direct,
    owner_url,
    produce,
    read_all,
    receive,
    subscribe,
)

WAIT_MS = 10_000
PROMPT_S = WAIT_MS / 1000 / 2  # "well under the wait"


def owned(cluster: Cluster) -> dict[str, int]:
    listed = brokers_listed(cluster.urls[0])
    return {b: listed[b]["ownedTopics"] for b in listed}


def test_unload_releases_ownership_and_loses_nothing(start_cluster: StartCluster) -> None:
    cluster = start_cluster(2, QUIRE_DEDUPLICATION_ENABLED="true", **KEEP_ALL)
    with CarefulClient(cluster.urls) as client:
        subscribe(client, "u", "s")
        produce(client, "u", "p", list(range(0, 10)))
        produce(client, "u", "p", list(range(10, 20)))
        first = receive(client, "u", "s", max_messages=10, wait_ms=2000)
        assert [m["sequence_id"] for m in first] == list(range(10))
        ack(client, "u", "s", [m["message_id"] for m in first])
        before = owner_url(client, "u")
        assert owned(cluster) == {b.broker_id: int(b.url == before) for b in cluster.brokers}
        r = client.put(admin("u") + "/unload")
        assert r.status_code == 204, r.text
        assert str(r.url).startswith(before + "/")  # the owner did it
        assert owned(cluster) == {b.broker_id: 0 for b in cluster.brokers}  # released
        after = owner_url(client, "u")
        assert after in cluster.urls
        produce(client, "u", "p", list(range(20, 30)))
        got: list[dict[str, Any]] = []
        deadline = time.monotonic() + 30
        while len(got) < 20 and time.monotonic() < deadline:
            got += receive(client, "u", "s", max_messages=100, wait_ms=1000)
        assert [m["sequence_id"] for m in got] == list(range(10, 30))  # no acked one again
        assert [m["sequence_id"] for m in read_all(client, "u")] == list(range(30))
        r = client.get(admin("u") + "/stats")
        assert r.status_code == 200 and f"http://{r.json()['ownerBroker']}" == after
    print(f"\nunload: owner before {before}, after {after}")


class Poll:
    """A long poll sent straight to one broker (redirects not followed), timed."""

    def __init__(self, broker: Broker, path: str, params: dict[str, Any]) -> None:
        self.response: httpx.Response | None = None
        self.error: BaseException | None = None
        self.answered_at = 0.0
        self._thread = threading.Thread(target=self._run, args=(broker.url + path, params), daemon=True)

    def _run(self, url: str, params: dict[str, Any]) -> None:
        try:
            self.response = httpx.get(url, params=params, timeout=WAIT_MS / 1000 + 20)
        except BaseException as exc:  # reported by the test
            self.error = exc
        self.answered_at = time.monotonic()

    def start(self) -> Poll:
        self._thread.start()
        return self

    def join(self) -> httpx.Response:
        self._thread.join(timeout=WAIT_MS / 1000 + 30)
        assert not self._thread.is_alive(), "the long poll never answered"
        assert self.error is None, repr(self.error)
        assert self.response is not None
        return self.response


def _unload(cluster: Cluster, owner: Broker) -> None:
    r = direct("PUT", owner.url + admin("lp") + "/unload")
    assert r.status_code == 204, r.text


def _sigterm(cluster: Cluster, owner: Broker) -> None:
    cluster.sigterm(owner)


@pytest.mark.parametrize("leave", [_unload, _sigterm], ids=["unload", "sigterm"])
def test_long_polls_answer_promptly_when_the_topic_leaves(
    start_cluster: StartCluster, leave: Callable[[Cluster, Broker], None]
) -> None:
    cluster = start_cluster(2)
    with CarefulClient(cluster.urls) as client:
        subscribe(client, "lp", "s")
        produce(client, "lp", "p", [0])
        got = receive(client, "lp", "s", wait_ms=2000)
        assert [m["sequence_id"] for m in got] == [0]
        ack(client, "lp", "s", [m["message_id"] for m in got])  # nothing left: the polls wait
        owner_at = owner_url(client, "lp")
    (owner,) = [b for b in cluster.brokers if b.url == owner_at]
    (other,) = [b for b in cluster.brokers if b is not owner]
    polls = {
        "receive": Poll(
            owner, data("lp") + "/subscriptions/s/messages", {"wait_ms": WAIT_MS, "consumer_id": "c2"}
        ).start(),
        "reader": Poll(owner, data("lp") + "/messages", {"start": "latest", "wait_ms": WAIT_MS}).start(),
    }
    time.sleep(1.0)  # let both polls reach the broker and wait there (either way they must answer)
    left_at = time.monotonic()
    leave(cluster, owner)
    answers = {name: poll.join() for name, poll in polls.items()}
    took = {name: round(poll.answered_at - left_at, 2) for name, poll in polls.items()}
    statuses = {name: r.status_code for name, r in answers.items()}
    print(f"\nlong polls at {owner.broker_id}: {statuses} {took} s after the topic left (wait {WAIT_MS} ms)")
    for name, r in answers.items():
        if r.status_code == 307:
            assert r.headers["location"].startswith(other.url + "/"), (name, r.headers)
        else:
            assert r.status_code == 200, (name, r.text)
            assert r.json()["messages"] == [], (name, r.text)
    assert max(took.values()) < PROMPT_S, took
    with CarefulClient(cluster.urls) as client:  # and the topic is served again
        assert [m["sequence_id"] for m in read_all(client, "lp")] == [0]
        r = client.get(admin("lp") + "/stats")
        assert r.status_code == 200 and f"http://{r.json()['ownerBroker']}" in cluster.urls
