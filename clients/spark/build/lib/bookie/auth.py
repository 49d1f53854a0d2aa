"""Who may talk to a bookie: the cluster secret's challenge-response (op AUTH) and TLS.

**The secret.** Brokers, compactors (and their Spark tasks) and recovery workers share one
secret with the bookies (QUIRE_BOOKIE_AUTH_SECRET). It never travels: each side proves it knows
it with an HMAC-SHA256 over two fresh random nonces, one from each side, in two AUTH requests
at the start of a connection (`bookie.protocol` has the frames):

    client -> HELLO  client_nonce                      (32 random bytes)
    bookie <- OK     server_nonce | server_proof       server_proof = HMAC(secret, SERVER | cn | sn)
    client -> PROOF  client_proof                      client_proof = HMAC(secret, CLIENT | sn | cn)
    bookie <- OK                                       (or NOT_AUTHENTICATED, and the bookie closes)

Both proofs are checked with `hmac.compare_digest`. The labels differ, so one side's proof is
never the other's, and fresh nonces on both sides make a recorded proof worthless later. The
bookie proves itself first: a client with the secret talks only to bookies that have it, and
gives nothing to one that does not. Until the PROOF is accepted a bookie serves nothing: any
other request (or a frame past `PRE_AUTH_MAX_FRAME_BYTES`) is answered NOT_AUTHENTICATED and
the connection is closed, and a connection that has not authenticated within the server's
`auth_timeout_s` is closed. The secret authenticates the start of a connection, it does not
protect what follows: on a network where someone could take a connection over, add TLS.

**Either side without the secret fails clearly**, never silently open: a bookie with one
refuses a client without it (NOT_AUTHENTICATED, which an older client reads as an unknown
code); a client with one refuses a bookie that answers AUTH with an error (one without the
secret says so; an older bookie answers "unknown op"). So the secret is set on every process of
a cluster, or on none.

**TLS.** The bookie port speaks TLS with a certificate and key (`ServerSecurity`); with a CA as
well it asks every client for a certificate that CA signed (mutual TLS, which authenticates the
client on its own, with or without the secret). A client (`ClientSecurity`) with a CA connects
with TLS, checks the bookie's certificate against the CA and the address it dials, and presents
its own certificate when it has one.

These configs are plain values (paths and bytes) so that they pickle into Spark tasks; SSL
contexts are built where they are used. The secret is kept out of every repr.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
import ssl
import struct
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from enum import IntEnum

from bookie.errors import ErrorCode, error_from_code

NONCE_BYTES = 32
PROOF_BYTES = hashlib.sha256().digest_size  # 32
PRE_AUTH_MAX_FRAME_BYTES = 4096  # AUTH frames are tiny; a stranger gets no bigger buffer than this
STEP = struct.Struct("<B")
_CLIENT = b"quire-bookie-auth-v1 client"
_SERVER = b"quire-bookie-auth-v1 server"


class AuthStep(IntEnum):
    HELLO = 1  # body: step u8 | client_nonce; reply: server_nonce | server_proof
    PROOF = 2  # body: step u8 | client_proof; reply: nothing


class AuthRefused(Exception):
    """The handshake failed: why, in words for a log line (never the secret)."""


def server_proof(secret: bytes, client_nonce: bytes, server_nonce: bytes) -> bytes:
    return hmac.new(secret, _SERVER + client_nonce + server_nonce, hashlib.sha256).digest()


def client_proof(secret: bytes, server_nonce: bytes, client_nonce: bytes) -> bytes:
    return hmac.new(secret, _CLIENT + server_nonce + client_nonce, hashlib.sha256).digest()


def hello_body(client_nonce: bytes) -> bytes:
    return STEP.pack(AuthStep.HELLO) + client_nonce


def proof_body(proof: bytes) -> bytes:
    return STEP.pack(AuthStep.PROOF) + proof


class ServerHandshake:
    """The bookie's side of one connection's handshake: `answer` each AUTH body in turn; it
    returns the OK reply's body, or raises AuthRefused (then the connection is closed)."""

    __slots__ = ("_client_nonce", "_secret", "_server_nonce", "done")

    def __init__(self, secret: bytes) -> None:
        self._secret = secret
        self._client_nonce = b""
        self._server_nonce = b""
        self.done = False

    def answer(self, body: bytes) -> bytes:
        if len(body) != STEP.size + NONCE_BYTES:
            raise AuthRefused(f"AUTH body of {len(body)} bytes, expected {STEP.size + NONCE_BYTES}")
        step, value = body[0], body[STEP.size :]
        if step == AuthStep.HELLO and not self._client_nonce:
            self._client_nonce = value
            self._server_nonce = secrets.token_bytes(NONCE_BYTES)
            return self._server_nonce + server_proof(self._secret, value, self._server_nonce)
        if step == AuthStep.PROOF and self._client_nonce:
            expected = client_proof(self._secret, self._server_nonce, self._client_nonce)
            if not hmac.compare_digest(value, expected):
                raise AuthRefused("wrong proof: the client does not know this bookie's secret")
            self.done = True
            return b""
        raise AuthRefused(f"AUTH step {step} out of order (HELLO, then PROOF)")


# One request to the bookie: (op body) -> reply body starting with the u16 code.
AuthCall = Callable[[bytes], Awaitable[bytes]]


async def authenticate(call: AuthCall, secret: bytes) -> None:
    """The client's side: HELLO, check the bookie's proof, PROOF. Raises AuthRefused, or the
    BookieError of a connection lost or timed out meanwhile (which a retry may get past)."""
    client_nonce = secrets.token_bytes(NONCE_BYTES)
    reply = await call(hello_body(client_nonce))
    code, rest = _code(reply), reply[2:]
    if code != ErrorCode.OK:
        _raise_if_lost(code, rest)
        raise AuthRefused(f"the bookie refused AUTH: {_said(rest)}")
    if len(rest) != NONCE_BYTES + PROOF_BYTES:
        raise AuthRefused(f"the bookie's AUTH reply has {len(rest)} bytes")
    server_nonce, proof = rest[:NONCE_BYTES], rest[NONCE_BYTES:]
    if not hmac.compare_digest(proof, server_proof(secret, client_nonce, server_nonce)):
        raise AuthRefused("the bookie could not prove it knows the secret (is its secret another one?)")
    reply = await call(proof_body(client_proof(secret, server_nonce, client_nonce)))
    if (code := _code(reply)) != ErrorCode.OK:
        _raise_if_lost(code, reply[2:])
        raise AuthRefused(f"the bookie refused our proof: {_said(reply[2:])}")


def _raise_if_lost(code: int, message: bytes) -> None:
    if code in (ErrorCode.UNAVAILABLE, ErrorCode.TIMEOUT):
        raise error_from_code(code, _said(message))


def _code(reply: bytes) -> int:
    return reply[0] | (reply[1] << 8) if len(reply) >= 2 else -1


def _said(message: bytes) -> str:
    return message[:300].decode(errors="replace") or "no reason given"


# --- configs -------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ClientSecurity:
    """How a bookie client proves itself: the secret (empty: none), and TLS when `ca_file` is
    set (the bookie's certificate must chain to it), with a client certificate for mutual TLS."""

    secret: bytes = field(default=b"", repr=False)
    ca_file: str = ""
    cert_file: str = ""
    key_file: str = ""

    def ssl_context(self) -> ssl.SSLContext | None:
        """None without a CA (plain TCP); raises OSError or ssl.SSLError on unusable files."""
        if not self.ca_file:
            return None
        context = ssl.create_default_context(ssl.Purpose.SERVER_AUTH, cafile=self.ca_file)
        if self.cert_file:
            context.load_cert_chain(self.cert_file, self.key_file or None)
        return context


@dataclass(frozen=True, slots=True)
class ServerSecurity:
    """What a bookie asks of its clients: the secret (empty: none), and TLS with its certificate
    and key, asking for a client certificate the CA signed when `ca_file` is set."""

    secret: bytes = field(default=b"", repr=False)
    cert_file: str = ""
    key_file: str = ""
    ca_file: str = ""

    def ssl_context(self) -> ssl.SSLContext | None:
        """None without a certificate (plain TCP); raises OSError or ssl.SSLError on unusable files."""
        if not self.cert_file:
            return None
        context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        context.load_cert_chain(self.cert_file, self.key_file or None)
        if self.ca_file:
            context.load_verify_locations(self.ca_file)
            context.verify_mode = ssl.CERT_REQUIRED
        return context

    @property
    def mutual_tls(self) -> bool:
        return bool(self.cert_file and self.ca_file)

    @property
    def open(self) -> bool:
        """Whether anyone who reaches the port is served: neither a secret nor mutual TLS."""
        return not self.secret and not self.mutual_tls
