"""Three brokers, one bookie, real processes on PostgreSQL: any broker answers for any topic.

- Produce through broker A, consume through B, admin through C: every answer right, whichever
  broker owns each topic (the careful client follows the 307s to the owner); a request to a
  non-owner, not followed, is a 307 whose Location is the owner's URL with the same path and
  query, and writes nothing.
- Ownership races: 50 topics looked up at once from all three brokers; each topic gets exactly
  one owner, which every lookup and the owner's stats agree on, and the topics spread.
"""

from __future__ import annotations

import time
from collections import defaultdict
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import httpx

from tests.cluster.conftest import StartCluster
from tests.cluster.harness import (
    NS,
    CarefulClient,
    ack,
    admin,
    brokers_listed,
    data,
    lookup_path,
    owner_url,
    produce,
    read_all,
    receive,
    subscribe,
)

TOPICS = ["orders", "payments", "audit", "events"]
PARTITIONED = "clicks"


def test_produce_at_a_consume_at_b_admin_at_c(start_cluster: StartCluster) -> None:
    cluster = start_cluster(3)
    a, b, c = cluster.brokers
    with (
        CarefulClient([a.url]) as at_a,
        CarefulClient([b.url]) as at_b,
        CarefulClient([c.url]) as at_c,
    ):
        for topic in TOPICS:
            assert at_c.put(admin(topic)).status_code == 204
            assert at_a.put(admin(topic)).status_code == 409  # one topic, whoever is asked
        produced = {t: produce(at_a, t, "p", list(range(10))) for t in TOPICS}
        for topic in TOPICS:
            subscribe(at_b, topic, "s")
            got = receive(at_b, topic, "s", max_messages=100, wait_ms=2000)
            assert [m["value"] for m in got] == [f"p:{i}" for i in range(10)]
            assert [m["message_id"] for m in got] == [x.message_id for x in produced[topic]]
            ack(at_b, topic, "s", [m["message_id"] for m in got])
            assert receive(at_b, topic, "s", wait_ms=0) == []
        owners = {t: owner_url(at_c, t) for t in TOPICS}
        assert set(owners.values()) <= {a.url, b.url, c.url}
        for topic in TOPICS:
            _check_admin(at_c, topic, owners[topic])
        owners[PARTITIONED] = _check_partitioned(at_a, at_b, at_c)
        r = at_c.get(f"/admin/v2/persistent/{NS}")
        assert r.status_code == 200
        assert sorted(r.json()) == sorted(f"persistent://{NS}/{t}" for t in [*TOPICS, PARTITIONED])
        listed = brokers_listed(c.url)
        assert sorted(listed) == sorted(x.broker_id for x in cluster.brokers)
        for broker in cluster.brokers:
            assert listed[broker.broker_id]["httpUrl"] == broker.url
            assert listed[broker.broker_id]["ownedTopics"] == list(owners.values()).count(broker.url)
        _check_redirects(cluster.urls, owners)
        for topic in TOPICS:  # the 307s below stored nothing
            assert [m["value"] for m in read_all(at_a, topic)] == [f"p:{i}" for i in range(10)]


def _check_partitioned(at_a: CarefulClient, at_b: CarefulClient, at_c: CarefulClient) -> str:
    """A partitioned topic is owned as a whole: produce at A, consume at B, admin at C."""
    r = at_c.put(admin(PARTITIONED) + "/partitions", json=3)
    assert r.status_code == 204, r.text
    body = {"messages": [{"key": f"k{i}", "value": f"v{i}"} for i in range(30)]}
    r = at_a.post(data(PARTITIONED) + "/messages", json=body)
    assert r.status_code == 200, r.text
    subscribe(at_b, PARTITIONED, "s")
    got: list[dict[str, Any]] = []
    for _ in range(10):  # bounded: the partitions answer in turns
        got += receive(at_b, PARTITIONED, "s", max_messages=100, wait_ms=500)
        if len(got) >= 30:
            break
    assert sorted(m["value"] for m in got) == sorted(f"v{i}" for i in range(30))
    ack(at_b, PARTITIONED, "s", [m["message_id"] for m in got])
    owner = owner_url(at_c, PARTITIONED)
    r = at_c.get(admin(PARTITIONED) + "/stats")
    assert r.status_code == 200, r.text
    assert r.json()["partitions"] == 3 and f"http://{r.json()['ownerBroker']}" == owner
    assert r.json()["msgInCounter"] == 30 and r.json()["subscriptions"]["s"]["msgBacklog"] == 0
    r = at_c.get(admin(PARTITIONED) + "/internalStats")
    assert r.status_code == 200, r.text
    assert sorted(r.json()["partitions"]) == [f"{NS}/{PARTITIONED}-partition-{i}" for i in range(3)]
    return owner


def _check_admin(client: CarefulClient, topic: str, owner: str) -> None:
    r = client.get(admin(topic) + "/stats")
    assert r.status_code == 200, r.text
    stats = r.json()
    assert f"http://{stats['ownerBroker']}" == owner
    assert stats["msgInCounter"] == 10
    assert stats["subscriptions"]["s"]["msgBacklog"] == 0
    assert stats["subscriptions"]["s"]["unackedMessages"] == 0
    assert str(r.url).startswith(owner + "/")  # the careful client was sent to the owner
    r = client.get(admin(topic) + "/internalStats")
    assert r.status_code == 200, r.text
    internal = r.json()
    assert internal["numberOfEntries"] == 1  # one batch, one entry
    assert list(internal["cursors"]) == ["s"]
    assert internal["cursors"]["s"]["markDeletePosition"] == internal["lastConfirmedEntry"]
    r = client.get(admin(topic) + "/subscriptions")
    assert r.status_code == 200 and r.json() == ["s"]
    r = client.get(lookup_path(topic))
    assert r.json() == {"brokerUrl": owner, "httpUrl": owner, "kafkaUrl": None, "nativeUrl": None}


def _check_redirects(urls: list[str], owners: dict[str, str]) -> None:
    """At every non-owner: a 307 to the owner, same path and query, for reads and writes."""
    with httpx.Client(follow_redirects=False, timeout=5) as http:
        for topic, owner in owners.items():
            for url in urls:
                if url == owner:
                    continue
                target = admin(topic) + "/stats"
                r = http.get(url + target)
                assert r.status_code == 307, r.text
                assert r.headers["location"] == owner + target
                target = data(topic) + "/messages?start=earliest&max_messages=5"
                r = http.get(url + target)
                assert r.status_code == 307, r.text
                assert r.headers["location"] == owner + target
                body: dict[str, Any] = {"messages": [{"value": "never stored"}]}
                r = http.post(url + data(topic) + "/messages", json=body)
                assert r.status_code == 307, r.text
                assert r.headers["location"] == owner + data(topic) + "/messages"
                assert r.json()["type"].endswith("/not-owner")


def test_fifty_topics_looked_up_at_once_from_every_broker_get_one_owner_each(
    start_cluster: StartCluster,
) -> None:
    cluster = start_cluster(3)
    topics = [f"race-{i}" for i in range(50)]
    with CarefulClient(cluster.urls) as client:
        for topic in topics:
            assert client.put(admin(topic)).status_code == 204
    asks = [(topic, url) for topic in topics for url in cluster.urls]
    # One client for every thread (a client per request would spend the time building them).
    http = httpx.Client(timeout=30, limits=httpx.Limits(max_connections=len(asks)))

    unavailable: list[str] = []

    def ask(pair: tuple[str, str]) -> tuple[str, int, str]:
        """One lookup, at the same broker again after a 503 (a broker that could not renew its
        lease in time under the burst answers so; a careful client retries it)."""
        topic, url = pair
        deadline = time.monotonic() + 30
        r = http.get(url + lookup_path(topic))
        while r.status_code == 503 and time.monotonic() < deadline:
            unavailable.append(f"{url} {r.json().get('detail')}")
            time.sleep(0.2)
            r = http.get(url + lookup_path(topic))
        return topic, r.status_code, r.json()["httpUrl"] if r.status_code == 200 else r.text

    with http, ThreadPoolExecutor(max_workers=len(asks)) as pool:
        answers = list(pool.map(ask, asks))
    assert [status for _, status, _ in answers] == [200] * len(asks), [a for a in answers if a[1] != 200]
    seen: dict[str, set[str]] = defaultdict(set)
    for topic, _, url in answers:
        seen[topic].add(url)
    disagree = {t: urls for t, urls in seen.items() if len(urls) != 1}
    assert not disagree, f"topics with more than one owner named: {disagree}"
    owner = {t: next(iter(urls)) for t, urls in seen.items()}
    assert set(owner.values()) <= set(cluster.urls)
    spread = {url: list(owner.values()).count(url) for url in cluster.urls}
    assert sum(1 for n in spread.values() if n > 0) > 1, f"every topic went to one broker: {spread}"
    with CarefulClient(cluster.urls) as client:
        for topic in topics:  # the owner says so itself, through whichever broker is asked
            r = client.get(admin(topic) + "/stats")
            assert r.status_code == 200, r.text
            assert f"http://{r.json()['ownerBroker']}" == owner[topic]
            assert owner_url(client, topic) == owner[topic]  # and asking again changes nothing
    listed = brokers_listed(cluster.urls[0])
    assert {b: listed[b]["ownedTopics"] for b in listed} == {
        url.removeprefix("http://"): n for url, n in spread.items()
    }
    print(f"50 topics spread over the brokers: {spread}; 503s retried: {len(unavailable)} {unavailable[:3]}")
