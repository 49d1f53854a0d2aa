"""A broker that left cleanly (SIGTERM: it hands its topics over and removes its registration)
is not given topics any more: a lookup right after it exited names a live broker.

The other broker knows the live brokers as of its last heartbeat, and a lookup picks the least
loaded among them: the test makes the broker that leaves the less loaded one, and looks a topic
up right after it exited, before the next heartbeat (a slow one here, 5 s, so that the other
broker's list is not refreshed in between).
"""

from __future__ import annotations

import zlib

from tests.cluster.conftest import StartCluster
from tests.cluster.harness import Broker, direct, lookup_path
from tests.support import wait_until

SLOW_HEARTBEAT = {"QUIRE_BROKER_LEASE_MS": "15000", "QUIRE_BROKER_HEARTBEAT_INTERVAL_MS": "5000"}


def favouring(leaving: Broker, staying: Broker, prefix: str) -> str:
    """A topic name whose tie between the two brokers goes to `leaving`."""
    i = 0
    while True:
        name = f"{prefix}-{i}"
        if zlib.crc32(f"public/default/{name}|{leaving.broker_id}".encode()) < zlib.crc32(
            f"public/default/{name}|{staying.broker_id}".encode()
        ):
            return name
        i += 1


def lookup(at: Broker, topic: str) -> str:
    r = direct("GET", at.url + lookup_path(topic))
    assert r.status_code == 200, r.text
    return str(r.json()["httpUrl"])


def test_a_broker_that_left_is_not_given_topics(start_cluster: StartCluster) -> None:
    cluster = start_cluster(1, **SLOW_HEARTBEAT)
    (staying,) = cluster.brokers
    for i in range(3):  # the staying broker is the more loaded one
        assert lookup(staying, f"owned-{i}") == staying.url
    leaving = cluster.start_broker()
    # Wait until the staying broker assigns to the other one (it knows it is live)...
    probes = (f"probe-{i}" for i in range(1000))
    wait_until(
        lambda: lookup(staying, next(probes)) == leaving.url, 30, "the staying broker seeing the other"
    )
    code = cluster.sigterm(leaving)
    assert code is not None
    # ...then, before its next heartbeat, ask it for a topic: the least loaded live broker is
    # the staying one, the only one.
    topic = favouring(leaving, staying, "after-leave")
    assert lookup(staying, topic) == staying.url, (
        f"{topic} was assigned to {leaving.broker_id}, which had left"
    )
