"""The Kafka listener of a broker: the wire server with every handler plugged in, started after
the topics service and stopped before it (app.main's lifespan)."""

from __future__ import annotations

import logging
import socket
import ssl

from app.kafka_listener import group_handlers
from app.kafka_listener.admin import KafkaAdmin
from app.kafka_listener.cluster import BrokerListView, KafkaNode, node_id_for
from app.kafka_listener.common import KafkaConfig
from app.kafka_listener.data import DataPlane
from app.kafka_listener.group_offsets import GroupCoordinator
from app.kafka_listener.groups import GroupConfig
from app.kafka_listener.security import Access, KafkaSecurity
from app.kafka_listener.server import Handler, KafkaServer
from topics.api import TopicsApi

log = logging.getLogger("quire.kafka")


class KafkaListener:
    """`security` (None: off) is the HTTP API's: the same token keys, super-users and grants,
    with the HTTP gate's authorizer (so a grant changed over HTTP is seen at once here too)."""

    def __init__(
        self,
        topics: TopicsApi,
        config: KafkaConfig,
        groups: GroupConfig | None = None,
        *,
        security: KafkaSecurity | None = None,
        ssl_context: ssl.SSLContext | None = None,
    ) -> None:
        me = KafkaNode(node_id_for(config.broker_id), config.advertised_host, config.advertised_port)
        cluster = BrokerListView(me, topics.brokers)
        self.coordinator = GroupCoordinator(topics, cluster, groups)
        access = security or Access()
        handlers: dict[int, Handler] = {}
        handlers.update(DataPlane(topics, config, access).handlers())
        handlers.update(KafkaAdmin(topics, config, access).handlers())
        handlers.update(group_handlers.handlers(self.coordinator, config, access if security else None))
        if security is not None:
            handlers = {key: security.guard(key, handler) for key, handler in handlers.items()}
            handlers.update(security.handlers())
        self.server = KafkaServer(
            handlers,
            host=config.host,
            port=config.port,
            ssl_context=ssl_context,
            authenticated=security.authenticated if security is not None else None,
        )

    @property
    def port(self) -> int:
        return self.server.port

    async def start(self, sock: socket.socket | None = None) -> None:
        await self.server.start(sock)

    async def close(self) -> None:
        await self.server.close()
        await self.coordinator.close()
