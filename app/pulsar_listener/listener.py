"""The Pulsar listener of a broker: the server with every command's handler plugged in, started
after the topics service and stopped before it (app.main's lifespan)."""

from __future__ import annotations

import socket
import ssl
from typing import Any

from topics.api import TopicsApi

from .config import PulsarConfig
from .consumers import Consumers
from .producers import Producers
from .publish import TopicsPublish
from .registry import Registry
from .schemas import SchemaCommands
from .security import Access
from .server import Handler, PulsarServer
from .session import Session
from .stats import add_connections


class PulsarListener:
    """`access` (None: no security) is the HTTP API's token verifier and authorizer."""

    def __init__(
        self,
        topics: TopicsApi,
        config: PulsarConfig,
        *,
        access: Access | None = None,
        ssl_context: ssl.SSLContext | None = None,
    ) -> None:
        access = access or Access()
        registry = Registry()
        handlers: dict[int, Handler] = {}
        handlers.update(Session(topics, access).handlers())
        handlers.update(Producers(topics, TopicsPublish(topics), registry, access).handlers())
        handlers.update(Consumers(topics, registry, access).handlers())
        handlers.update(SchemaCommands(topics, access).handlers())
        self.server = PulsarServer(handlers, config, access, ssl_context)
        self._registry = registry

    def add_connections(self, topic: str, stats: dict[str, Any]) -> None:
        """Each Pulsar producer's and consumer's address and client version, into the topic's
        stats (`stats`)."""
        add_connections(self._registry, topic, stats)

    @property
    def port(self) -> int:
        return self.server.port

    async def start(self, sock: socket.socket | None = None) -> None:
        await self.server.start(sock)

    async def close(self) -> None:
        await self.server.close()
