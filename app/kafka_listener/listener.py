"""The Kafka listener of a broker: the wire server with every handler plugged in, started after
the topics service and stopped before it (app.main's lifespan)."""

from __future__ import annotations

import logging
from typing import Any

from app.kafka_listener.admin import KafkaAdmin
from app.kafka_listener.common import KafkaConfig
from app.kafka_listener.data import DataPlane
from app.kafka_listener.server import Handler, KafkaServer
from topics.service import TopicService

log = logging.getLogger("quire.kafka")


class KafkaListener:
    def __init__(self, topics: TopicService, config: KafkaConfig, groups: Any = None) -> None:
        handlers: dict[int, Handler] = {}
        handlers.update(DataPlane(topics, config).handlers())
        handlers.update(KafkaAdmin(topics, config).handlers())
        if groups is not None:
            handlers.update(groups.handlers())
        self._groups = groups
        self.server = KafkaServer(handlers, host=config.host, port=config.port)

    @property
    def port(self) -> int:
        return self.server.port

    async def start(self) -> None:
        await self.server.start()

    async def close(self) -> None:
        await self.server.close()
        if self._groups is not None:
            await self._groups.close()
