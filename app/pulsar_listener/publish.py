"""The one topic call a SEND becomes, behind a seam of the listener's own.

Every door publishes through the same topic call (docs/pulsar.md): today that is the topics
service's `produce`, the call the REST produce route makes, whose deduplication (by producer
name and sequence id, when the topic's policy has it on) is the only one: the listener asks it
for a producer's last stored sequence id and keeps no dedup state of its own. The listener sees
only `Publish`, so that pointing it at another call (a `Topic.publish`) changes `TopicsPublish`
alone.
"""

from __future__ import annotations

from typing import Protocol

from managed_ledger.entry_format import Message
from topics.api import ProduceResult, TopicsApi


class Publish(Protocol):
    """`partition`: one partition of a partitioned topic (the client routed the messages)."""

    async def __call__(
        self, topic: str, producer_name: str | None, messages: list[Message], partition: int | None = None
    ) -> list[ProduceResult]: ...

    async def last_sequence_id(
        self, topic: str, producer_name: str, partition: int | None = None
    ) -> int | None:
        """The producer's highest stored sequence id (None: dedup off, or nothing stored)."""
        ...


class TopicsPublish:
    """`Publish` over the topics service: the REST produce route's call."""

    def __init__(self, topics: TopicsApi) -> None:
        self._topics = topics

    async def __call__(
        self, topic: str, producer_name: str | None, messages: list[Message], partition: int | None = None
    ) -> list[ProduceResult]:
        return await self._topics.produce(topic, producer_name, messages, partition)

    async def last_sequence_id(
        self, topic: str, producer_name: str, partition: int | None = None
    ) -> int | None:
        return await self._topics.last_sequence_id(topic, producer_name, partition)
