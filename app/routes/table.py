"""The data plane's hot routes as one declarative table.

Each `HotRoute` says everything about an operation once: its method and path, its typed query
parameters with their bounds and defaults, the `DataHandlers` method that serves it, and the
models and statuses that document it. Two entry points are generated from the table and from
nothing else:

- `add_fastapi_route` registers a FastAPI route (the OpenAPI spec, and the server of every
  request the raw path declines);
- `app.fastpath.FastPath` compiles the same routes into a raw-ASGI dispatcher, because under load
  FastAPI's routing, dependency solving and parameter validation cost more CPU than the produce.

A handler takes its arguments positionally, in the order `HotRoute.arguments` gives: the full
topic name, the other path parameters, the query parameters in table order, and the raw body
last when the route has one. It returns a `Reply`.
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Annotated, Any

from fastapi import APIRouter, Query, Request
from pydantic import BaseModel
from starlette.responses import Response

from app import schemas
from app.routes.common import Namespace, Subscription, Tenant, Topic, full_name, json_body_doc, problems

Headers = list[tuple[bytes, bytes]]
Reply = tuple[int, Headers, bytes]
"""(status, raw ASGI headers, body): exactly what both entry points send."""

Handler = Callable[..., Awaitable[Reply]]

TOPIC_PREFIX = "/v1/topics/{tenant}/{namespace}/{topic}"
# The path parameters every hot route starts with: handlers get them joined as one topic name.
TOPIC_PARAMS = ("tenant", "namespace", "topic")
PATH_TYPES: dict[str, Any] = {
    "tenant": Tenant,
    "namespace": Namespace,
    "topic": Topic,
    "subscription": Subscription,
}


@dataclass(frozen=True, slots=True)
class QueryParam:
    """A query parameter: its type (int, str, bool or an Enum), default and bounds.

    `optional` makes a `str` parameter `str | None` (its default is then None).
    """

    name: str
    type: type
    default: Any
    ge: int | None = None
    max_length: int | None = None
    description: str | None = None
    examples: list[Any] | None = None
    optional: bool = False

    def annotation(self) -> Any:
        """The FastAPI annotation that validates and documents this parameter."""
        base: Any = self.type | None if self.optional else self.type
        return Annotated[
            base,
            Query(
                ge=self.ge, max_length=self.max_length, description=self.description, examples=self.examples
            ),
        ]


@dataclass(frozen=True, slots=True)
class HotRoute:
    method: str
    path: str  # under TOPIC_PREFIX
    operation_id: str
    summary: str
    handler: str  # the DataHandlers method
    query: tuple[QueryParam, ...] = ()
    body: type[BaseModel] | None = None  # parsed by hand from the raw body; the model documents it
    response_model: type[BaseModel] | None = None
    status_code: int | None = None  # None: FastAPI's default, 200
    errors: tuple[int, ...] = (404, 422)

    @property
    def full_path(self) -> str:
        return TOPIC_PREFIX + self.path

    @property
    def path_params(self) -> tuple[str, ...]:
        """The path parameters after the topic's three, in path order."""
        return tuple(p[1:-1] for p in self.path.split("/") if p.startswith("{"))

    @property
    def arguments(self) -> tuple[str, ...]:
        """The handler's parameters after the topic name (the body, if any, comes last)."""
        return self.path_params + tuple(q.name for q in self.query)


MAX_MESSAGES = QueryParam(
    "max_messages", int, 100, ge=1, description="at most this many messages (capped by a setting)"
)
WAIT_MS = QueryParam(
    "wait_ms", int, 0, ge=0, description="long-poll up to this long for the first message (capped)"
)
VALUE_ENCODING = QueryParam(
    "value_encoding",
    schemas.ValueEncoding,
    schemas.ValueEncoding.text,
    description="`base64` forces base64 values; `text` (default): text when the payload is UTF-8",
)
CONSUMER_ID = QueryParam("consumer_id", str, None, max_length=200, optional=True)
START = QueryParam(
    "start",
    str,
    "earliest",
    description="earliest, latest, an id (inclusive), after:<id>, or time:<ms> (the first message "
    "published at or after it)",
    examples=["earliest"],
)
READ_COMPACTED = QueryParam("read_compacted", bool, False)

SUBSCRIPTION = "/subscriptions/{subscription}"

PRODUCE = HotRoute(
    "POST",
    "/messages",
    "produce",
    "Produce a batch of messages (stored atomically as one entry)",
    "produce",
    body=schemas.ProduceRequest,
    response_model=schemas.ProduceResponse,
    errors=(404, 413, 422, 429),
)
RECEIVE = HotRoute(
    "GET",
    SUBSCRIPTION + "/messages",
    "receive",
    "Pull messages; they stay pending until acked (redelivered after the ack timeout)",
    "receive",
    query=(MAX_MESSAGES, WAIT_MS, CONSUMER_ID, VALUE_ENCODING),
    response_model=schemas.MessageList,
    errors=(400, 404, 409, 422),
)
ACK = HotRoute(
    "POST",
    SUBSCRIPTION + "/ack",
    "ackMessages",
    "Acknowledge messages by id, or cumulatively up to an id",
    "ack",
    body=schemas.AckRequest,
    status_code=204,
)
NACK = HotRoute(
    "POST",
    SUBSCRIPTION + "/nack",
    "nackMessages",
    "Negatively acknowledge messages: they are redelivered at once",
    "nack",
    body=schemas.NackRequest,
    status_code=204,
)
READ = HotRoute(
    "GET",
    "/messages",
    "readMessages",
    "Read a page of messages without a subscription (non-durable reader)",
    "read",
    query=(START, MAX_MESSAGES, READ_COMPACTED, WAIT_MS, VALUE_ENCODING),
    response_model=schemas.ReadPage,
    errors=(400, 404, 422),
)

HOT_ROUTES = (PRODUCE, RECEIVE, ACK, NACK, READ)


def as_response(reply: Reply) -> Response:
    """A Starlette Response that sends exactly `reply` (for the FastAPI entry point)."""
    status, headers, body = reply
    response = Response(body, status_code=status)
    response.raw_headers = list(headers)
    return response


def bind(route: HotRoute, handlers: object) -> Handler:
    """The handler of `route` on `handlers`, checked to take the table's arguments in its order.

    Both entry points pass arguments by position, so a handler whose parameters drifted from
    its row would silently swap values: this refuses to build the app instead.
    """
    call: Handler = getattr(handlers, route.handler)
    expected = ["topic", *route.arguments] + (["raw"] if route.body is not None else [])
    actual = list(inspect.signature(call).parameters)
    if actual != expected:
        raise TypeError(f"{route.handler}{tuple(actual)} does not match its route row {tuple(expected)}")
    return call


def add_fastapi_route(router: APIRouter, route: HotRoute, handlers: object) -> None:
    """Register `route` on `router` (whose prefix is TOPIC_PREFIX), served by `handlers`."""
    call = bind(route, handlers)
    keyword = inspect.Parameter.KEYWORD_ONLY
    params = [inspect.Parameter("request", keyword, annotation=Request)]
    params += [
        inspect.Parameter(p, keyword, annotation=PATH_TYPES[p]) for p in TOPIC_PARAMS + route.path_params
    ]
    params += [
        inspect.Parameter(q.name, keyword, annotation=q.annotation(), default=q.default) for q in route.query
    ]
    arguments, has_body = route.arguments, route.body is not None

    async def endpoint(request: Request, **values: Any) -> Response:
        args: list[Any] = [full_name(values["tenant"], values["namespace"], values["topic"])]
        args += [values[name] for name in arguments]
        if has_body:
            args.append(await request.body())
        return as_response(await call(*args))

    endpoint.__name__ = route.handler
    endpoint.__signature__ = inspect.Signature(params, return_annotation=Response)  # type: ignore[attr-defined]
    router.add_api_route(
        route.path,
        endpoint,
        methods=[route.method],
        operation_id=route.operation_id,
        summary=route.summary,
        response_model=route.response_model,
        status_code=route.status_code,
        responses=problems(*route.errors),
        openapi_extra=None if route.body is None else json_body_doc(route.body),
    )
