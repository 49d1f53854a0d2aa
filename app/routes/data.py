"""Data plane: `/v1/topics/{tenant}/{namespace}/{topic}` (docs/rest-api.md).

Produce, receive, ack and the reader parse and build their bodies with orjson (`app.codec`): they
are what users measure. The models in `app.schemas` only document them.

One implementation, two entry points: `DataHandlers` holds the hot operations as plain coroutines
that take the topic name, the parsed query and the raw body and return a `Reply`
(status, raw headers, body). The FastAPI routes below call them (and document them in the
OpenAPI spec); `app.fastpath` calls the same methods straight from ASGI, skipping FastAPI's
routing and parameter machinery. Both raise the same ApiError/domain errors, which app.errors
turns into problem+json.
"""

from __future__ import annotations

import time
from typing import Annotated

import orjson
from fastapi import APIRouter, Body, Path, Query, Request
from starlette.responses import Response

from app import schemas
from app.codec import (
    Limits,
    deliveries_json,
    load_json,
    message_dict,
    message_dicts,
    parse_ack,
    parse_id_list,
    parse_message_id,
    parse_seek,
    parse_start,
)
from app.codec import parse_produce as parse_produce_body
from app.errors import ApiError
from app.metrics import Metrics
from app.routes.common import (
    Namespace,
    Subscription,
    Tenant,
    Topic,
    empty,
    full_name,
    json_body_doc,
    json_response,
    problems,
)
from topics.api import SubscriptionOptions, TopicsApi

ValueEncodingQuery = Annotated[
    schemas.ValueEncoding,
    Query(description="`base64` forces base64 values; `text` (default): text when the payload is UTF-8"),
]
MaxMessages = Annotated[int, Query(ge=1, description="at most this many messages (capped by a setting)")]
WaitMs = Annotated[int, Query(ge=0, description="long-poll up to this long for the first message (capped)")]

Headers = list[tuple[bytes, bytes]]
Reply = tuple[int, Headers, bytes]
"""(status, raw ASGI headers, body): exactly what both entry points send."""

_JSON = (b"content-type", b"application/json")
NO_CONTENT: Reply = (204, [], b"")


def json_reply(body: bytes) -> Reply:
    """A 200 JSON reply with the headers Starlette's Response would have built (same order)."""
    return 200, [(b"content-length", str(len(body)).encode()), _JSON], body


def as_response(reply: Reply) -> Response:
    """A Starlette Response that sends exactly `reply` (for the FastAPI entry point)."""
    status, headers, body = reply
    response = Response(body, status_code=status)
    response.raw_headers = list(headers)
    return response


def _check_caps(limits: Limits, max_messages: int, wait_ms: int) -> None:
    if max_messages > limits.max_messages_per_read:
        raise ApiError(
            400,
            f"max_messages={max_messages} is over the cap of {limits.max_messages_per_read} "
            "(setting max_messages_per_read)",
            title="Bad query",
            limit=limits.max_messages_per_read,
        )
    if wait_ms > limits.max_wait_ms:
        raise ApiError(
            400,
            f"wait_ms={wait_ms} is over the cap of {limits.max_wait_ms} (setting max_wait_ms)",
            title="Bad query",
            limit=limits.max_wait_ms,
        )


class DataHandlers:
    """The hot operations, shared by the FastAPI routes and the raw-ASGI fast path.

    The metric objects' bound methods are looked up once here, not per request.
    """

    def __init__(self, topics: TopicsApi, limits: Limits, metrics: Metrics) -> None:
        self.topics = topics
        self.limits = limits
        self.metrics = metrics
        self._observe_produce = metrics.produce_seconds.observe
        self._inc_produce_requests = metrics.produce_requests.inc
        self._inc_messages_in = metrics.messages_in.inc
        self._inc_bytes_in = metrics.bytes_in.inc
        self._inc_messages_out = metrics.messages_out.inc
        self._inc_messages_read = metrics.messages_read.inc
        self._inc_acks = metrics.acks.inc

    async def produce(self, name: str, raw: bytes) -> Reply:
        producer, messages = parse_produce_body(raw, self.limits)
        started = time.perf_counter()
        results = await self.topics.produce(name, producer, messages)
        self._observe_produce(time.perf_counter() - started)
        self._inc_produce_requests()
        self._inc_messages_in(len(messages))
        self._inc_bytes_in(sum([len(m.value) for m in messages]))
        out = [
            {"message_id": None if r.message_id is None else str(r.message_id), "duplicate": r.duplicate}
            for r in results
        ]
        return json_reply(orjson.dumps({"results": out}))

    async def receive(
        self,
        name: str,
        subscription: str,
        max_messages: int,
        wait_ms: int,
        consumer_id: str | None,
        force_base64: bool,
    ) -> Reply:
        _check_caps(self.limits, max_messages, wait_ms)
        deliveries = await self.topics.receive(name, subscription, max_messages, wait_ms, consumer_id)
        self._inc_messages_out(len(deliveries))
        return json_reply(deliveries_json(deliveries, force_base64))

    async def ack(self, name: str, subscription: str, raw: bytes) -> Reply:
        ids, cumulative = parse_ack(raw)
        if ids is not None:
            await self.topics.ack(name, subscription, ids)
            self._inc_acks(len(ids))
        else:
            assert cumulative is not None
            await self.topics.ack_cumulative(name, subscription, cumulative)
        return NO_CONTENT

    async def read(
        self,
        name: str,
        start: str,
        max_messages: int,
        read_compacted: bool,
        wait_ms: int,
        force_base64: bool,
    ) -> Reply:
        _check_caps(self.limits, max_messages, wait_ms)
        position = parse_start(start)
        page = await self.topics.read(name, position, max_messages, read_compacted, wait_ms)
        self._inc_messages_read(len(page.messages))
        messages = message_dicts([(m, 0) for m in page.messages], force_base64)
        return json_reply(orjson.dumps({"messages": messages, "next": page.next}))


def data_router(topics: TopicsApi, limits: Limits, metrics: Metrics) -> APIRouter:
    return data_router_for(DataHandlers(topics, limits, metrics))


def data_router_for(handlers: DataHandlers) -> APIRouter:
    router = APIRouter(prefix="/v1/topics/{tenant}/{namespace}/{topic}", tags=["data"])
    _producer_routes(router, handlers)
    _subscription_routes(router, handlers)
    _reader_routes(router, handlers)
    return router


def _producer_routes(router: APIRouter, h: DataHandlers) -> None:
    @router.post(
        "/messages",
        operation_id="produce",
        summary="Produce a batch of messages (stored atomically as one entry)",
        response_model=schemas.ProduceResponse,
        responses=problems(404, 413, 422),
        openapi_extra=json_body_doc(schemas.ProduceRequest),
    )
    async def produce(request: Request, tenant: Tenant, namespace: Namespace, topic: Topic) -> Response:
        return as_response(await h.produce(full_name(tenant, namespace, topic), await request.body()))


def _subscription_routes(router: APIRouter, h: DataHandlers) -> None:
    topics = h.topics

    @router.put(
        "/subscriptions/{subscription}",
        operation_id="createSubscription",
        summary="Create a durable subscription (201), or find it there already (200)",
        response_model=schemas.SubscriptionCreated,
        responses={
            200: {"description": "Already there", "model": schemas.SubscriptionCreated},
            **problems(404, 422),
        },
        status_code=201,
    )
    async def create_subscription(
        tenant: Tenant,
        namespace: Namespace,
        topic: Topic,
        subscription: Subscription,
        body: Annotated[schemas.SubscriptionRequest | None, Body()] = None,
    ) -> Response:
        b = body or schemas.SubscriptionRequest()
        options = SubscriptionOptions(b.initial_position, b.type, b.read_compacted, b.ack_timeout_ms)
        created = await topics.create_subscription(full_name(tenant, namespace, topic), subscription, options)
        return json_response({"subscription": subscription, "created": created}, 201 if created else 200)

    @router.delete(
        "/subscriptions/{subscription}",
        operation_id="deleteSubscription",
        summary="Delete a subscription and its cursor",
        status_code=204,
        response_model=None,
        responses=problems(404, 422),
    )
    async def delete_subscription(
        tenant: Tenant, namespace: Namespace, topic: Topic, subscription: Subscription
    ) -> Response:
        await topics.delete_subscription(full_name(tenant, namespace, topic), subscription)
        return empty()

    @router.get(
        "/subscriptions/{subscription}/messages",
        operation_id="receive",
        summary="Pull messages; they stay pending until acked (redelivered after the ack timeout)",
        response_model=schemas.MessageList,
        responses=problems(400, 404, 409, 422),
    )
    async def receive(
        tenant: Tenant,
        namespace: Namespace,
        topic: Topic,
        subscription: Subscription,
        max_messages: MaxMessages = 100,
        wait_ms: WaitMs = 0,
        consumer_id: Annotated[str | None, Query(max_length=200)] = None,
        value_encoding: ValueEncodingQuery = schemas.ValueEncoding.text,
    ) -> Response:
        name = full_name(tenant, namespace, topic)
        force = value_encoding is schemas.ValueEncoding.base64
        return as_response(await h.receive(name, subscription, max_messages, wait_ms, consumer_id, force))

    @router.post(
        "/subscriptions/{subscription}/ack",
        operation_id="ackMessages",
        summary="Acknowledge messages by id, or cumulatively up to an id",
        status_code=204,
        response_model=None,
        responses=problems(404, 422),
        openapi_extra=json_body_doc(schemas.AckRequest),
    )
    async def ack(
        request: Request, tenant: Tenant, namespace: Namespace, topic: Topic, subscription: Subscription
    ) -> Response:
        name = full_name(tenant, namespace, topic)
        return as_response(await h.ack(name, subscription, await request.body()))

    @router.post(
        "/subscriptions/{subscription}/nack",
        operation_id="nackMessages",
        summary="Negatively acknowledge messages: they are redelivered at once",
        status_code=204,
        response_model=None,
        responses=problems(404, 422),
        openapi_extra=json_body_doc(schemas.NackRequest),
    )
    async def nack(
        request: Request, tenant: Tenant, namespace: Namespace, topic: Topic, subscription: Subscription
    ) -> Response:
        body = load_json(await request.body())
        if type(body) is not dict:
            raise ApiError(422, "request body must be a JSON object", title="Invalid request")
        ids = parse_id_list(body)
        await topics.nack(full_name(tenant, namespace, topic), subscription, ids)
        return empty()

    @router.post(
        "/subscriptions/{subscription}/seek",
        operation_id="seekSubscription",
        summary="Move the subscription to a message id, earliest/latest, or a publish time",
        status_code=204,
        response_model=None,
        responses=problems(404, 422),
        openapi_extra=json_body_doc(schemas.SeekRequest),
    )
    async def seek(
        request: Request, tenant: Tenant, namespace: Namespace, topic: Topic, subscription: Subscription
    ) -> Response:
        target = parse_seek(load_json(await request.body()))
        await topics.seek(full_name(tenant, namespace, topic), subscription, target)
        return empty()


def _reader_routes(router: APIRouter, h: DataHandlers) -> None:
    topics = h.topics

    @router.get(
        "/messages",
        operation_id="readMessages",
        summary="Read a page of messages without a subscription (non-durable reader)",
        response_model=schemas.ReadPage,
        responses=problems(400, 404, 422),
    )
    async def read(
        tenant: Tenant,
        namespace: Namespace,
        topic: Topic,
        start: Annotated[
            str, Query(description="earliest, latest, an id (inclusive) or after:<id>", examples=["earliest"])
        ] = "earliest",
        max_messages: MaxMessages = 100,
        read_compacted: bool = False,
        wait_ms: WaitMs = 0,
        value_encoding: ValueEncodingQuery = schemas.ValueEncoding.text,
    ) -> Response:
        name = full_name(tenant, namespace, topic)
        force = value_encoding is schemas.ValueEncoding.base64
        return as_response(await h.read(name, start, max_messages, read_compacted, wait_ms, force))

    @router.get(
        "/messages/{message_id}",
        operation_id="getMessage",
        summary="Get one message by id",
        response_model=schemas.MessageOut,
        responses=problems(404, 422),
    )
    async def get_message(
        tenant: Tenant,
        namespace: Namespace,
        topic: Topic,
        message_id: Annotated[str, Path(description="ledger:entry:batch_index", examples=["12:40:0"])],
        value_encoding: ValueEncodingQuery = schemas.ValueEncoding.text,
    ) -> Response:
        mid = parse_message_id(message_id, "message_id")
        m = await topics.get_message(full_name(tenant, namespace, topic), mid)
        return json_response(message_dict(m, 0, value_encoding is schemas.ValueEncoding.base64))

    @router.get(
        "/last-message-id",
        operation_id="getLastMessageId",
        summary="The id of the topic's last message (null when it holds none)",
        response_model=schemas.LastMessageId,
        responses=problems(404, 422),
    )
    async def last_message_id(
        tenant: Tenant, namespace: Namespace, topic: Topic, read_compacted: bool = False
    ) -> Response:
        mid = await topics.last_message_id(full_name(tenant, namespace, topic), read_compacted)
        return json_response({"message_id": None if mid is None else str(mid)})
