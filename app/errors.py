"""Errors of the HTTP face, and the one table that maps every domain error to problem+json.

Every error body is RFC 9457 `application/problem+json`:
`{"type", "title", "status", "detail"}` plus fields that help the caller (e.g. `limit`).

The domain never raises HTTP errors. Its exceptions (topics.errors, managed_ledger errors, the
metadata store's, the bookie's) are mapped here by class name, walking the exception's MRO, so
a subclass the domain adds later lands on its parent's status without touching this file. What
the table does not know is a 500 (logged with its traceback): a bug, never bad input.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

import orjson
from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.responses import Response

from bookie.errors import BookieError, ErrorCode, QuireError

log = logging.getLogger("quire.app")

PROBLEM_MEDIA_TYPE = "application/problem+json"
_TYPE_BASE = "https://quire.dev/problems/"


class ApiError(QuireError):
    """Bad input caught at the HTTP edge (before the domain sees it)."""

    def __init__(self, status: int, detail: str, *, title: str | None = None, **extra: Any) -> None:
        super().__init__(detail)
        self.status = status
        self.detail = detail
        self.title = title
        self.extra = extra


@dataclass(frozen=True, slots=True)
class Mapping_:
    status: int
    title: str


# The table: domain exception class name -> (status, title). Exact names first (walking the
# MRO, so a subclass lands on its parent's row), then the name patterns below. The titles here
# are fallbacks: a domain error's own `title` (topics.errors) wins.
STATUS_BY_NAME: dict[str, Mapping_] = {
    # topics.errors (its module docstring lists the same statuses)
    "InvalidArgumentError": Mapping_(422, "Invalid argument"),
    "TenantNotFoundError": Mapping_(404, "Tenant not found"),
    "NamespaceNotFoundError": Mapping_(404, "Namespace not found"),
    "TopicNotFoundError": Mapping_(404, "Topic not found"),
    "SubscriptionNotFoundError": Mapping_(404, "Subscription not found"),
    "MessageNotFoundError": Mapping_(404, "Message not found"),
    "TenantExistsError": Mapping_(409, "Tenant already exists"),
    "NamespaceExistsError": Mapping_(409, "Namespace already exists"),
    "TopicExistsError": Mapping_(409, "Topic already exists"),
    "TenantNotEmptyError": Mapping_(409, "Tenant not empty"),
    "NamespaceNotEmptyError": Mapping_(409, "Namespace not empty"),
    "TopicBusyError": Mapping_(409, "Topic has subscriptions"),
    "ConsumerBusyError": Mapping_(409, "Exclusive subscription busy"),
    "CompactionConflictError": Mapping_(409, "Compaction already running"),
    "WaitTooLongError": Mapping_(400, "Wait too long"),
    "TooManyMessagesRequestedError": Mapping_(400, "Too many messages requested"),
    "MessageTooLargeError": Mapping_(413, "Message too large"),
    "BatchTooLargeError": Mapping_(413, "Batch too large"),
    "StorageUnavailableError": Mapping_(503, "Storage unavailable"),
    # managed_ledger.errors
    "EntryNotFoundError": Mapping_(404, "Message not found"),
    "CursorNotFoundError": Mapping_(404, "Subscription not found"),
    "ManagedLedgerWriteError": Mapping_(503, "Storage unavailable"),
    "MetadataUnavailableError": Mapping_(503, "Metadata store unavailable"),
    "NoBookiesError": Mapping_(503, "Not enough bookies"),
    "ManagedLedgerFencedError": Mapping_(503, "Topic moved; retry"),
    "ManagedLedgerClosedError": Mapping_(503, "Topic closing; retry"),
    # the metadata store and the bookie
    "NotFoundError": Mapping_(404, "Not found"),
    "AlreadyExistsError": Mapping_(409, "Already exists"),
    "NotEmptyError": Mapping_(409, "Not empty"),
    "BadVersionError": Mapping_(409, "Concurrent update"),
    "SchemaBehindError": Mapping_(503, "Metadata schema behind"),
    "NoSuchLedgerError": Mapping_(404, "Message not found"),
    "NoSuchEntryError": Mapping_(404, "Message not found"),
    "EntryFormatError": Mapping_(422, "Invalid message"),
}

# Name fragments for classes the exact table does not list, checked in this order.
STATUS_BY_PATTERN: tuple[tuple[str, Mapping_], ...] = (
    ("NotFound", Mapping_(404, "Not found")),
    ("TooLarge", Mapping_(413, "Too large")),
    ("Exists", Mapping_(409, "Already exists")),
    ("Conflict", Mapping_(409, "Conflict")),
    ("Busy", Mapping_(409, "Conflict")),
    ("Running", Mapping_(409, "Conflict")),
    ("NotEmpty", Mapping_(409, "Not empty")),
    ("Invalid", Mapping_(422, "Invalid input")),
    ("Malformed", Mapping_(422, "Invalid input")),
    ("BadRequest", Mapping_(400, "Bad request")),
)

# Bookie codes that mean "the storage cannot serve now, retry": 503, never a 500.
_UNAVAILABLE_CODES = {
    ErrorCode.UNAVAILABLE,
    ErrorCode.TIMEOUT,
    ErrorCode.TOO_MANY_REQUESTS,
    ErrorCode.READ_ONLY,
}

_TITLES = {
    400: "Bad request",
    404: "Not found",
    405: "Method not allowed",
    409: "Conflict",
    413: "Content too large",
    415: "Unsupported media type",
    422: "Unprocessable content",
    500: "Internal server error",
    503: "Service unavailable",
}


def lookup(exc: BaseException) -> Mapping_ | None:
    """The table's entry for a domain exception, or None (an unexpected error: 500)."""
    if isinstance(exc, BookieError):
        if exc.code in _UNAVAILABLE_CODES:
            return Mapping_(503, "Storage unavailable")
        if exc.code in (ErrorCode.NO_SUCH_ENTRY, ErrorCode.NO_SUCH_LEDGER):
            return Mapping_(404, "Message not found")
    for cls in type(exc).__mro__:
        found = STATUS_BY_NAME.get(cls.__name__)
        if found is not None:
            return found
    if isinstance(exc, QuireError):
        name = type(exc).__name__
        for fragment, mapping in STATUS_BY_PATTERN:
            if fragment in name:
                return mapping
        if getattr(exc, "retriable", False):
            return Mapping_(503, "Service unavailable")
    return None


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
    headers = {"Retry-After": "1"} if status == 503 else None
    return Response(orjson.dumps(body), status_code=status, media_type=PROBLEM_MEDIA_TYPE, headers=headers)


def domain_problem(exc: BaseException) -> Response | None:
    """The problem+json answer for a domain exception by the table, or None (unexpected: 500).
    The FastAPI exception handlers and the raw-ASGI fast path both answer through it."""
    mapping = lookup(exc)
    if mapping is None:
        return None
    title = getattr(type(exc), "title", None)
    code = getattr(type(exc), "code", None)
    return problem(
        mapping.status,
        str(exc) or mapping.title,
        title if isinstance(title, str) else mapping.title,
        code if isinstance(code, str) else None,
        **_extra_fields(exc),
    )


def _extra_fields(exc: BaseException) -> dict[str, Any]:
    """Helpful fields a domain error carries (limit, topic, ...), when JSON-friendly."""
    out: dict[str, Any] = {}
    for name in ("limit", "topic", "subscription", "message_id", "size", "index", "tenant", "namespace"):
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

    async def api_error(request: Request, exc: Exception) -> Response:
        assert isinstance(exc, ApiError)
        count(exc.status)
        return problem(exc.status, exc.detail, exc.title, **exc.extra)

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
        response = domain_problem(exc)
        if response is None:
            return await unexpected(request, exc)
        count(response.status_code)
        return response

    async def unexpected(request: Request, exc: Exception) -> Response:
        log.exception("unexpected error on %s %s", request.method, request.url.path, exc_info=exc)
        count(500)
        return problem(500, f"unexpected error: {type(exc).__name__}", "Internal server error")

    app.add_exception_handler(ApiError, api_error)
    app.add_exception_handler(RequestValidationError, validation_error)
    app.add_exception_handler(StarletteHTTPException, http_error)
    app.add_exception_handler(QuireError, domain_error)
    app.add_exception_handler(Exception, unexpected)
