"""Kafka clients follow a topic's leadership through Metadata when its ownership moves between
brokers (real processes, PostgreSQL): each broker's Metadata names the owner as the partition's
leader, and a producer keeps producing when the owner stops and the topic moves to the other broker, with
offsets continuous."""

from __future__ import annotations

import time

from kafka import KafkaConsumer, KafkaProducer, TopicPartition
from kafka.admin import KafkaAdminClient

from tests.cluster.conftest import StartCluster
from tests.cluster.harness import KEEP_ALL, Broker, Cluster, owner_url

TOPIC = "moving"


def leader_of(bootstrap: str) -> int:
    """The partition's leader node id as this broker's Metadata answers it."""
    client = KafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=10_000)
    try:
        (meta,) = client.describe_topics([TOPIC])
        partition = meta["partitions"][0]
        return int(partition.get("leader", partition.get("leader_id", -1)))
    finally:
        client.close()


def owner(cluster: Cluster) -> Broker:
    with cluster.client() as client:
        url = owner_url(client, TOPIC)
    return next(b for b in cluster.brokers if b.url == url)


def test_a_producer_follows_the_topic_to_its_new_owner(start_cluster: StartCluster) -> None:
    cluster = start_cluster(2, QUIRE_KAFKA_PORT="auto", **KEEP_ALL)
    first, second = cluster.brokers
    producer = KafkaProducer(
        bootstrap_servers=[first.kafka, second.kafka], acks="all", retries=50, retry_backoff_ms=200
    )
    try:
        offsets = [producer.send(TOPIC, b"before-%d" % i).get(timeout=30).offset for i in range(5)]
        assert offsets == [0, 1, 2, 3, 4]
        # both brokers name the same leader: the owner
        assert leader_of(first.kafka) == leader_of(second.kafka)
        before = owner(cluster)
        survivor = second if before is first else first
        cluster.sigterm(before)  # hands its topics over; the producer must find the new owner
        after = [producer.send(TOPIC, b"after-%d" % i).get(timeout=30).offset for i in range(5)]
        assert after == list(range(after[0], after[0] + 5))
    finally:
        producer.close(timeout=10)
    assert owner(cluster).name == survivor.name
    consumer = KafkaConsumer(bootstrap_servers=survivor.kafka, enable_auto_commit=False)
    try:
        tp = TopicPartition(TOPIC, 0)
        consumer.assign([tp])
        consumer.seek(tp, 0)
        seen: list[int] = []
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and (not seen or seen[-1] < after[-1]):
            for records in consumer.poll(timeout_ms=1_000).values():
                seen += [r.offset for r in records]
        assert seen == list(range(after[-1] + 1))  # continuous across the move, nothing lost
    finally:
        consumer.close()
