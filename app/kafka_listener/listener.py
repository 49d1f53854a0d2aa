"""The Kafka listener of a broker: the wire server with every handler plugged in, started after
the topics service and stopped before it (app.main's lifespan)."""

from __future__ import annotations

import logging

from app.kafka_listener import group_handlers
from app.kafka_listener.admin import KafkaAdmin
from app.kafka_listener.cluster import BrokerListView, KafkaNode, node_id_for
from app.kafka_listener.common import KafkaConfig
from app.kafka_listener.data import DataPlane
from app.kafka_listener.group_offsets import GroupCoordinator
from app.kafka_listener.groups import GroupConfig
from app.kafka_listener.server import Handler, KafkaServer
from topics.service import TopicService

log = logging.getLogger("quire.kafka")


class KafkaListener:
    def __init__(self, topics: TopicService, config: KafkaConfig, groups: GroupConfig | None = None) -> None:
        me = KafkaNode(node_id_for(config.broker_id), config.advertised_host, config.advertised_port)
        cluster = BrokerListView(me, topics.brokers)
        self.coordinator = GroupCoordinator(topics, cluster, groups)
        handlers: dict[int, Handler] = {}
        handlers.update(DataPlane(topics, config).handlers())
        handlers.update(KafkaAdmin(topics, config).handlers())
        handlers.update(group_handlers.handlers(self.coordinator, config))
        self.server = KafkaServer(handlers, host=config.host, port=config.port)

    @property
    def port(self) -> int:
        return self.server.port

    async def start(self) -> None:
        await self.server.start()

    async def close(self) -> None:
        await self.server.close()
        await self.coordinator.close()
