"""Pulsar's subscription admin, under the admin prefix (app/routes/admin.py): create a
subscription at a position, reset it to a message id, peek, examinemessage, skip, skip_all and
expireMessages (docs/rest-api.md)."""

from typing import Annotated, Any, Literal

from fastapi import APIRouter, Path, Query
from starlette.responses import Response

from app import schemas
from app.codec import message_dict, parse_message_id
from app.routes.common import (
    Namespace,
    Subscription,
    Tenant,
    Topic,
    empty,
    full_name,
    json_response,
    problems,
)
from topics.api import SubscriptionOptions, TopicsApi
from topics.errors import MessageNotFoundError, SubscriptionExistsError

MessagePosition = Annotated[int, Path(ge=1, le=2**31 - 1, examples=[1], description="1-based")]
Seconds = Annotated[int, Path(ge=0, le=10**10, examples=[3600])]


def _message(m: Any, value_encoding: schemas.ValueEncoding) -> Response:
    return json_response(message_dict(m, 0, value_encoding is schemas.ValueEncoding.base64))


def position_routes(router: APIRouter, topics: TopicsApi, prefix: str) -> None:
    """Create a subscription at a position, reset it to an id, peek."""
    subscription_path = prefix + "/{topic}/subscription/{subscription}"

    @router.put(
        subscription_path,
        operation_id="adminCreateSubscription",
        summary="Create a subscription at earliest, latest or a message id (409 when it exists)",
        status_code=204,
        response_model=None,
        responses=problems(404, 409, 422),
    )
    async def create_subscription(
        tenant: Tenant,
        namespace: Namespace,
        topic: Topic,
        subscription: Subscription,
        messageId: str = Query("latest", examples=["earliest"], description="earliest, latest or L:E:B"),
    ) -> Response:
        name = full_name(tenant, namespace, topic)
        at = None if messageId in ("earliest", "latest") else parse_message_id(messageId, "messageId")
        options = SubscriptionOptions("latest" if messageId == "latest" else "earliest")
        if not await topics.create_subscription(name, subscription, options):
            raise SubscriptionExistsError(name, subscription)
        if at is not None:
            try:
                await topics.seek(name, subscription, at)
            except MessageNotFoundError:
                await topics.delete_subscription(name, subscription)  # an id not in the topic: no change
                raise
        return empty()

    @router.post(
        subscription_path + "/resetcursor",
        operation_id="resetCursorToMessageId",
        summary="Reset the subscription to a message id (the id is the next delivered)",
        status_code=204,
        response_model=None,
        responses=problems(404, 422),
    )
    async def reset_cursor_to_id(
        tenant: Tenant,
        namespace: Namespace,
        topic: Topic,
        subscription: Subscription,
        body: schemas.MessageIdBody,
    ) -> Response:
        target = parse_message_id(body.messageId, "messageId")
        await topics.seek(full_name(tenant, namespace, topic), subscription, target)
        return empty()

    @router.get(
        subscription_path + "/position/{n}",
        operation_id="peekMessage",
        summary="The n-th message the subscription has not acked (delivered or not)",
        response_model=schemas.MessageOut,
        responses=problems(404, 422),
    )
    async def peek(
        tenant: Tenant,
        namespace: Namespace,
        topic: Topic,
        subscription: Subscription,
        n: MessagePosition,
        value_encoding: schemas.ValueEncoding = schemas.ValueEncoding.text,
    ) -> Response:
        return _message(
            await topics.peek(full_name(tenant, namespace, topic), subscription, n), value_encoding
        )


def backlog_routes(router: APIRouter, topics: TopicsApi, prefix: str) -> None:
    """Examine a topic's entries; skip, clear the backlog."""
    subscription_path = prefix + "/{topic}/subscription/{subscription}"

    @router.get(
        prefix + "/{topic}/examinemessage",
        operation_id="examineMessage",
        summary="The first message of the n-th entry from the oldest or the newest",
        response_model=schemas.MessageOut,
        responses=problems(404, 422),
    )
    async def examine(
        tenant: Tenant,
        namespace: Namespace,
        topic: Topic,
        initialPosition: Literal["earliest", "latest"] = "latest",
        messagePosition: int = Query(1, ge=1, le=2**31 - 1),
        value_encoding: schemas.ValueEncoding = schemas.ValueEncoding.text,
    ) -> Response:
        name = full_name(tenant, namespace, topic)
        return _message(await topics.examine_message(name, initialPosition, messagePosition), value_encoding)

    @router.post(
        subscription_path + "/skip/{n}",
        operation_id="skipMessages",
        summary="Ack the next n messages the subscription has not acked",
        status_code=204,
        response_model=None,
        responses=problems(404, 422),
    )
    async def skip(
        tenant: Tenant, namespace: Namespace, topic: Topic, subscription: Subscription, n: MessagePosition
    ) -> Response:
        await topics.skip(full_name(tenant, namespace, topic), subscription, n)
        return empty()

    @router.post(
        subscription_path + "/skip_all",
        operation_id="skipAllMessages",
        summary="Ack everything stored so far (clear the backlog)",
        status_code=204,
        response_model=None,
        responses=problems(404, 422),
    )
    async def skip_all(
        tenant: Tenant, namespace: Namespace, topic: Topic, subscription: Subscription
    ) -> Response:
        await topics.skip_all(full_name(tenant, namespace, topic), subscription)
        return empty()


def expire_routes(router: APIRouter, topics: TopicsApi, prefix: str) -> None:
    """Expire messages by age, on one subscription or on all of them."""
    subscription_path = prefix + "/{topic}/subscription/{subscription}"

    @router.post(
        subscription_path + "/expireMessages/{seconds}",
        operation_id="expireMessages",
        summary="Ack the subscription's messages published more than `seconds` ago",
        status_code=204,
        response_model=None,
        responses=problems(404, 422),
    )
    async def expire(
        tenant: Tenant, namespace: Namespace, topic: Topic, subscription: Subscription, seconds: Seconds
    ) -> Response:
        await topics.expire_messages(full_name(tenant, namespace, topic), subscription, seconds)
        return empty()

    @router.post(
        prefix + "/{topic}/all_subscription/expireMessages/{seconds}",
        operation_id="expireMessagesAllSubscriptions",
        summary="Ack, on every subscription, the messages published more than `seconds` ago",
        status_code=204,
        response_model=None,
        responses=problems(404, 422),
    )
    async def expire_all(tenant: Tenant, namespace: Namespace, topic: Topic, seconds: Seconds) -> Response:
        await topics.expire_messages(full_name(tenant, namespace, topic), None, seconds)
        return empty()
