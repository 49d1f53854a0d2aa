"""The raw-ASGI dispatcher of the data plane's hot routes, compiled from `app.routes.table`.

Why: under load about 60% of the broker's CPU went to FastAPI/Starlette machinery (matching
the path against every admin route, dependency solving and parameter validation, middleware
layers), more than the produce itself. `QuireApp` (app.main) asks `FastPath.handle` first for
every HTTP request. It serves every route of the table by calling the route's `DataHandlers`
method, the same one the FastAPI route calls, and turns errors into problem+json with app.errors'
one table.

Nothing about a route is written here: paths, parameter names, types, bounds and defaults all
come from the table. The dispatcher only takes requests it can validate exactly as FastAPI
would: path segments (percent-decoded, as ASGI's `path` is) that pass the name rule of
topics.names, and query values in their plainest form (`max_messages=100`, not `+100` or `1e2`).
Anything else (another route or method, a bad name, an odd query value, a `root_path`) returns
False and FastAPI serves it, so its 404/405/422 answers stay FastAPI's own.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Awaitable, Callable, MutableMapping
from dataclasses import dataclass
from enum import Enum
from typing import Any
from urllib.parse import parse_qsl

from app.errors import ApiError, domain_problem, problem, request_target
from app.metrics import Metrics
from app.routes.data import DataHandlers
from app.routes.table import HOT_ROUTES, HotRoute, QueryParam, Reply, bind
from bookie.errors import QuireError
from topics.names import NAME_REGEX

log = logging.getLogger("quire.app")

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]

_PREFIX = "/v1/topics/"
# Integers FastAPI would read as the same value: plain digits, no sign, blanks or exponent.
_DIGITS = re.compile(r"[0-9]{1,12}")
_BOOLS = {"true": True, "false": False, "1": True, "0": False}


class _FallThrough(Exception):
    """A request the dispatcher does not validate itself: FastAPI answers instead."""


Parse = Callable[[str], Any]


def _parser(param: QueryParam) -> Parse:
    """How one query value is read: as FastAPI would read it, or _FallThrough."""
    kind, ge, max_length = param.type, param.ge, param.max_length
    if kind is int:

        def parse_int(text: str) -> int:
            if _DIGITS.fullmatch(text) is None:
                raise _FallThrough
            value = int(text)
            if ge is not None and value < ge:
                raise _FallThrough
            return value

        return parse_int
    if kind is bool:
        return lambda text: _choice(_BOOLS, text)
    if issubclass(kind, Enum):
        choices = {member.value: member for member in kind}
        return lambda text: _choice(choices, text)
    if kind is str:

        def parse_str(text: str) -> str:
            if max_length is not None and len(text) > max_length:
                raise _FallThrough
            return text

        return parse_str
    raise TypeError(f"no fast-path parser for query parameter {param.name} of type {kind}")


def _choice(table: dict[str, Any], text: str) -> Any:
    value = table.get(text, _choice)
    if value is _choice:
        raise _FallThrough
    return value


@dataclass(frozen=True, slots=True)
class _Compiled:
    """One table route, ready to match: its path regex, query readers and bound handler."""

    pattern: re.Pattern[str]
    query: tuple[tuple[str, Parse, Any], ...]
    call: Callable[..., Awaitable[Reply]]
    has_body: bool

    @classmethod
    def of(cls, route: HotRoute, handlers: DataHandlers) -> _Compiled:
        # Every `{param}` is one path segment that passes the name rule; a segment that does not
        # makes the path not match, and FastAPI answers it (its 422 names the parameter).
        segment = f"({NAME_REGEX})"
        regex = segment.join(re.escape(part) for part in re.split(r"\{[a-z_]+\}", route.full_path))
        query = tuple((q.name, _parser(q), q.default) for q in route.query)
        return cls(re.compile(regex), query, bind(route, handlers), route.body is not None)

    def arguments(self, match: re.Match[str], query_string: bytes) -> list[Any]:
        """The handler's arguments before the body, or _FallThrough."""
        segments = match.groups()
        args: list[Any] = [f"{segments[0]}/{segments[1]}/{segments[2]}", *segments[3:]]
        if self.query:
            q = _query(query_string)
            for name, parse, default in self.query:
                text = q.get(name)
                args.append(default if text is None else parse(text))
        return args


class FastPath:
    def __init__(self, handlers: DataHandlers, metrics: Metrics) -> None:
        self.handlers = handlers
        self.metrics = metrics
        self.enabled = True
        self._routes: dict[str, list[_Compiled]] = {}
        for route in HOT_ROUTES:
            self._routes.setdefault(route.method, []).append(_Compiled.of(route, handlers))

    async def handle(self, scope: Scope, receive: Receive, send: Send) -> bool:
        """Serve the request and return True, or return False (nothing read, nothing sent)."""
        if not self.enabled or scope.get("root_path"):
            return False
        path: str = scope["path"]
        routes = self._routes.get(scope["method"])
        if routes is None or not path.startswith(_PREFIX):
            return False
        for route in routes:
            match = route.pattern.fullmatch(path)
            if match is not None:
                break
        else:
            return False
        try:
            args = route.arguments(match, scope["query_string"])
        except _FallThrough:
            return False
        await self._serve(route, args, scope, receive, send)
        return True

    async def _serve(
        self, route: _Compiled, args: list[Any], scope: Scope, receive: Receive, send: Send
    ) -> None:
        raw = await _read_body(receive)
        if raw is None:
            return  # the client went away before sending its body: nobody to answer
        if route.has_body:
            args.append(raw)
        try:
            status, headers, body = await route.call(*args)
        except Exception as exc:
            status, headers, body = self.error_reply(exc, request_target(scope))
        await send({"type": "http.response.start", "status": status, "headers": headers})
        await send({"type": "http.response.body", "body": body})

    def error_reply(self, exc: Exception, target: str = "") -> Reply:
        """What app.errors' exception handlers answer for `exc`, as a Reply (same table)."""
        if isinstance(exc, ApiError):
            response = problem(exc.status, exc.detail, exc.title, **exc.extra)
        else:
            found = domain_problem(exc, target) if isinstance(exc, QuireError) else None
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
