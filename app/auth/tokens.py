"""Token authentication: a JWT's `sub` claim is the caller's role (Pulsar's token authentication).

Tokens are verified with PyJWT against one key and only the algorithms that key is for
(app.auth.keys): `alg: none`, another algorithm, another key, a tampered payload, an expired
token (`exp`) or one not valid yet (`nbf`) are refused. A verified token is remembered in a
bounded LRU keyed by the SHA-256 of the token (never the token itself) with its expiry, so a
client that sends the same token with every request costs one JWT verification, not one per
request; an entry is dropped the moment its token expires.

Nothing here logs, and no message contains the token: `TokenRefused` says why in words.
"""

from __future__ import annotations

import hashlib
import time
from collections import OrderedDict
from collections.abc import Callable
from typing import Any

import jwt

from app.auth.keys import Algorithm, PrivateKey, VerificationKey

MAX_TOKEN_BYTES = 8192  # a JWT with a role in it is a few hundred bytes; past this, not decoded
DEFAULT_CACHE_SIZE = 10_000
NEVER = float("inf")


class TokenRefused(Exception):
    """The token is missing, malformed, expired or does not verify: the reason, for a 401."""


def _reason(exc: jwt.PyJWTError, algorithms: tuple[str, ...]) -> str:
    if isinstance(exc, jwt.ExpiredSignatureError):
        return "the token has expired"
    if isinstance(exc, jwt.ImmatureSignatureError):
        return "the token is not valid yet (its nbf or iat is in the future)"
    if isinstance(exc, jwt.InvalidAlgorithmError):
        return f"the token's algorithm is not accepted (accepted: {', '.join(algorithms)})"
    if isinstance(exc, jwt.InvalidSignatureError):
        return "the token's signature does not verify"
    if isinstance(exc, jwt.MissingRequiredClaimError):
        return f"the token has no {exc.claim} claim"
    if isinstance(exc, jwt.exceptions.InvalidSubjectError):
        return "the token's sub claim (the role) is not a string"
    return "the token is malformed"


class TokenVerifier:
    """`role(token)`: the role a valid token names, else TokenRefused (cached, see module)."""

    def __init__(
        self,
        key: VerificationKey,
        *,
        cache_size: int = DEFAULT_CACHE_SIZE,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._key = key
        self._cache_size = cache_size
        self._clock = clock
        self._cache: OrderedDict[bytes, tuple[str, float]] = OrderedDict()
        self.verifications = 0  # JWT verifications done (tests check the cache with it)

    def role(self, token: str) -> str:
        return self.role_and_expiry(token)[0]

    def role_and_expiry(self, token: str) -> tuple[str, float]:
        """The role and when the token expires (epoch seconds; inf without `exp`)."""
        digest = hashlib.sha256(token.encode("utf-8", "surrogateescape")).digest()
        cached = self._cache.get(digest)
        if cached is not None:
            role, expires_s = cached
            if self._clock() < expires_s:
                self._cache.move_to_end(digest)
                return role, expires_s
            del self._cache[digest]
            raise TokenRefused("the token has expired")
        role, expires_s = self._verify(token)
        self._cache[digest] = (role, expires_s)
        if len(self._cache) > self._cache_size:
            self._cache.popitem(last=False)
        return role, expires_s

    def _verify(self, token: str) -> tuple[str, float]:
        if not token or len(token) > MAX_TOKEN_BYTES:
            raise TokenRefused("the token is malformed")
        self.verifications += 1
        algorithms = self._key.algorithms
        try:
            claims: dict[str, Any] = jwt.decode(
                token,
                self._key.key,  # type: ignore[arg-type]
                algorithms=list(algorithms),
                options={"require": ["sub"], "verify_aud": False},
            )
        except jwt.PyJWTError as exc:
            raise TokenRefused(_reason(exc, algorithms)) from None
        role = claims["sub"]
        if not isinstance(role, str) or not role:
            raise TokenRefused("the token's sub claim (the role) is empty")
        exp = claims.get("exp")
        expires_s = float(exp) if isinstance(exp, (int, float)) else NEVER
        # PyJWT accepts a token in its last second; the cache must not keep it past that.
        if self._clock() >= expires_s:
            raise TokenRefused("the token has expired")
        return role, expires_s


def bearer_token(header: bytes | None) -> str | None:
    """The token of an `Authorization: Bearer <token>` header value; None when there is none."""
    if not header:
        return None
    scheme, _, token = header.decode("latin-1").strip().partition(" ")
    if scheme.lower() != "bearer":
        return None
    return token.strip() or None


def create_token(
    subject: str,
    key: bytes | PrivateKey,
    algorithm: Algorithm,
    expires_in_s: int | None = None,
    *,
    clock: Callable[[], float] = time.time,
) -> str:
    """A token for `subject` signed with `key`; with `exp` when it expires (as `pulsar tokens create`)."""
    claims: dict[str, Any] = {"sub": subject}
    if expires_in_s is not None:
        claims["exp"] = int(clock()) + expires_in_s
    return jwt.encode(claims, key, algorithm=algorithm)  # type: ignore[arg-type]
