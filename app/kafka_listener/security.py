"""Authentication and authorization on the Kafka listener (issue 15's Kafka door).

With authentication on (QUIRE_AUTHENTICATION_ENABLED, the same switch and keys as HTTP), a client
authenticates with SASL before anything else: SaslHandshake v1, then SaslAuthenticate carrying
the token Quire's HTTP API takes as `Authorization: Bearer`:

    PLAIN        authzid NUL username NUL password: the password is the token (the username
                 is not used; the token's `sub` is the role)
    OAUTHBEARER  RFC 7628's client first message, `n,,\\x01auth=Bearer <token>\\x01\\x01`

A connection that sends any other request before it authenticated is closed (Kafka closes
it too). A token that expires closes the connection at the next request after it expired;
SaslAuthenticate v1 tells the client its session lifetime so that clients re-authenticate in
time (KIP-368). A refused token gets SASL_AUTHENTICATION_FAILED with the reason, never the
token.

Authorization follows the HTTP rules (app.auth.authorizer): Produce needs the produce permission
on the topic's namespace; Fetch, ListOffsets and OffsetCommit/OffsetFetch the consume permission;
Metadata either; CreateTopics, DeleteTopics and DeleteRecords the tenant's admin;
DescribeConfigs either permission. Super-users may do everything. A topic the role may not use
gets TOPIC_AUTHORIZATION_FAILED whether it exists or not.

Consumer groups belong to the listener's namespace (QUIRE_KAFKA_TENANT/NAMESPACE), as KoP scopes
them per tenant/namespace: membership (JoinGroup, SyncGroup, Heartbeat, LeaveGroup) and the
group's offsets (OffsetCommit, OffsetFetch) need the consume permission on that namespace --
Kafka's READ on the group -- else GROUP_AUTHORIZATION_FAILED, so another tenant's role can
neither join a group, lead it and starve its members, nor read its offsets. FindCoordinator
only names the coordinator and is not checked.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable
from typing import Any

from app.auth.authorizer import Authorizer
from app.auth.policy import Need
from app.auth.tokens import TokenRefused, TokenVerifier
from app.kafka_listener.common import build, module
from app.kafka_listener.errors import ErrorCode
from app.kafka_listener.server import CloseConnection, Handler, RequestContext
from app.kafka_listener.versions import ApiKey

log = logging.getLogger("quire.kafka")

MECHANISMS = ("PLAIN", "OAUTHBEARER")
_OPEN = frozenset({ApiKey.API_VERSIONS, ApiKey.SASL_HANDSHAKE, ApiKey.SASL_AUTHENTICATE})
ROLE = "role"  # connection state keys
EXPIRES = "expires_s"
MECHANISM = "mechanism"


class Access:
    """Who may use a topic or a namespace. Without security every check passes."""

    async def denied(self, ctx: RequestContext, topic: str, need: Need) -> bool:
        tenant, namespace, _ = topic.split("/", 2)
        return await self.namespace_denied(ctx, tenant, namespace, need)

    async def namespace_denied(self, ctx: Any, tenant: str, namespace: str, need: Need) -> bool:
        return False


class KafkaSecurity(Access):
    def __init__(
        self, verifier: TokenVerifier, authorizer: Authorizer | None, clock: Callable[[], float] = time.time
    ) -> None:
        self._verifier = verifier
        self._authorizer = authorizer
        self._clock = clock

    @staticmethod
    def authenticated(state: dict[str, Any]) -> bool:
        """Whether the connection of this state has authenticated (the server's bounds)."""
        return ROLE in state

    def handlers(self) -> dict[int, Handler]:
        return {ApiKey.SASL_HANDSHAKE: self.handshake, ApiKey.SASL_AUTHENTICATE: self.authenticate}

    def guard(self, api_key: int, handler: Handler) -> Handler:
        """`handler`, reachable only by an authenticated connection whose token has not expired."""
        if api_key in _OPEN:
            return handler

        async def guarded(ctx: RequestContext, request: Any) -> Any:
            role = ctx.state.get(ROLE)
            if role is None:
                log.info(
                    "Kafka connection %s: API key %d before SASL authentication; closing", ctx.peer, api_key
                )
                raise CloseConnection
            if self._clock() >= ctx.state[EXPIRES]:
                log.info("Kafka connection %s: the token of role %s expired; closing", ctx.peer, role)
                raise CloseConnection
            return await handler(ctx, request)

        return guarded

    async def namespace_denied(self, ctx: Any, tenant: str, namespace: str, need: Need) -> bool:
        if self._authorizer is None:
            return False
        return await self._authorizer.check(ctx.state[ROLE], need, tenant, namespace) is not None

    async def handshake(self, ctx: RequestContext, req: Any) -> Any:
        mod = module(ApiKey.SASL_HANDSHAKE, ctx.api_version)
        mechanism = str(req.mechanism)
        if mechanism not in MECHANISMS or ROLE in ctx.state:
            code = (
                ErrorCode.UNSUPPORTED_SASL_MECHANISM
                if mechanism not in MECHANISMS
                else ErrorCode.ILLEGAL_SASL_STATE
            )
            return build(mod.SaslHandshakeResponse, error_code=code.kio, mechanisms=MECHANISMS)
        ctx.state[MECHANISM] = mechanism
        return build(mod.SaslHandshakeResponse, error_code=ErrorCode.NONE.kio, mechanisms=MECHANISMS)

    async def authenticate(self, ctx: RequestContext, req: Any) -> Any:
        mod = module(ApiKey.SASL_AUTHENTICATE, ctx.api_version)
        mechanism = ctx.state.pop(MECHANISM, None)
        if mechanism is None:
            return self._failed(mod, ErrorCode.ILLEGAL_SASL_STATE, "SaslAuthenticate before SaslHandshake")
        token = _token(mechanism, bytes(req.auth_bytes))
        if token is None:
            return self._failed(mod, ErrorCode.SASL_AUTHENTICATION_FAILED, f"malformed {mechanism} message")
        try:
            role, expires_s = self._verifier.role_and_expiry(token)
        except TokenRefused as exc:
            return self._failed(mod, ErrorCode.SASL_AUTHENTICATION_FAILED, f"token refused: {exc}")
        ctx.state[ROLE], ctx.state[EXPIRES] = role, expires_s
        lifetime_ms = 0 if expires_s == float("inf") else max(1, int((expires_s - self._clock()) * 1000))
        return build(
            mod.SaslAuthenticateResponse,
            error_code=ErrorCode.NONE.kio,
            error_message=None,
            auth_bytes=b"",
            session_lifetime=_ms(lifetime_ms),
        )

    @staticmethod
    def _failed(mod: Any, code: ErrorCode, message: str) -> Any:
        return build(
            mod.SaslAuthenticateResponse,
            error_code=code.kio,
            error_message=message,
            auth_bytes=b"",
            session_lifetime=_ms(0),
        )


def _token(mechanism: str, auth: bytes) -> str | None:
    """The token inside a PLAIN or OAUTHBEARER client message; None when it is malformed."""
    try:
        text = auth.decode("utf-8")
    except UnicodeDecodeError:
        return None
    if mechanism == "PLAIN":
        parts = text.split("\x00")
        return parts[2] if len(parts) == 3 and parts[2] else None
    for item in text.split("\x01"):
        if item.startswith("auth=Bearer "):
            return item.removeprefix("auth=Bearer ").strip() or None
    return None


def _ms(value: int) -> Any:
    import datetime

    return datetime.timedelta(milliseconds=value)


async def check_all(access: Access, ctx: RequestContext, topics: list[str], need: Need) -> set[str]:
    """The topics among `topics` the connection's role may not use for `need`."""
    return {t for t in set(topics) if await access.denied(ctx, t, need)}


Checker = Callable[[RequestContext, str, Need], Awaitable[bool]]
