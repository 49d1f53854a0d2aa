"""Dead letters across brokers (two brokers, one bookie, PostgreSQL): the dead-letter topic is
owned by the other broker than the one serving the subscription, so the poison message is
written there through the owner's REST API, then acked on the original. Exactly
max_redeliveries + 1 deliveries, one dead letter, with where it came from and why."""

from __future__ import annotations

from tests.cluster.conftest import StartCluster
from tests.cluster.harness import NS, ack, data, owner_url, read_all, receive, subscribe


def test_a_poison_message_reaches_a_dead_letter_topic_owned_by_another_broker(
    start_cluster: StartCluster,
) -> None:
    cluster = start_cluster(2)
    with cluster.client() as client:
        source = "poison-src"
        r = client.post(
            data(source) + "/messages", json={"messages": [{"key": "k", "value": "bad"}, {"value": "ok"}]}
        )
        assert r.status_code == 200, r.text
        poison_id = r.json()["results"][0]["message_id"]
        here = owner_url(client, source)
        # A dead-letter topic that the lookups give to the other broker.
        dlq = next(f"poison-dlq-{i}" for i in range(100) if owner_url(client, f"poison-dlq-{i}") != here)
        subscribe(client, source, "s", max_redeliveries=1, dead_letter_topic=f"{NS}/{dlq}")
        deliveries = []
        for _ in range(2):
            got = receive(client, source, "s", wait_ms=0)
            deliveries += [m["redelivery_count"] for m in got if m["message_id"] == poison_id]
            ack(client, source, "s", [m["message_id"] for m in got if m["message_id"] != poison_id])
            r = client.post(data(source) + "/subscriptions/s/nack", json={"message_ids": [poison_id]})
            assert r.status_code == 204, r.text
        assert deliveries == [0, 1]
        assert receive(client, source, "s", wait_ms=0) == []  # written to the other broker, acked
        (letter,) = read_all(client, dlq)
        assert letter["value"] == "bad" and letter["key"] == "k"
        assert letter["properties"] == {
            "REAL_TOPIC": f"{NS}/{source}",
            "REAL_SUBSCRIPTION": "s",
            "ORIGIN_MESSAGE_ID": poison_id,
            "DEAD_LETTER_REASON": "nacked",
        }
        assert owner_url(client, dlq) != here and owner_url(client, source) == here
        assert receive(client, source, "s", wait_ms=500) == []
