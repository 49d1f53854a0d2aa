"""Errors of the HTTP face, and the one table that maps every domain error to problem+json.

Every error body is RFC 9457 `application/problem+json`:
`{"type", "title", "status", "detail"}` plus fields that help the caller (e.g. `limit`).

The domain never raises HTTP errors. Every Quire exception carries a `kind` (common.errors), and
the status follows the kind alone, so a class the domain adds later needs no row here. An
internal error, or an exception that is not Quire's, is a 500 logged with its traceback: a bug,
never bad input.
"""

from __future__ import annotations

import logging
from typing import Any

import orjson
from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.responses import Response

from common.errors import ErrorKind, QuireError

log = logging.getLogger("quire.app")

PROBLEM_MEDIA_TYPE = "application/problem+json"
_TYPE_BASE = "https://quire.dev/problems/"


# The one table: the status each kind of error answers with, and the title used when the error
# names none. Two kinds share 503, and both tell the client to retry: "unavailable" (the storage
# or metadata below cannot serve now) and "fenced" (the topic moved to another owner or is
# closing). An internal error is a 500 answered by the unexpected-error path, which logs it.
STATUS_BY_KIND: dict[ErrorKind, tuple[int, str]] = {
    ErrorKind.not_found: (404, "Not found"),
    ErrorKind.conflict: (409, "Conflict"),
    ErrorKind.invalid: (422, "Invalid input"),
    ErrorKind.bad_request: (400, "Bad request"),
    ErrorKind.too_large: (413, "Too large"),
    ErrorKind.throttled: (429, "Too many requests"),
    ErrorKind.unavailable: (503, "Service unavailable"),
    ErrorKind.fenced: (503, "Topic moved; retry"),
    ErrorKind.elsewhere: (307, "Temporary redirect"),
    ErrorKind.internal: (500, "Internal server error"),
}

# The kind an edge error's own status stands for (503 is "unavailable": the edge fences nothing).
_KIND_BY_STATUS = {status: kind for kind, (status, _) in STATUS_BY_KIND.items() if kind != ErrorKind.fenced}


class ApiError(QuireError):
    """Bad input caught at the HTTP edge (before the domain sees it). The edge knows the status
    it answers, so the error carries it; its `kind` follows from it."""

    def __init__(self, status: int, detail: str, *, title: str | None = None, **extra: Any) -> None:
        super().__init__(detail)
        self.status = status
        self.detail = detail
        self.title = title
        self.extra = extra
        self.kind = _KIND_BY_STATUS.get(status, ErrorKind.invalid if status < 500 else ErrorKind.internal)


_TITLES = {
    400: "Bad request",
    404: "Not found",
    405: "Method not allowed",
    409: "Conflict",
    413: "Content too large",
    415: "Unsupported media type",
    422: "Unprocessable content",
    429: "Too many requests",
    500: "Internal server error",
    503: "Service unavailable",
}


def problem(
    status: int, detail: str, title: str | None = None, code: str | None = None, **extra: Any
) -> Response:
    """An RFC 9457 response; `type` is a URI made of the error's stable code (or its title)."""
    title = title or _TITLES.get(status, "Error")
    body: dict[str, Any] = {
        "type": _TYPE_BASE + (code or title.lower().replace(" ", "-")),
        "title": title,
        "status": status,
        "detail": detail,
    }
    body.update(extra)
    headers = {"Retry-After": "1"} if status in (429, 503) else None
    return Response(orjson.dumps(body), status_code=status, media_type=PROBLEM_MEDIA_TYPE, headers=headers)


def domain_problem(exc: BaseException, target: str = "") -> Response | None:
    """The problem+json answer for a Quire exception by its kind, or None for an internal error
    or a foreign exception (unexpected: 500, logged by the caller). The FastAPI exception
    handlers and the raw-ASGI fast path both answer through it.

    `target` is the request's path and query as sent: a topic owned by another broker is
    answered `307` with `Location` on the owner's URL plus the same target."""
    if isinstance(exc, ApiError):
        return problem(exc.status, exc.detail, exc.title, **exc.extra)
    if not isinstance(exc, QuireError) or exc.kind == ErrorKind.internal:
        return None
    status, default_title = STATUS_BY_KIND[exc.kind]
    title = exc.title or default_title
    code = getattr(type(exc), "code", None)
    response = problem(
        status,
        str(exc) or title,
        title,
        code if isinstance(code, str) else None,
        **_extra_fields(exc),
    )
    if exc.kind == ErrorKind.elsewhere:
        response.headers["Location"] = str(getattr(exc, "owner_url", "")).rstrip("/") + target
    return response


def request_target(scope: Any) -> str:
    """The path and query of an ASGI request as the client sent them (percent-encoded)."""
    raw: bytes = scope.get("raw_path") or scope.get("path", "").encode()
    query: bytes = scope.get("query_string") or b""
    target = raw.decode("latin-1")
    return target + "?" + query.decode("latin-1") if query else target


def _extra_fields(exc: BaseException) -> dict[str, Any]:
    """Helpful fields a domain error carries (limit, topic, ...), when JSON-friendly."""
    out: dict[str, Any] = {}
    for name in (
        "limit",
        "topic",
        "subscription",
        "message_id",
        "size",
        "index",
        "tenant",
        "namespace",
        "owner_id",
        "owner_url",
        "quota_type",
        "policy",
    ):
        value = getattr(exc, name, None)
        if isinstance(value, (int, str)) and not isinstance(value, bool):
            out[name] = value
    return out


def _validation_detail(errors: Any) -> tuple[str, list[dict[str, str]]]:
    """One readable sentence plus the per-field list (loc, msg) for a request validation error."""
    items = []
    for err in errors:
        loc = ".".join(str(p) for p in err.get("loc", ()))
        items.append({"loc": loc, "msg": str(err.get("msg", ""))})
    detail = "; ".join(f"{i['loc']}: {i['msg']}" for i in items) or "invalid request"
    return detail, items


def install(app: FastAPI, on_error: Any = None) -> None:
    """Register the handlers that turn every exception into problem+json."""

    def count(status: int) -> None:
        if on_error is not None:
            on_error(status)

    async def validation_error(request: Request, exc: Exception) -> Response:
        assert isinstance(exc, RequestValidationError)
        detail, items = _validation_detail(exc.errors())
        count(422)
        return problem(422, detail, "Invalid request", errors=items)

    async def http_error(request: Request, exc: Exception) -> Response:
        assert isinstance(exc, StarletteHTTPException)
        if exc.status_code == 400:
            # FastAPI's own 400 is a body it could not parse (not JSON): a malformed body, 422
            # like every other malformed body here.
            count(422)
            return problem(422, f"malformed request body: {exc.detail}", "Invalid request")
        count(exc.status_code)
        return problem(exc.status_code, str(exc.detail))

    async def domain_error(request: Request, exc: Exception) -> Response:
        response = domain_problem(exc, request_target(request.scope))
        if response is None:
            return await unexpected(request, exc)
        count(response.status_code)
        return response

    async def unexpected(request: Request, exc: Exception) -> Response:
        log.exception("unexpected error on %s %s", request.method, request.url.path, exc_info=exc)
        count(500)
        return problem(500, f"unexpected error: {type(exc).__name__}", "Internal server error")

    app.add_exception_handler(RequestValidationError, validation_error)
    app.add_exception_handler(StarletteHTTPException, http_error)
    app.add_exception_handler(QuireError, domain_error)
    app.add_exception_handler(Exception, unexpected)
