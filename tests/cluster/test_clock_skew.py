"""A broker whose wall clock runs far ahead (QUIRE_TEST_CLOCK_OFFSET_MS), real processes on
PostgreSQL (reliability review 2026-11-28, finding 11). Leases are stamped and judged by the
store's clock, so the skewed broker must not see the live broker's lease as over: it must not
take the topics that broker owns, and must name it as their owner."""

from __future__ import annotations

from tests.cluster.conftest import StartCluster
from tests.cluster.harness import (
    LEASE_MS,
    CarefulClient,
    admin,
    brokers_listed,
    data,
    direct,
    lookup_path,
    produce,
)

TOPICS = [f"skew-{i}" for i in range(4)]
AHEAD_MS = 600 * LEASE_MS  # twenty minutes: far beyond any lease


def test_a_broker_with_a_clock_far_ahead_does_not_take_a_live_brokers_topics(
    start_cluster: StartCluster,
) -> None:
    cluster = start_cluster(1)
    (live,) = cluster.brokers
    with CarefulClient(cluster.urls) as client:
        for topic in TOPICS:
            assert client.put(admin(topic)).status_code == 204
            produce(client, topic, "p", [0])
    skewed = cluster.start_broker(env={"QUIRE_TEST_CLOCK_OFFSET_MS": str(AHEAD_MS)})
    assert set(brokers_listed(skewed.url)) == {live.broker_id, skewed.broker_id}
    for topic in TOPICS:
        r = direct("GET", skewed.url + lookup_path(topic))
        assert r.status_code == 200, r.text
        assert r.json()["httpUrl"] == live.url, f"the skewed broker answered {r.json()} for {topic}"
        r = direct("POST", skewed.url + data(topic) + "/messages", json={"messages": [{"value": "x"}]})
        assert r.status_code == 307 and r.headers["location"].startswith(live.url + "/"), (
            r.status_code,
            r.text,
        )
    assert set(brokers_listed(live.url)) == {live.broker_id, skewed.broker_id}
    # New topics still spread over both: the skewed broker takes its share of unowned ones.
    with CarefulClient(cluster.urls) as client:
        for topic in ("skew-new-0", "skew-new-1", "skew-new-2", "skew-new-3"):
            assert client.put(admin(topic)).status_code == 204
            produce(client, topic, "p", [0])
