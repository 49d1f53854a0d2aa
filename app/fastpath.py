"""The raw-ASGI fast path for the data plane's hot operations.

Why: under load about 60% of the broker's CPU went to FastAPI/Starlette machinery (matching
the path against every admin route, dependency solving and parameter validation, middleware
layers), more than the produce itself. `QuireApp` (app.main) asks `FastPath.handle` first for
every HTTP request; it serves

    POST /v1/topics/{tenant}/{namespace}/{topic}/messages                            produce
    GET  /v1/topics/{tenant}/{namespace}/{topic}/messages                            read
    GET  /v1/topics/{tenant}/{namespace}/{topic}/subscriptions/{subscription}/messages  receive
    POST /v1/topics/{tenant}/{namespace}/{topic}/subscriptions/{subscription}/ack       ack

by calling the same `DataHandlers` methods as the FastAPI routes, and turns their errors into
problem+json with app.errors' one table. It only takes requests it can validate exactly as
FastAPI would: path segments (percent-decoded, as ASGI's `path` is) that match the name rule,
and query values in their plainest form (`max_messages=100`, not `+100` or `1e2`). Anything
else — another route or method, a bad name, an odd query value, a `root_path` — returns False
and FastAPI serves it, so its 404/405/422 answers stay FastAPI's own.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any
from urllib.parse import parse_qsl

from app.errors import ApiError, domain_problem, problem
from app.metrics import Metrics
from app.routes.data import DataHandlers, Reply
from bookie.errors import QuireError

log = logging.getLogger("quire.app")

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]

# The name rule of app.routes.common.NAME_PATTERN, anchored by the path regex itself (a Python
# `$` would also match before a trailing newline; pydantic's would not).
_NAME = r"([A-Za-z0-9_=.\-]{1,128})"
_TOPIC = rf"/v1/topics/{_NAME}/{_NAME}/{_NAME}"
_MESSAGES = re.compile(rf"{_TOPIC}/messages")
_SUBSCRIPTION = re.compile(rf"{_TOPIC}/subscriptions/{_NAME}/(messages|ack)")
# Integers FastAPI would read as the same value: plain digits, no sign, blanks or exponent.
_DIGITS = re.compile(r"[0-9]{1,12}")
_BOOLS = {"true": True, "false": False, "1": True, "0": False}
_ENCODINGS = {"text": False, "base64": True}
_MAX_CONSUMER_ID_CHARS = 200  # Query(max_length=200) on the receive route


class _FallThrough(Exception):
    """A query value the fast path does not validate itself: FastAPI answers instead."""


class FastPath:
    def __init__(self, handlers: DataHandlers, metrics: Metrics) -> None:
        self.handlers = handlers
        self.metrics = metrics
        self.enabled = True

    async def handle(self, scope: Scope, receive: Receive, send: Send) -> bool:
        """Serve the request and return True, or return False (nothing read, nothing sent)."""
        if not self.enabled or scope.get("root_path"):
            return False
        method, path = scope["method"], scope["path"]
        try:
            if method == "POST":
                call = self._post(path)
            elif method == "GET":
                call = self._get(path, scope["query_string"])
            else:
                return False
        except _FallThrough:
            return False
        if call is None:
            return False
        await self._serve(call, receive, send)
        return True

    def _post(self, path: str) -> Callable[[bytes], Awaitable[Reply]] | None:
        h = self.handlers
        m = _MESSAGES.fullmatch(path)
        if m is not None:
            name = f"{m[1]}/{m[2]}/{m[3]}"
            return lambda raw: h.produce(name, raw)
        m = _SUBSCRIPTION.fullmatch(path)
        if m is not None and m[5] == "ack":
            name, subscription = f"{m[1]}/{m[2]}/{m[3]}", m[4]
            return lambda raw: h.ack(name, subscription, raw)
        return None

    def _get(self, path: str, query_string: bytes) -> Callable[[bytes], Awaitable[Reply]] | None:
        h = self.handlers
        m = _SUBSCRIPTION.fullmatch(path)
        if m is not None and m[5] == "messages":
            name, subscription = f"{m[1]}/{m[2]}/{m[3]}", m[4]
            q = _query(query_string)
            max_messages, wait_ms = _int(q, "max_messages", 100, 1), _int(q, "wait_ms", 0, 0)
            consumer_id = q.get("consumer_id")
            if consumer_id is not None and len(consumer_id) > _MAX_CONSUMER_ID_CHARS:
                raise _FallThrough
            force = _choice(q, "value_encoding", _ENCODINGS, False)
            return lambda _: h.receive(name, subscription, max_messages, wait_ms, consumer_id, force)
        m = _MESSAGES.fullmatch(path)
        if m is not None:
            name = f"{m[1]}/{m[2]}/{m[3]}"
            q = _query(query_string)
            start = q.get("start", "earliest")
            max_messages, wait_ms = _int(q, "max_messages", 100, 1), _int(q, "wait_ms", 0, 0)
            compacted = _choice(q, "read_compacted", _BOOLS, False)
            force = _choice(q, "value_encoding", _ENCODINGS, False)
            return lambda _: h.read(name, start, max_messages, compacted, wait_ms, force)
        return None

    async def _serve(self, call: Callable[[bytes], Awaitable[Reply]], receive: Receive, send: Send) -> None:
        raw = await _read_body(receive)
        if raw is None:
            return  # the client went away before sending its body: nobody to answer
        try:
            status, headers, body = await call(raw)
        except Exception as exc:
            status, headers, body = self.error_reply(exc)
        await send({"type": "http.response.start", "status": status, "headers": headers})
        await send({"type": "http.response.body", "body": body})

    def error_reply(self, exc: Exception) -> Reply:
        """What app.errors' exception handlers answer for `exc`, as a Reply (same table)."""
        if isinstance(exc, ApiError):
            response = problem(exc.status, exc.detail, exc.title, **exc.extra)
        else:
            found = domain_problem(exc) if isinstance(exc, QuireError) else None
            if found is None:
                log.exception("unexpected error on the fast path", exc_info=exc)
                found = problem(500, f"unexpected error: {type(exc).__name__}", "Internal server error")
            response = found
        self.metrics.error(response.status_code)
        return response.status_code, list(response.raw_headers), bytes(response.body)


async def _read_body(receive: Receive) -> bytes | None:
    """The whole request body, or None when the client disconnected first."""
    message = await receive()
    if message["type"] != "http.request":
        return None
    body: bytes = message.get("body", b"")
    if not message.get("more_body", False):
        return body
    parts = [body]
    while True:
        message = await receive()
        if message["type"] != "http.request":
            return None
        parts.append(message.get("body", b""))
        if not message.get("more_body", False):
            return b"".join(parts)


def _query(query_string: bytes) -> dict[str, str]:
    # As Starlette's QueryParams: latin-1 bytes, blanks kept, the last of repeated keys wins.
    if not query_string:
        return {}
    return dict(parse_qsl(query_string.decode("latin-1"), keep_blank_values=True))


def _int(q: dict[str, str], key: str, default: int, minimum: int) -> int:
    text = q.get(key)
    if text is None:
        return default
    if _DIGITS.fullmatch(text) is None:
        raise _FallThrough
    value = int(text)
    if value < minimum:
        raise _FallThrough
    return value


def _choice(q: dict[str, str], key: str, table: dict[str, bool], default: bool) -> bool:
    text = q.get(key)
    if text is None:
        return default
    value = table.get(text)
    if value is None:
        raise _FallThrough
    return value
