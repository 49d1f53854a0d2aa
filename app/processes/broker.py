"""`quire broker`: the FastAPI app on one uvicorn worker with uvloop, on settings host:port.

Before serving it waits (bounded by QUIRE_BOOKIE_WAIT_TIMEOUT_MS) until ensemble_size bookies
are live in the registry, and exits naming the shortfall if they never are: a broker that
cannot place a single ledger would only fail every produce."""

from __future__ import annotations

import asyncio
import gc
import logging
import socket
import ssl
from types import FrameType
from typing import TYPE_CHECKING

import uvicorn

from app.listen import BoundPort, bind_tcp
from app.settings import Settings
from topics.api import ClusterApi

if TYPE_CHECKING:
    from app.kafka_listener.common import KafkaConfig
    from app.pulsar_listener.config import PulsarConfig

HANDOVER_TIMEOUT_S = 20.0
log = logging.getLogger("quire.broker")


def run(settings: Settings) -> None:
    from app.main import create_app
    from app.registry import broker_registry
    from app.routes.cluster import install_registry
    from app.wiring import bootstrap, group_config, kafka_config, kafka_tls, pulsar_config, security_config

    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    # Ports first: a taken one is one line and exit 2 now, not after waiting for bookies.
    http_port = bind_tcp(
        settings.host, settings.port, process="broker", what="HTTP", setting="QUIRE_PORT (--port)"
    )
    kafka, pulsar = kafka_config(settings), pulsar_config(settings)
    kafka_port = _bind_door(kafka, "Kafka", "QUIRE_KAFKA_PORT (--kafka-port; 0 turns the Kafka listener off)")
    pulsar_port = _bind_door(
        pulsar, "Pulsar", "QUIRE_PULSAR_PORT (--pulsar-port; 0 turns the Pulsar listener off)"
    )
    registry, registry_store = broker_registry(settings)
    app = create_app(
        bootstrap(settings),
        max_request_body_bytes=settings.max_request_body_bytes,
        metrics_max_topics=settings.metrics_max_topics,
        metrics_max_subscriptions_per_topic=settings.metrics_max_subscriptions_per_topic,
        security=security_config(settings),
        kafka=kafka,
        kafka_groups=group_config(settings),
        kafka_tls=kafka_tls(settings),
        kafka_socket=kafka_port.sock if kafka_port is not None else None,
        pulsar=pulsar,
        pulsar_socket=pulsar_port.sock if pulsar_port is not None else None,
    )
    install_registry(app, registry, registry_store, settings.ensemble_size)
    # The broker's heap (cursors, pending maps, decoded entries) is large and long-lived; with
    # CPython's default thresholds the collector re-walks it many times a second under load and
    # takes about half of the consume path's CPU (measured with py-spy and `make bench`).
    gc.set_threshold(100_000, 50, 1000)
    # One worker: the broker owns each topic's managed ledger (a single writer per ledger).
    config = uvicorn.Config(
        app,
        host=settings.host,
        port=settings.port,
        loop="uvloop",
        http="auto",  # httptools when installed, else h11
        workers=1,
        access_log=False,
        log_level="info",
        timeout_graceful_shutdown=5,
        # HTTPS with the settings' certificate and key; with a CA file, clients must present a
        # certificate it signed (mutual TLS). None: plain HTTP.
        ssl_certfile=settings.tls_cert_file or None,
        ssl_keyfile=settings.tls_key_file or None,
        ssl_ca_certs=settings.tls_ca_file or None,
        ssl_cert_reqs=ssl.CERT_REQUIRED if settings.tls_ca_file else ssl.CERT_NONE,
    )
    try:
        sockets = [http_port.listening()]
        for door_port in (kafka_port, pulsar_port):
            if door_port is not None:
                door_port.listening()  # served once the app has started (its lifespan)
        HandoverServer(config, app.state.topics).run(sockets=sockets)
    finally:
        registry_store.close()


def _bind_door(config: KafkaConfig | PulsarConfig | None, what: str, setting: str) -> BoundPort | None:
    """The port of a door (the Kafka or Pulsar listener), bound now; None when it is off."""
    if config is None:
        return None
    return bind_tcp(config.host, config.port, process="broker", what=what, setting=setting)


class HandoverServer(uvicorn.Server):
    """uvicorn's server, with a graceful stop that hands the broker's topics over first.

    On SIGTERM (or SIGINT) the broker keeps serving while it closes each topic and releases its
    ownership: requests for a topic already handed over are redirected to its new owner, long
    polls answer empty. Then uvicorn's own shutdown runs (in-flight requests finish, then the
    lifespan closes the rest), so a rolling restart costs clients a redirect or a retry. A
    second signal stops at once."""

    def __init__(self, config: uvicorn.Config, topics: ClusterApi) -> None:
        super().__init__(config)
        self._topics = topics
        self._loop: asyncio.AbstractEventLoop | None = None
        self._handing_over = False

    async def serve(self, sockets: list[socket.socket] | None = None) -> None:
        self._loop = asyncio.get_running_loop()
        await super().serve(sockets)

    def handle_exit(self, sig: int, frame: FrameType | None) -> None:
        loop = self._loop
        if self._handing_over or self.should_exit or loop is None:
            super().handle_exit(sig, frame)
            return
        self._handing_over = True
        # A signal handler runs between two bytecodes of whatever the loop was doing: hand the
        # work to the loop rather than touch it from here.
        loop.call_soon_threadsafe(lambda: loop.create_task(self._hand_over(sig, frame)))

    async def _hand_over(self, sig: int, frame: FrameType | None) -> None:
        try:
            await asyncio.wait_for(self._topics.handover(), HANDOVER_TIMEOUT_S)
        except Exception:  # the leases lapse instead: slower for clients, never unsafe
            log.exception("handing topics over failed")
        super().handle_exit(sig, frame)
