"""Several brokers (real processes, PostgreSQL): a Pulsar client that reaches a broker which does
not own its topic is sent by LOOKUP to the owner (Redirect, authoritative, the owner's Pulsar
address from the broker registry), and produces and consumes there."""

from __future__ import annotations

import pulsar
import pytest

from tests.cluster.conftest import StartCluster
from tests.cluster.harness import admin, lookup_path, owner_url

pytestmark = pytest.mark.timeout(300)
TOPIC = "pulsar-owned"


def test_lookup_redirects_to_the_owner(start_cluster: StartCluster) -> None:
    cluster = start_cluster(2, QUIRE_PULSAR_PORT="auto")
    with cluster.client() as http:
        assert http.put(admin(TOPIC)).status_code in (200, 204)
        owner = owner_url(http, TOPIC)
        native = http.get(lookup_path(TOPIC)).json()["nativeUrl"]
    other = next(b for b in cluster.brokers if b.url != owner)
    assert native == next(b for b in cluster.brokers if b.url == owner).pulsar  # REST lookup too
    # Asked at the broker that does not own the topic; without the redirect that broker
    # refuses (ServiceNotReady) and the client gives up after its operation timeout.
    client = pulsar.Client(other.pulsar, operation_timeout_seconds=20)
    try:
        name = f"persistent://public/default/{TOPIC}"
        consumer = client.subscribe(name, "s", initial_position=pulsar.InitialPosition.Earliest)
        producer = client.create_producer(name)
        sent = producer.send(b"to the owner")
        got = consumer.receive(10_000)
        assert (got.data(), got.message_id()) == (b"to the owner", sent)
    finally:
        client.close()
    with cluster.client() as http:
        r = http.get(f"/v1/topics/public/default/{TOPIC}/messages", params={"start": "earliest"})
        assert [m["value"] for m in r.json()["messages"]] == ["to the owner"]
