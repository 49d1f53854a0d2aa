"""Kafka admin calls through each client's admin client (CreateTopics, DeleteRecords); kcat has
none, so REST stands in for it. Every call is bounded."""

from __future__ import annotations

from typing import Any

from tests.kafka_clients.clients import CLIENT_S, run_async
from tests.kafka_clients.support import Standalone


def create_topic(
    client: str, quire: Standalone, topic: str, partitions: int = 1, configs: dict[str, str] | None = None
) -> None:
    """Create the topic with the client's admin client (a replication factor of 1: Quire serves
    CreateTopics up to v3, before KIP-464's broker default); kcat's over REST (the partitions,
    then compactionPolicy for cleanup.policy=compact)."""
    configs = configs or {}
    if client == "kcat":
        _rest_create(quire, topic, partitions, configs)
    elif client == "confluent":
        from confluent_kafka.admin import AdminClient, NewTopic

        admin = AdminClient({"bootstrap.servers": quire.bootstrap})
        futures = admin.create_topics([NewTopic(topic, partitions, 1, config=configs)])
        futures[topic].result(CLIENT_S)
    elif client == "kafka-python":
        from kafka.admin import KafkaAdminClient
        from kafka.admin import NewTopic as KafkaPythonNewTopic

        kp_admin = KafkaAdminClient(bootstrap_servers=quire.bootstrap)
        try:
            result = kp_admin.create_topics(
                [KafkaPythonNewTopic(topic, partitions, 1, topic_configs=configs)]
            )
        finally:
            kp_admin.close()
        assert [t["error_code"] for t in result["topics"]] == [0], result
    else:
        run_async(lambda: _aiokafka_create(quire.bootstrap, topic, partitions, configs))


def _rest_create(quire: Standalone, topic: str, partitions: int, configs: dict[str, str]) -> None:
    assert set(configs) <= {"cleanup.policy"}, configs
    if partitions > 1:
        r = quire.admin("PUT", topic, "partitions", json=partitions)
    else:
        r = quire.admin("PUT", topic)
    assert r.status_code == 204, r.text
    if configs.get("cleanup.policy") == "compact":
        r = quire.admin("POST", topic, "compactionPolicy", json={"minCleanableDirtyRatio": 0.5})
        assert r.status_code == 204, r.text


async def _aiokafka_create(bootstrap: str, topic: str, partitions: int, configs: dict[str, str]) -> None:
    from aiokafka.admin import AIOKafkaAdminClient, NewTopic

    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
    await admin.start()
    try:
        response: Any = await admin.create_topics([NewTopic(topic, partitions, 1, topic_configs=configs)])
    finally:
        await admin.close()
    assert [error[1] for error in response.topic_errors] == [0], response


def delete_records(client: str, bootstrap: str, topic: str, partition: int, before: int) -> int:
    """Kafka's DeleteRecords through the client's admin client: the new low watermark."""
    if client == "confluent":
        from confluent_kafka import TopicPartition
        from confluent_kafka.admin import AdminClient

        admin = AdminClient({"bootstrap.servers": bootstrap})
        futures = admin.delete_records([TopicPartition(topic, partition, before)])
        (future,) = futures.values()
        return int(future.result(CLIENT_S).low_watermark)
    if client == "kafka-python":
        from kafka import TopicPartition as KafkaPythonTP
        from kafka.admin import KafkaAdminClient

        kp_admin = KafkaAdminClient(bootstrap_servers=bootstrap)
        tp = KafkaPythonTP(topic, partition)
        try:
            result = kp_admin.delete_records({tp: before})[tp]
        finally:
            kp_admin.close()
        assert result["error_code"] == 0, result
        return int(result["low_watermark"])
    assert client == "aiokafka", f"{client} has no DeleteRecords"
    return run_async(lambda: _aiokafka_delete_records(bootstrap, topic, partition, before))


async def _aiokafka_delete_records(bootstrap: str, topic: str, partition: int, before: int) -> int:
    from aiokafka import TopicPartition
    from aiokafka.admin import AIOKafkaAdminClient, RecordsToDelete

    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
    await admin.start()
    tp = TopicPartition(topic, partition)
    try:
        return int((await admin.delete_records({tp: RecordsToDelete(before)}))[tp])
    finally:
        await admin.close()
