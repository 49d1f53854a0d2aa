"""What the listener has open across its connections: producers by topic and name, consumers by
topic and subscription -- the broker-wide rules (a producer name once per topic, exclusive
producers and subscriptions) are checked here."""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from .errors import PulsarError
from .proto import pulsar_api_pb2 as pb

SHARED, EXCLUSIVE, WAIT_FOR_EXCLUSIVE, EXCLUSIVE_WITH_FENCING = 0, 1, 2, 3


class Registry:
    def __init__(self) -> None:
        self.producers: dict[str, dict[str, Any]] = defaultdict(dict)  # topic -> name -> Producer
        self.exclusive: dict[str, str] = {}  # topic -> the name of its exclusive producer
        self.consumers: dict[tuple[str, str], list[Any]] = defaultdict(list)

    def add_producer(self, topic: str, name: str, access_mode: int, producer: Any) -> None:
        on_topic = self.producers[topic]
        if name in on_topic:
            raise PulsarError(f"producer {name} is already connected to {topic}", pb.ProducerBusy)
        if topic in self.exclusive or (access_mode != SHARED and on_topic):
            raise PulsarError(f"{topic} has an exclusive producer, or producers already", pb.ProducerFenced)
        on_topic[name] = producer
        if access_mode != SHARED:
            self.exclusive[topic] = name

    def remove_producer(self, topic: str, name: str, producer: Any) -> None:
        on_topic = self.producers.get(topic, {})
        if on_topic.get(name) is producer:
            del on_topic[name]
            if self.exclusive.get(topic) == name:
                del self.exclusive[topic]
        if not on_topic:
            self.producers.pop(topic, None)

    def add_consumer(self, topic: str, subscription: str, sub_type: int, consumer: Any) -> None:
        present = self.consumers[(topic, subscription)]
        if present and (sub_type == pb.CommandSubscribe.Exclusive or present[0].sub_type != sub_type):
            raise PulsarError(
                f"subscription {subscription} of {topic} has a consumer of type "
                f"{pb.CommandSubscribe.SubType.Name(present[0].sub_type)} already",
                pb.ConsumerBusy,
            )
        present.append(consumer)

    def remove_consumer(self, topic: str, subscription: str, consumer: Any) -> None:
        present = self.consumers.get((topic, subscription), [])
        if consumer in present:
            present.remove(consumer)
        if not present:
            self.consumers.pop((topic, subscription), None)
        else:
            self.announce_active(topic, subscription)

    def announce_active(self, topic: str, subscription: str) -> None:
        """Failover: tell each consumer whether it is the active one, when that changed
        (ACTIVE_CONSUMER_CHANGE). The active one is the least Quire consumer id, the one Quire's
        failover subscription serves; the ids sort as Pulsar's rule (priority, then name). Of
        partition i of a partitioned topic (each partition its own Pulsar subscription): the
        consumer at i mod n in that order, Pulsar's rule for partitions; the consumer fetches
        only while active (`Consumer._standby`)."""
        present = self.consumers.get((topic, subscription), [])
        if not present or present[0].sub_type != pb.CommandSubscribe.Failover:
            return
        ordered = sorted(present, key=lambda c: c.quire_id)
        partition = ordered[0].target.partition
        active = ordered[0] if partition is None else ordered[partition % len(ordered)]
        for consumer in present:
            is_active = consumer is active
            if consumer.active is not is_active:
                consumer.active = is_active
                consumer.wake.set()
                change = pb.CommandActiveConsumerChange(consumer_id=consumer.consumer_id, is_active=is_active)
                consumer.conn.send(
                    pb.BaseCommand(type=pb.BaseCommand.ACTIVE_CONSUMER_CHANGE, active_consumer_change=change)
                )
