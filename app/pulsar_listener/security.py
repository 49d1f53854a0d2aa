"""Authentication and authorization on the Pulsar listener: the HTTP API's tokens and authorizer.

With authentication on (QUIRE_AUTHENTICATION_ENABLED, the same switch and keys as HTTP and the
Kafka listener), CONNECT must carry `auth_method_name` "token" and the token Quire's HTTP API
takes as `Authorization: Bearer` in `auth_data` (what `pulsar.AuthenticationToken` sends); its
`sub` is the role. A missing or refused token is answered with ERROR AuthenticationError and the
connection closes; a token that expires closes the connection at its next command after that.

Authorization follows the HTTP rules (app.auth.authorizer): PRODUCER needs the produce permission
on the topic's namespace, SUBSCRIBE the consume permission, LOOKUP and PARTITIONED_METADATA
either; refused: ERROR AuthorizationError, whether the topic exists or not.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Any, Protocol

from app.auth.authorizer import Authorizer
from app.auth.policy import Need
from app.auth.tokens import TokenRefused, TokenVerifier

from .errors import PulsarError
from .proto import pulsar_api_pb2 as pb


class Connection(Protocol):
    """What security reads and keeps of a connection (server.Connection)."""

    peer: str
    state: dict[str, Any]


log = logging.getLogger("quire.pulsar")

ROLE = "role"
EXPIRES = "expires_s"


class Access:
    """Who may connect and use a topic. Without security everyone may."""

    def authenticate(self, conn: Connection, connect: pb.CommandConnect) -> None:
        return None

    def expired(self, conn: Connection) -> bool:
        return False

    async def check(self, conn: Connection, topic: str, need: Need) -> None:
        return None


class PulsarSecurity(Access):
    def __init__(
        self, verifier: TokenVerifier, authorizer: Authorizer | None, clock: Callable[[], float] = time.time
    ) -> None:
        self._verifier = verifier
        self._authorizer = authorizer
        self._clock = clock

    def authenticate(self, conn: Connection, connect: pb.CommandConnect) -> None:
        method = connect.auth_method_name
        if method != "token" or not connect.auth_data:
            raise PulsarError(
                f"authentication required: auth method 'token' with a token (got {method or 'none'!r})",
                pb.AuthenticationError,
            )
        try:
            token = connect.auth_data.decode("utf-8").strip()
            role, expires_s = self._verifier.role_and_expiry(token)
        except (UnicodeDecodeError, TokenRefused) as exc:
            raise PulsarError(f"token refused: {exc}", pb.AuthenticationError) from exc
        conn.state[ROLE], conn.state[EXPIRES] = role, expires_s

    def expired(self, conn: Connection) -> bool:
        if self._clock() < conn.state.get(EXPIRES, 0.0):
            return False
        log.info(
            "Pulsar connection %s: the token of role %s expired; closing", conn.peer, conn.state.get(ROLE)
        )
        return True

    async def check(self, conn: Connection, topic: str, need: Need) -> None:
        if self._authorizer is None:
            return
        tenant, namespace, _ = topic.split("/", 2)
        denied = await self._authorizer.check(conn.state[ROLE], need, tenant, namespace)
        if denied is not None:
            raise PulsarError(
                f"role {conn.state[ROLE]} may not {need.value} on {tenant}/{namespace}", pb.AuthorizationError
            )
