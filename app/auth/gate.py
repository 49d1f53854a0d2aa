"""The one door every HTTP request passes when authentication is on, before the raw fast path
and FastAPI (QuireApp.__call__), so no route can forget it.

1. The request is matched to its operation with the app's own route patterns (the same ones
   Starlette routes with), and the operation to what it needs (app.auth.policy). An operation
   without a row stops the app from serving at all.
2. Open operations (health, readiness, the docs and the spec; `/metrics` unless
   QUIRE_METRICS_REQUIRE_TOKEN) pass with or without a token.
3. Anything else needs `Authorization: Bearer <JWT>` that verifies (app.auth.tokens): 401 with
   `WWW-Authenticate: Bearer` otherwise, whatever the path, even one that matches no route.
4. With authorization on, the token's role must hold what the operation needs in the tenant and
   namespace its path names (app.auth.authorizer): 403 otherwise, naming the missing
   permission. Nothing about the topic is looked at first (no existence oracle).

Both refusals are problem+json like every other error, and never contain the token.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from fastapi.routing import APIRoute

try:
    from fastapi.routing import iter_route_contexts
except ImportError:  # FastAPI before included routers were kept whole
    iter_route_contexts = None  # type: ignore[assignment]
from starlette.routing import Mount

from app import docs_ui
from app.auth.authorizer import Authorizer, Denied
from app.auth.policy import CHANGES_GRANTS, NAMESPACE_NEEDS, NEEDS, Need
from app.auth.tokens import TokenRefused, TokenVerifier, bearer_token
from app.console import CONSOLE_URL
from app.errors import domain_problem, problem
from app.fastpath import Message, Scope, Send
from common.errors import QuireError
from topics.api import AdminApi

log = logging.getLogger("quire.auth")

# Routes outside the spec that are open: the docs pages, their assets and the spec itself; `/`
# (a redirect to the console) and the console's pages, which hold no data of their own: each
# calls the API with its session's token, back through this gate (app.console.client).
OPEN_PATHS = frozenset(
    {docs_ui.DOCS_URL, docs_ui.REDOC_URL, docs_ui.OAUTH2_REDIRECT_URL, "/openapi.json", "/"}
)
_AUTHORIZATION = b"authorization"
_CHALLENGE = b'Bearer realm="quire"'


@dataclass(frozen=True, slots=True)
class SecurityConfig:
    """What app.wiring builds from the settings (authentication is on when this exists)."""

    verifier: TokenVerifier
    authorization: bool
    super_user_roles: frozenset[str]
    metrics_require_token: bool = False
    authorization_cache_ms: int = 1_000


@dataclass(frozen=True, slots=True)
class Rule:
    pattern: re.Pattern[str]
    methods: frozenset[str] | None  # None: any method (a mount)
    operation_id: str
    need: Need


def _prefix(path: str) -> tuple[str, ...]:
    """The leading literal segments of a route path (at most three): its bucket in the table."""
    out = []
    for part in path.strip("/").split("/")[:3]:
        if "{" in part:
            break
        out.append(part)
    return tuple(out)


class RouteTable:
    """The app's routes as (pattern, methods, operation, need), in buckets by leading segments."""

    def __init__(self, routes: Iterable[Any]) -> None:
        self._buckets: dict[tuple[str, ...], list[Rule]] = {}
        for route in _flat(routes):
            rule = _rule(route)
            self._buckets.setdefault(_prefix(getattr(route, "path", "")), []).append(rule)

    def match(self, method: str, path: str) -> tuple[Rule, dict[str, str]] | None:
        parts = tuple(path.strip("/").split("/", 3)[:3])
        for size in (3, 2, 1, 0):
            for rule in self._buckets.get(parts[:size], ()):
                found = rule.pattern.match(path)
                if found is not None and (rule.methods is None or method in rule.methods):
                    return rule, found.groupdict()
        return None


def _flat(routes: Iterable[Any]) -> list[Any]:
    """Every route with its full path, those of included routers too (FastAPI 0.13x and later
    keep included routers whole; `iter_route_contexts` is how its OpenAPI generator walks them)."""
    if iter_route_contexts is None:  # older FastAPI: include_router copied the routes in
        return list(routes)
    return list(iter_route_contexts(list(routes)))


def _rule(route: Any) -> Rule:
    original = getattr(route, "original_route", route)
    if isinstance(original, APIRoute) and route.include_in_schema:
        need = NEEDS.get(route.operation_id or "")
        if need is None:
            raise RuntimeError(
                f"{sorted(route.methods)} {route.path} (operation {route.operation_id}) has no row in "
                "app/auth/policy.py: say who may call it before it is served"
            )
        params = set(route.param_convertors)
        if (need in NAMESPACE_NEEDS and not {"tenant", "namespace"} <= params) or (
            need == Need.TENANT_ADMIN and "tenant" not in params
        ):
            raise RuntimeError(f"{route.operation_id} needs {need} but its path names no tenant/namespace")
        return Rule(route.path_regex, frozenset(route.methods), route.operation_id or "", need)
    path = getattr(route, "path", "")
    console = path == CONSOLE_URL or path.startswith(CONSOLE_URL + "/")
    if path in OPEN_PATHS or console or (isinstance(original, Mount) and path == docs_ui.ASSETS_URL):
        methods = getattr(route, "methods", None)
        return Rule(route.path_regex, None if methods is None else frozenset(methods), path, Need.OPEN)
    raise RuntimeError(f"route {path} is neither an operation of the spec nor a docs page: no rule for it")


class Gate:
    def __init__(
        self,
        routes: list[Any],
        topics: AdminApi,
        config: SecurityConfig,
        on_error: Callable[[int], None] | None = None,
    ) -> None:
        self._routes = routes
        self._table = RouteTable(routes)
        self._compiled_for = len(routes)
        self.config = config
        self.authorizer = Authorizer(topics, config.super_user_roles, config.authorization_cache_ms)
        self._on_error = on_error

    def _match(self, method: str, path: str) -> tuple[Rule, dict[str, str]] | None:
        if len(self._routes) != self._compiled_for:  # a route added after the app was built
            self._table, self._compiled_for = RouteTable(self._routes), len(self._routes)
        return self._table.match(method, path)

    async def admit(self, scope: Scope, send: Send) -> Send | None:
        """The send to serve the request with, or None when the gate answered it (401, 403)."""
        found = self._match(scope["method"], _route_path(scope))
        rule, params = found if found is not None else (None, {})
        if rule is not None and self._open(rule.need):
            return send
        try:
            role = self._role(scope)
        except TokenRefused as exc:
            await self._refuse(send, 401, str(exc), scope)
            return None
        if rule is None or not self.config.authorization:
            return send  # no such route: FastAPI answers 404 or 405 to a caller with a valid token
        try:
            denied = await self.authorizer.check(
                role, rule.need, params.get("tenant"), params.get("namespace")
            )
        except QuireError as exc:  # the metadata store cannot answer: 503, retry
            response = domain_problem(exc)
            if response is None:
                raise
            await self._send(send, response.status_code, list(response.raw_headers), bytes(response.body))
            return None
        if denied is not None:
            await self._forbid(send, denied)
            return None
        return self._forgetting(send) if rule.operation_id in CHANGES_GRANTS else send

    async def may(self, role: str, method: str, path: str) -> bool:
        """Would `admit` let `role` (already authenticated) through to `method path` (a decoded
        path)? The same route table and authorizer, asked about a request nobody sends: the
        console hides the forms a role may not use with it. Only a hint: when it cannot tell (no
        such route, the store does not answer) it says yes and the request itself is decided by
        `admit` as always."""
        found = self._match(method, path)
        if found is None or not self.config.authorization or self._open(found[0].need):
            return True
        rule, params = found
        try:
            denied = await self.authorizer.check(
                role, rule.need, params.get("tenant"), params.get("namespace")
            )
        except QuireError:
            return True
        return denied is None

    def _open(self, need: Need) -> bool:
        return need == Need.OPEN or (need == Need.METRICS and not self.config.metrics_require_token)

    def _role(self, scope: Scope) -> str:
        header = next((value for name, value in scope["headers"] if name == _AUTHORIZATION), None)
        token = bearer_token(header)
        if token is None:
            if header:
                raise TokenRefused("the Authorization header is not `Bearer <token>`")
            raise TokenRefused("")
        return self.config.verifier.role(token)

    def _forgetting(self, send: Send) -> Send:
        """`send`, emptying the grants cache as the answer starts (after the change was made)."""

        async def forgetting(message: Message) -> None:
            if message["type"] == "http.response.start":
                self.authorizer.forget()
            await send(message)

        return forgetting

    async def _refuse(self, send: Send, status: int, reason: str, scope: Scope) -> None:
        if reason:
            detail, code, challenge = f"invalid token: {reason}", "invalid-token", b', error="invalid_token"'
        else:
            detail, code, challenge = (
                "authentication required: send `Authorization: Bearer <token>`",
                "authentication-required",
                b"",
            )
        log.debug("refused %s %s: %s", scope["method"], scope["path"], detail)
        response = problem(status, detail, "Unauthorized", code)
        headers = [*response.raw_headers, (b"www-authenticate", _CHALLENGE + challenge)]
        await self._send(send, status, headers, bytes(response.body))

    async def _forbid(self, send: Send, denied: Denied) -> None:
        fields = {"permission": denied.permission, "tenant": denied.tenant, "namespace": denied.namespace}
        extra = {k: v for k, v in fields.items() if v is not None}
        response = problem(403, denied.detail, "Forbidden", "permission-denied", **extra)
        await self._send(send, 403, list(response.raw_headers), bytes(response.body))

    async def _send(self, send: Send, status: int, headers: list[tuple[bytes, bytes]], body: bytes) -> None:
        if self._on_error is not None:
            self._on_error(status)
        await send({"type": "http.response.start", "status": status, "headers": headers})
        await send({"type": "http.response.body", "body": body})


def _route_path(scope: Scope) -> str:
    """The path the routes are matched against (Starlette's rule: without the root path)."""
    path: str = scope["path"]
    root: str = scope.get("root_path", "")
    return path[len(root) :] if root and path.startswith(root) else path
