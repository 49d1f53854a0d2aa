"""Shared pieces of the routers: name parameters, documented error responses, JSON responses."""

from __future__ import annotations

from typing import Annotated, Any

import orjson
from fastapi import APIRouter, FastAPI, Path
from pydantic import BaseModel
from starlette.responses import Response

from app.errors import PROBLEM_MEDIA_TYPE
from topics.names import NAME_PATTERN

# Names are checked (and documented in the spec) by the one rule of topics.names.
Tenant = Annotated[str, Path(pattern=NAME_PATTERN, examples=["public"], description="tenant")]
Namespace = Annotated[str, Path(pattern=NAME_PATTERN, examples=["default"], description="namespace")]
Topic = Annotated[str, Path(pattern=NAME_PATTERN, examples=["prices"], description="topic")]
Subscription = Annotated[str, Path(pattern=NAME_PATTERN, examples=["sub-a"], description="subscription")]

_DESCRIPTIONS = {
    400: "Bad query (e.g. a wait or page size past its cap; the detail names the cap)",
    404: "Unknown tenant, namespace, topic, subscription or message",
    409: "Conflict (already exists, compaction running, exclusive subscription busy)",
    413: "A message or the batch is over its limit (`limit` names it)",
    422: "Malformed body, parameter, name or message id",
    429: "Over the topic's backlog quota (problem `backlog-quota-exceeded`, `Retry-After`); nothing stored",
    503: "Storage or metadata store unavailable; retry",
}


def problems(*statuses: int) -> dict[int | str, dict[str, Any]]:
    """OpenAPI `responses` for the given error statuses, each an RFC 9457 body."""
    out: dict[int | str, dict[str, Any]] = {}
    for status in (*statuses, 503):
        out[status] = {
            "description": _DESCRIPTIONS[status],
            "content": {PROBLEM_MEDIA_TYPE: {"schema": {"$ref": "#/components/schemas/Problem"}}},
        }
    return out


def json_body_doc(model: type[BaseModel]) -> dict[str, Any]:
    """`openapi_extra` documenting a body the handler parses itself (hot path, no model)."""
    return {
        "requestBody": {
            "required": True,
            "content": {"application/json": {"schema": {"$ref": f"#/components/schemas/{model.__name__}"}}},
        }
    }


def json_response(content: Any, status_code: int = 200) -> Response:
    return Response(orjson.dumps(content), status_code=status_code, media_type="application/json")


NO_CONTENT = 204


def empty() -> Response:
    return Response(status_code=NO_CONTENT)


def full_name(tenant: str, namespace: str, topic: str) -> str:
    return f"{tenant}/{namespace}/{topic}"


def add_routes(app: FastAPI, router: APIRouter) -> None:
    """Serve `router`'s routes on `app` as they were built. FastAPI 0.16x keeps an included router
    whole and builds each route's parameters and bodies a second time for it (half the time of
    `create_app`, which a broker pays at its start and the in-process tests once per case). Quire's
    routers carry their prefix and tags themselves and add nothing at inclusion, so their routes
    are complete: the app's router takes them as they are."""
    app.router.routes.extend(router.routes)
