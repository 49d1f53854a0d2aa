"""Data plane: `/v1/topics/{tenant}/{namespace}/{topic}` (docs/rest-api.md).

Produce, receive, ack, nack and the reader parse and build their bodies with orjson
(`app.codec`): they are what users measure. The models in `app.schemas` only document them.

The hot operations are `DataHandlers` methods, plain coroutines that take the topic name, the
other path and query parameters and the raw body, and return a `Reply`. The table in
`app.routes.table` declares their routes once; FastAPI's routes and the raw-ASGI fast path
(`app.fastpath`) are both generated from it. The cold data-plane routes (subscription create and
delete, seek, one message, the last id) are ordinary FastAPI routes below. Every path raises the
same ApiError/domain errors, which app.errors turns into problem+json.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Annotated

import orjson
from fastapi import APIRouter, Body, Path, Request
from starlette.responses import Response

from app import schemas
from app.codec import (
    deliveries_json,
    invalid,
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
from app.routes.table import (
    ACK,
    NACK,
    PRODUCE,
    READ,
    RECEIVE,
    TOPIC_PREFIX,
    VALUE_ENCODING,
    Reply,
    add_fastapi_route,
)
from topics.api import DataApi, SubscriptionOptions

_JSON = (b"content-type", b"application/json")
EMPTY_REPLY: Reply = (204, [], b"")


def json_reply(body: bytes) -> Reply:
    """A 200 JSON reply with the headers Starlette's Response would have built (same order)."""
    return 200, [(b"content-length", str(len(body)).encode()), _JSON], body


class DataHandlers:
    """The hot operations, one method per row of the route table (same names).

    The metric objects' bound methods are looked up once here, not per request.
    """

    def __init__(self, topics: DataApi, metrics: Metrics) -> None:
        self.topics = topics
        self.metrics = metrics
        self._observe_produce = metrics.produce_seconds.observe
        self._inc_produce_requests = metrics.produce_requests.inc
        self._inc_messages_in = metrics.messages_in.inc
        self._inc_bytes_in = metrics.bytes_in.inc
        self._inc_messages_out = metrics.messages_out.inc
        self._inc_messages_read = metrics.messages_read.inc
        self._inc_acks = metrics.acks.inc

    async def produce(self, topic: str, raw: bytes) -> Reply:
        producer, messages = parse_produce_body(raw)
        started = time.perf_counter()
        results = await self.topics.produce(topic, producer, messages)
        self._observe_produce(time.perf_counter() - started)
        self._inc_produce_requests()
        self._inc_messages_in(len(messages))
        # The request's bytes, counted here without a sum: topics alone sizes the batch.
        self._inc_bytes_in(len(raw))
        out = [
            {"message_id": None if r.message_id is None else str(r.message_id), "duplicate": r.duplicate}
            for r in results
        ]
        return json_reply(orjson.dumps({"results": out}))

    async def receive(
        self,
        topic: str,
        subscription: str,
        max_messages: int,
        wait_ms: int,
        consumer_id: str | None,
        value_encoding: schemas.ValueEncoding,
    ) -> Reply:
        deliveries = await self.topics.receive(topic, subscription, max_messages, wait_ms, consumer_id)
        self._inc_messages_out(len(deliveries))
        # Asked only of an empty answer: a terminated topic whose subscription acked all of it.
        end = not deliveries and await self.topics.reached_end_of_topic(topic, subscription)
        return json_reply(deliveries_json(deliveries, value_encoding is schemas.ValueEncoding.base64, end))

    async def ack(self, topic: str, subscription: str, raw: bytes) -> Reply:
        ids, cumulative = parse_ack(raw)
        if ids is not None:
            await self.topics.ack(topic, subscription, ids)
            self._inc_acks(len(ids))
        else:
            assert cumulative is not None
            await self.topics.ack_cumulative(topic, subscription, cumulative)
        return EMPTY_REPLY

    async def nack(self, topic: str, subscription: str, raw: bytes) -> Reply:
        body = load_json(raw)
        if type(body) is not dict:
            raise invalid("request body must be a JSON object")
        await self.topics.nack(topic, subscription, parse_id_list(body))
        return EMPTY_REPLY

    async def read(
        self,
        topic: str,
        start: str,
        max_messages: int,
        read_compacted: bool,
        wait_ms: int,
        value_encoding: schemas.ValueEncoding,
    ) -> Reply:
        position = parse_start(start)
        page = await self.topics.read(topic, position, max_messages, read_compacted, wait_ms)
        self._inc_messages_read(len(page.messages))
        force = value_encoding is schemas.ValueEncoding.base64
        messages = message_dicts([(m, 0) for m in page.messages], force)
        return json_reply(
            orjson.dumps({"messages": messages, "next": page.next, "end_of_topic": page.end_of_topic})
        )


if TYPE_CHECKING:
    ValueEncodingQuery = schemas.ValueEncoding
else:  # the table's parameter, so the cold route documents and checks it the same way
    ValueEncodingQuery = VALUE_ENCODING.annotation()


def data_router_for(handlers: DataHandlers) -> APIRouter:
    """Every data-plane route; registered in the order the OpenAPI spec lists them."""
    router = APIRouter(prefix=TOPIC_PREFIX, tags=["data"])
    add_fastapi_route(router, PRODUCE, handlers)
    _subscription_routes(router, handlers.topics)
    add_fastapi_route(router, RECEIVE, handlers)
    add_fastapi_route(router, ACK, handlers)
    add_fastapi_route(router, NACK, handlers)
    _seek_route(router, handlers.topics)
    add_fastapi_route(router, READ, handlers)
    _reader_routes(router, handlers.topics)
    return router


def _subscription_routes(router: APIRouter, topics: DataApi) -> None:
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
        options = SubscriptionOptions(
            b.initial_position,
            b.type,
            b.read_compacted,
            b.ack_timeout_ms,
            b.max_redeliveries,
            b.dead_letter_topic,
        )
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


def _seek_route(router: APIRouter, topics: DataApi) -> None:
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


def _reader_routes(router: APIRouter, topics: DataApi) -> None:
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
