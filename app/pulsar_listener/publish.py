"""The one topic call a SEND becomes, behind a seam of the listener's own.

Every door publishes through the same topic call (docs/pulsar.md): today that is the topics
service's `produce`, the call the REST produce route makes. The listener sees only `Publish`,
so that pointing it at another call (a `Topic.publish`) changes `TopicsPublish` alone.
"""

from __future__ import annotations

from typing import Protocol

from managed_ledger.entry_format import Message
from topics.api import ProduceResult, TopicsApi


class Publish(Protocol):
    async def __call__(
        self, topic: str, producer_name: str | None, messages: list[Message]
    ) -> list[ProduceResult]: ...


class TopicsPublish:
    """`Publish` over the topics service: the REST produce route's call."""

    def __init__(self, topics: TopicsApi) -> None:
        self._topics = topics

    async def __call__(
        self, topic: str, producer_name: str | None, messages: list[Message]
    ) -> list[ProduceResult]:
        return await self._topics.produce(topic, producer_name, messages)
