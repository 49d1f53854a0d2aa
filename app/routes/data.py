"""Data plane: `/v1/topics/{tenant}/{namespace}/{topic}` (API.md).

Produce, receive and ack parse and build their bodies with orjson (`app.codec`): they are what
users measure. The models in `app.schemas` only document them.
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


def data_router(topics: TopicsApi, limits: Limits, metrics: Metrics) -> APIRouter:
    router = APIRouter(prefix="/v1/topics/{tenant}/{namespace}/{topic}", tags=["data"])
    _producer_routes(router, topics, limits, metrics)
    _subscription_routes(router, topics, limits, metrics)
    _reader_routes(router, topics, limits, metrics)
    return router


def _producer_routes(router: APIRouter, topics: TopicsApi, limits: Limits, metrics: Metrics) -> None:
    @router.post(
        "/messages",
        operation_id="produce",
        summary="Produce a batch of messages (stored atomically as one entry)",
        response_model=schemas.ProduceResponse,
        responses=problems(404, 413, 422),
        openapi_extra=json_body_doc(schemas.ProduceRequest),
    )
    async def produce(request: Request, tenant: Tenant, namespace: Namespace, topic: Topic) -> Response:
        producer, messages = parse_produce_body(await request.body(), limits)
        started = time.perf_counter()
        results = await topics.produce(full_name(tenant, namespace, topic), producer, messages)
        metrics.produce_seconds.observe(time.perf_counter() - started)
        metrics.produce_requests.inc()
        metrics.messages_in.inc(len(messages))
        metrics.bytes_in.inc(sum(len(m.value) for m in messages))
        out = [
            {"message_id": None if r.message_id is None else str(r.message_id), "duplicate": r.duplicate}
            for r in results
        ]
        return json_response({"results": out})


def _subscription_routes(router: APIRouter, topics: TopicsApi, limits: Limits, metrics: Metrics) -> None:
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
        _check_caps(limits, max_messages, wait_ms)
        name = full_name(tenant, namespace, topic)
        deliveries = await topics.receive(name, subscription, max_messages, wait_ms, consumer_id)
        metrics.messages_out.inc(len(deliveries))
        body = deliveries_json(deliveries, value_encoding is schemas.ValueEncoding.base64)
        return Response(body, media_type="application/json")

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
        ids, cumulative = parse_ack(await request.body())
        name = full_name(tenant, namespace, topic)
        if ids is not None:
            await topics.ack(name, subscription, ids)
            metrics.acks.inc(len(ids))
        else:
            assert cumulative is not None
            await topics.ack_cumulative(name, subscription, cumulative)
        return empty()

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


def _reader_routes(router: APIRouter, topics: TopicsApi, limits: Limits, metrics: Metrics) -> None:
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
        _check_caps(limits, max_messages, wait_ms)
        position = parse_start(start)
        name = full_name(tenant, namespace, topic)
        page = await topics.read(name, position, max_messages, read_compacted, wait_ms)
        metrics.messages_read.inc(len(page.messages))
        force = value_encoding is schemas.ValueEncoding.base64
        return Response(
            orjson.dumps({"messages": [message_dict(m, 0, force) for m in page.messages], "next": page.next}),
            media_type="application/json",
        )

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
