"""The FastAPI application: `create_app(topics)` builds it around any `TopicsApi`.

`create_app` returns a `QuireApp`: a FastAPI app that first offers each HTTP request to the
raw-ASGI fast path (app.fastpath) for the hot data-plane operations; `app.state.fast_path.enabled
= False` turns that off (the tests compare both entry points byte for byte).

The app owns no domain state: `app.wiring` builds the real TopicService from settings (the one
composition root); the tests build one over in-memory storage. The lifespan starts the service
and closes it at shutdown. Limits are the service's own (topics.config): the app has none.
"""

from __future__ import annotations

import socket
import ssl
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Any

from fastapi import FastAPI
from fastapi.openapi.utils import get_openapi

from app import body_cap, docs_ui, errors, schemas
from app.auth.gate import Gate, RouteTable, SecurityConfig
from app.auth.spec import document_security
from app.console.install import install as install_console
from app.fastpath import FastPath, Receive, Scope, Send
from app.metrics import Metrics
from app.process_metrics import MetadataCallsCollector
from app.routes.admin import admin_router
from app.routes.brokers import OwnershipCollector, brokers_router
from app.routes.cluster import cluster_router
from app.routes.common import add_routes
from app.routes.data import DataHandlers, data_router_for
from app.routes.kafka_groups import kafka_groups_router
from app.routes.ops import ops_router
from app.routes.topic_schemas import schema_router
from app.topic_metrics import TopicCollector
from topics.api import TopicsApi

if TYPE_CHECKING:
    from app.kafka_listener.common import KafkaConfig
    from app.kafka_listener.groups import GroupConfig
    from app.kafka_listener.listener import KafkaListener
    from app.kafka_listener.security import KafkaSecurity
    from app.pulsar_listener.config import PulsarConfig
    from app.pulsar_listener.listener import PulsarListener

VERSION = "0.1.0"

TAGS = [
    {"name": "data", "description": "Produce, durable pull subscriptions and non-durable readers"},
    {"name": "admin", "description": "Pulsar admin v2: topics, stats, compaction, policies, tenants"},
    {"name": "ops", "description": "Health, readiness and metrics"},
]

# Bodies the hot paths parse by hand: documented by these models, added to the components here.
DOC_ONLY_MODELS = (
    schemas.ProduceRequest,
    schemas.AckRequest,
    schemas.NackRequest,
    schemas.SeekRequest,
    schemas.Problem,
)


DEFAULT_MAX_REQUEST_BODY_BYTES = 16 * 1024**2


class QuireApp(FastAPI):
    """FastAPI, with the fast path asked first (it declines what it does not serve), behind the
    security gate (authentication and authorization, when on: app.auth.gate) and a cap on the
    request body (both checked before either entry point reads anything)."""

    fast_path: FastPath | None = None
    gate: Gate | None = None
    max_request_body_bytes: int = DEFAULT_MAX_REQUEST_BODY_BYTES

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:  # type: ignore[override]
        if scope["type"] == "http":
            gate = self.gate
            if gate is not None:
                admitted = await gate.admit(scope, send)
                if admitted is None:
                    return
                send = admitted
            receive = await body_cap.guard(scope, receive, send, self.max_request_body_bytes)
            if receive is body_cap.ANSWERED:
                return
            fast = self.fast_path
            if fast is not None and await fast.handle(scope, receive, send):
                return
        await super().__call__(scope, receive, send)


async def _start_kafka(
    app: Any,
    topics: TopicsApi,
    kafka: KafkaConfig,
    groups: GroupConfig | None,
    security: SecurityConfig | None,
    tls: ssl.SSLContext | None,
    sock: socket.socket | None,
) -> KafkaListener:
    from app.kafka_listener.listener import KafkaListener

    listener = KafkaListener(topics, kafka, groups, security=kafka_security(app, security), ssl_context=tls)
    await listener.start(sock)
    app.state.kafka_port = listener.port
    from app.routes.kafka_groups import install_group_coordinator

    install_group_coordinator(app, listener.coordinator)  # the admin routes show its members
    return listener


def kafka_security(app: Any, security: SecurityConfig | None) -> KafkaSecurity | None:
    """The Kafka listener's SASL and authorization: the HTTP API's keys and its gate's authorizer."""
    if security is None:
        return None
    from app.kafka_listener.security import KafkaSecurity

    authorizer = app.gate.authorizer if security.authorization else None
    return KafkaSecurity(security.verifier, authorizer)


async def _start_pulsar(
    app: Any,
    topics: TopicsApi,
    pulsar: PulsarConfig,
    security: SecurityConfig | None,
    tls: ssl.SSLContext | None,
    sock: socket.socket | None,
) -> PulsarListener:
    """The Pulsar listener, with the HTTP API's token verifier and its gate's authorizer."""
    from app.pulsar_listener.listener import PulsarListener
    from app.pulsar_listener.security import PulsarSecurity

    access = None
    if security is not None:
        access = PulsarSecurity(security.verifier, app.gate.authorizer if security.authorization else None)
    listener = PulsarListener(topics, pulsar, access=access, ssl_context=tls)
    await listener.start(sock)
    app.state.pulsar_port = listener.port
    app.state.pulsar_url = pulsar.service_url
    # What doors add to a topic's stats, (topic, stats) -> None, read by the stats route: here
    # each Pulsar producer's and consumer's connection.
    app.state.stats_additions = [*getattr(app.state, "stats_additions", ()), listener.add_connections]
    return listener


def create_app(
    topics: TopicsApi,
    *,
    close_topics: bool = True,
    max_request_body_bytes: int = DEFAULT_MAX_REQUEST_BODY_BYTES,
    metrics_max_topics: int = 1_000,
    metrics_max_subscriptions_per_topic: int = 100,
    security: SecurityConfig | None = None,
    kafka: KafkaConfig | None = None,
    kafka_groups: GroupConfig | None = None,
    kafka_tls: ssl.SSLContext | None = None,
    kafka_socket: socket.socket | None = None,
    pulsar: PulsarConfig | None = None,
    pulsar_socket: socket.socket | None = None,
) -> QuireApp:
    """The app around `topics`; `security` turns authentication (and authorization) on; `kafka`
    and `pulsar` the doors (started after the topics service, stopped before it; on their
    `*_socket` when the process bound its port already, `app.listen`)."""
    metrics = Metrics()

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        await topics.start()
        doors: list[KafkaListener | PulsarListener] = []  # each door, once started
        try:
            if kafka is not None:
                doors.append(
                    await _start_kafka(app, topics, kafka, kafka_groups, security, kafka_tls, kafka_socket)
                )
            if pulsar is not None:
                doors.append(await _start_pulsar(app, topics, pulsar, security, None, pulsar_socket))
            yield
        finally:
            for door in reversed(doors):
                await door.close()
            if close_topics:
                await topics.close()

    app = QuireApp(
        title="Quire",
        version=VERSION,
        description="Ledger-based managed storage in the style of Apache Pulsar on BookKeeper.",
        openapi_tags=TAGS,
        separate_input_output_schemas=False,
        lifespan=lifespan,
        docs_url=None,  # docs_ui serves /docs and /redoc with assets of its own, not a CDN's
        redoc_url=None,
    )
    docs_ui.install(app)
    app.max_request_body_bytes = max_request_body_bytes
    app.state.topics = topics
    app.state.metrics = metrics
    errors.install(app, metrics.error)
    handlers = DataHandlers(topics, metrics)
    app.fast_path = FastPath(handlers, metrics)
    app.state.fast_path = app.fast_path
    _include_routes(app, topics, metrics, handlers)
    _register_collectors(metrics, topics, metrics_max_topics, metrics_max_subscriptions_per_topic)
    if security is not None:
        app.gate = Gate(app.router.routes, topics, security, metrics.error)
    else:
        RouteTable(app.router.routes)  # every route has its rule, on or off: refuse to build otherwise
    app.state.gate = app.gate
    app.openapi = lambda: _openapi(app)  # type: ignore[method-assign]
    return app


def _include_routes(app: FastAPI, topics: TopicsApi, metrics: Metrics, handlers: DataHandlers) -> None:
    """Every route the app serves: the API's routers, then the console's pages, which call that
    API back through the gate (app.console)."""
    for router in (
        data_router_for(handlers),
        admin_router(topics),
        ops_router(topics, metrics),
        cluster_router(),
        brokers_router(topics),
        kafka_groups_router(topics),
        schema_router(topics),
    ):
        add_routes(app, router)
    install_console(app)  # /console and `/`


def _register_collectors(
    metrics: Metrics, topics: TopicsApi, max_topics: int, max_subscriptions: int
) -> None:
    """The series read at each scrape: ownership and per topic from the topics service, and the
    metadata store's calls from the seam (`bookie.metadata_calls`)."""
    metrics.registry.register(OwnershipCollector(topics))
    metrics.registry.register(TopicCollector(topics, max_topics, max_subscriptions))
    metrics.registry.register(MetadataCallsCollector())  # read on the loop: /metrics runs there


def _openapi(app: FastAPI) -> dict[str, Any]:
    """FastAPI's spec plus the schemas of the bodies parsed by hand (see DOC_ONLY_MODELS)."""
    if app.openapi_schema is not None:
        return app.openapi_schema
    spec = get_openapi(
        title=app.title,
        version=app.version,
        description=app.description,
        routes=app.routes,
        tags=app.openapi_tags,
        separate_input_output_schemas=False,
    )
    components = spec.setdefault("components", {}).setdefault("schemas", {})
    for model in DOC_ONLY_MODELS:
        schema = model.model_json_schema(ref_template="#/components/schemas/{model}")
        for name, sub in schema.pop("$defs", {}).items():
            components.setdefault(name, sub)
        components.setdefault(model.__name__, schema)
    spec["components"]["schemas"] = dict(sorted(components.items()))
    _document_redirects(spec)
    document_security(spec)
    app.openapi_schema = spec
    return spec


# Operations on a topic that any broker answers itself: everything else about a topic is served
# by its owner, and another broker answers 307 (app.errors, topics.ownership).
ANSWERED_ANYWHERE = {"createTopic", "createPartitionedTopic", "getPartitions", "lookupTopic"}
REDIRECT_RESPONSE = {
    "description": "Another broker owns the topic: the same request goes to `Location` (its URL, "
    "same path and query); clients that follow redirects need nothing else",
    "headers": {
        "Location": {"description": "the owner's URL for this request", "schema": {"type": "string"}}
    },
    "content": {errors.PROBLEM_MEDIA_TYPE: {"schema": {"$ref": "#/components/schemas/Problem"}}},
}


def _document_redirects(spec: dict[str, Any]) -> None:
    for path, operations in spec.get("paths", {}).items():
        if "{topic}" not in path:
            continue
        for operation in operations.values():
            if operation.get("operationId") not in ANSWERED_ANYWHERE:
                responses = operation.setdefault("responses", {})
                responses["307"] = REDIRECT_RESPONSE
                operation["responses"] = dict(sorted(responses.items()))
