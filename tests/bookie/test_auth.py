"""The bookie port's door in process: the AUTH handshake (bookie.auth) on its own, the server's
refusals on the wire with raw sockets (nothing is served or stored before a good PROOF, and the
connection is closed), and the real clients with the right secret, another one or none."""

from __future__ import annotations

import asyncio
import logging
import secrets
from collections.abc import Iterator

import pytest

from bookie.auth import (
    NONCE_BYTES,
    AuthCall,
    AuthRefused,
    ClientSecurity,
    ServerHandshake,
    ServerSecurity,
    authenticate,
    client_proof,
    hello_body,
    proof_body,
    server_proof,
)
from bookie.client import BookieClientConfig, BookieLedgerClient
from bookie.connection import local_error
from bookie.errors import BookieError, ErrorCode
from bookie.protocol import CODE, LEDGER_ENTRY, Op, encode_add, encode_frame
from bookie.replica_io import ReplicaIO, ReplicaIOConfig
from bookie.server import ServerConfig
from bookie.types import LedgerSpec
from compactor.job import BookieClientFactory
from tests.bookie.conftest import ThreadBookie
from tests.bookie.raw import Raw

SECRET = b"the cluster secret, 32 bytes...."
OTHER = b"another secret, also 32 bytes..."
OK = CODE.pack(ErrorCode.OK)


def secure_bookie(secret: bytes = SECRET, auth_timeout_s: float = 10.0) -> ThreadBookie:
    config = ServerConfig(port=0, security=ServerSecurity(secret=secret), auth_timeout_s=auth_timeout_s)
    return ThreadBookie(config).start()


@pytest.fixture
def bookie() -> Iterator[ThreadBookie]:
    b = secure_bookie()
    try:
        yield b
    finally:
        b.stop()


def client(secret: bytes = b"") -> BookieLedgerClient:
    return BookieLedgerClient(BookieClientConfig(connect_timeout_s=5, security=ClientSecurity(secret=secret)))


# --- the handshake alone ---------------------------------------------------------------------------


def talking_to(server: ServerHandshake) -> AuthCall:
    """A client's `call` answered by a server-side handshake, as the bookie would."""

    async def call(body: bytes) -> bytes:
        try:
            return OK + server.answer(body)
        except AuthRefused as exc:
            return CODE.pack(ErrorCode.NOT_AUTHENTICATED) + str(exc).encode()

    return call


def test_the_same_secret_on_both_sides_authenticates() -> None:
    server = ServerHandshake(SECRET)
    asyncio.run(authenticate(talking_to(server), SECRET))
    assert server.done


def test_a_client_with_another_secret_stops_at_the_bookies_proof() -> None:
    server = ServerHandshake(SECRET)
    with pytest.raises(AuthRefused, match="could not prove it knows the secret"):
        asyncio.run(authenticate(talking_to(server), OTHER))
    assert not server.done


def test_a_proof_made_with_another_secret_is_refused() -> None:
    server = ServerHandshake(SECRET)
    client_nonce = secrets.token_bytes(NONCE_BYTES)
    server_nonce = server.answer(hello_body(client_nonce))[:NONCE_BYTES]
    with pytest.raises(AuthRefused, match="wrong proof"):
        server.answer(proof_body(client_proof(OTHER, server_nonce, client_nonce)))
    assert not server.done


@pytest.mark.parametrize(
    "bodies",
    [
        [proof_body(bytes(32))],  # a proof before any hello
        [hello_body(bytes(32)), hello_body(bytes(32))],  # a second hello
        [b"\x01" + bytes(5)],  # short
        [bytes([7]) + bytes(32)],  # no such step
    ],
    ids=["proof-first", "hello-twice", "short", "unknown-step"],
)
def test_steps_out_of_order_or_malformed_are_refused(bodies: list[bytes]) -> None:
    server = ServerHandshake(SECRET)
    with pytest.raises(AuthRefused):
        for body in bodies:
            server.answer(body)
    assert not server.done


def test_one_sides_proof_is_never_the_others_and_nonces_are_fresh() -> None:
    a, b = bytes(32), bytes(range(32))
    assert server_proof(SECRET, a, b) != client_proof(SECRET, b, a)
    assert server_proof(SECRET, a, b) != client_proof(SECRET, a, b)
    replies = {ServerHandshake(SECRET).answer(hello_body(a)) for _ in range(3)}
    assert len(replies) == 3


def test_a_connection_lost_while_authenticating_is_retriable_not_a_refusal() -> None:
    async def lost(body: bytes) -> bytes:
        return local_error(ErrorCode.UNAVAILABLE, "connection to bookie lost")

    with pytest.raises(BookieError) as info:
        asyncio.run(authenticate(lost, SECRET))
    assert info.value.code == ErrorCode.UNAVAILABLE and info.value.retriable


def test_no_config_shows_the_secret() -> None:
    security = ClientSecurity(secret=SECRET, ca_file="ca.pem")
    shown = [
        repr(security),
        repr(ServerSecurity(secret=SECRET)),
        repr(ServerConfig(security=ServerSecurity(secret=SECRET))),
        repr(BookieClientConfig(security=security)),
        repr(ReplicaIOConfig(security=security)),
        repr(BookieClientFactory(BookieClientConfig(security=security))),
    ]
    for text in shown:
        assert "cluster secret" not in text, text
    assert "ca.pem" in shown[0]  # the rest of the config is shown


# --- on the wire -------------------------------------------------------------------------------------


def raw_authenticate(raw: Raw, secret: bytes = SECRET) -> None:
    client_nonce = secrets.token_bytes(NONCE_BYTES)
    code, reply = raw.call(Op.AUTH, hello_body(client_nonce), request_id=1)
    assert code == ErrorCode.OK
    server_nonce, proof = reply[:NONCE_BYTES], reply[NONCE_BYTES:]
    assert proof == server_proof(secret, client_nonce, server_nonce)
    code, _ = raw.call(Op.AUTH, proof_body(client_proof(secret, server_nonce, client_nonce)), request_id=2)
    assert code == ErrorCode.OK


def refused(raw: Raw) -> bytes:
    """The one reply before the bookie closes: NOT_AUTHENTICATED; its message."""
    (frame,) = raw.recv()
    assert frame[3][:2] == CODE.pack(ErrorCode.NOT_AUTHENTICATED), frame
    assert raw.closed_by_peer()
    return frame[3][2:]


def test_a_request_before_auth_is_refused_and_the_connection_closed(bookie: ThreadBookie) -> None:
    raw = Raw(bookie.port)
    raw.send(encode_frame(Op.STATS, 0, 5))
    assert b"send AUTH first" in refused(raw)
    assert bookie.server.auth_refusals == 1


def test_an_add_before_auth_stores_nothing(bookie: ThreadBookie) -> None:
    raw = Raw(bookie.port)
    raw.send(encode_add(1, 5, 0, -1, b"from a stranger"))
    refused(raw)
    assert bookie.storage.ledgers == {}
    raw = Raw(bookie.port)
    raw_authenticate(raw)
    code, _ = raw.call(Op.READ, LEDGER_ENTRY.pack(5, 0), request_id=3)
    assert code == ErrorCode.NO_SUCH_LEDGER


def test_a_wrong_proof_is_refused_and_the_connection_closed(bookie: ThreadBookie) -> None:
    raw = Raw(bookie.port)
    client_nonce = secrets.token_bytes(NONCE_BYTES)
    code, reply = raw.call(Op.AUTH, hello_body(client_nonce))
    assert code == ErrorCode.OK
    raw.send(encode_frame(Op.AUTH, 0, 2, proof_body(client_proof(OTHER, reply[:NONCE_BYTES], client_nonce))))
    assert b"wrong proof" in refused(raw)


def test_requests_pipelined_behind_the_proof_are_served(bookie: ThreadBookie) -> None:
    raw = Raw(bookie.port)
    client_nonce = secrets.token_bytes(NONCE_BYTES)
    _, reply = raw.call(Op.AUTH, hello_body(client_nonce), request_id=1)
    proof = client_proof(SECRET, reply[:NONCE_BYTES], client_nonce)
    raw.send(encode_frame(Op.AUTH, 0, 2, proof_body(proof)) + encode_frame(Op.STATS, 0, 3))
    assert [(f[2], f[3][:2]) for f in raw.recv(2)] == [(2, OK), (3, OK)]
    code, body = raw.call(Op.AUTH, hello_body(client_nonce), request_id=4)
    assert code == ErrorCode.BAD_REQUEST and b"already authenticated" in body
    assert raw.call(Op.STATS, request_id=5)[0] == ErrorCode.OK  # still served
    raw.close()


def test_a_big_frame_before_auth_is_refused_without_reading_it(bookie: ThreadBookie) -> None:
    raw = Raw(bookie.port)
    raw.send(encode_add(1, 6, 0, -1, b"x" * 100_000))
    assert b"send AUTH first" in refused(raw)
    assert bookie.storage.ledgers == {}


def test_a_connection_that_does_not_authenticate_in_time_is_closed() -> None:
    bookie = secure_bookie(auth_timeout_s=0.3)
    try:
        raw = Raw(bookie.port)
        assert b"not authenticated within 0.3 s" in refused(raw)
    finally:
        bookie.stop()


def test_auth_to_a_bookie_without_a_secret_says_it_is_off(memory_bookie: ThreadBookie) -> None:
    raw = Raw(memory_bookie.port)
    code, body = raw.call(Op.AUTH, hello_body(bytes(32)))
    assert code == ErrorCode.BAD_REQUEST and b"authentication is off" in body
    assert raw.call(Op.STATS)[0] == ErrorCode.OK
    raw.close()


# --- the real clients ------------------------------------------------------------------------------


async def test_a_client_with_the_secret_writes_and_reads(bookie: ThreadBookie) -> None:
    c = client(SECRET)
    try:
        spec = LedgerSpec(1, (bookie.address,))
        writer = await c.create_ledger(spec)
        await asyncio.gather(*(writer.add_entry(b"e%d" % i) for i in range(10)))
        assert await c.read_entries(spec, 0, 8) == [b"e%d" % i for i in range(9)]
        assert (await c.bookie_stats(bookie.address))["server"]["auth_refusals"] == 0
    finally:
        await c.close()


async def test_a_client_without_the_secret_gets_nothing(bookie: ThreadBookie) -> None:
    c = client()
    try:
        with pytest.raises(BookieError) as info:
            await c.bookie_stats(bookie.address)
        assert info.value.code == ErrorCode.NOT_AUTHENTICATED
        writer = await c.create_ledger(LedgerSpec(2, (bookie.address,)))
        with pytest.raises(BookieError):
            await writer.add_entry(b"refused")
    finally:
        await c.close()
    assert 2 not in bookie.storage.ledgers


async def test_a_client_with_another_secret_is_refused(bookie: ThreadBookie) -> None:
    c = client(OTHER)
    try:
        with pytest.raises(BookieError) as info:
            await c.bookie_stats(bookie.address)
        assert info.value.code == ErrorCode.NOT_AUTHENTICATED and not info.value.retriable
        assert "could not prove it knows the secret" in info.value.message
        probe = BookieLedgerClient(BookieClientConfig(bookies=(bookie.address,), security=c.config.security))
        assert await probe.healthy() is False
        await probe.close()
    finally:
        await c.close()


async def test_a_client_with_a_secret_refuses_a_bookie_without_one(memory_bookie: ThreadBookie) -> None:
    c = client(SECRET)
    try:
        with pytest.raises(BookieError) as info:
            await c.bookie_stats(memory_bookie.address)
        assert info.value.code == ErrorCode.NOT_AUTHENTICATED
        assert "authentication is off" in info.value.message
    finally:
        await c.close()


async def test_the_recovery_copier_authenticates(bookie: ThreadBookie) -> None:
    io = ReplicaIO(ReplicaIOConfig(security=ClientSecurity(secret=SECRET)))
    try:
        await io.recovery_add(bookie.address, 9, 0, -1, b"copied")
        assert await io.read_entry(bookie.address, 9, 0) == b"copied"
    finally:
        await io.close()
    stranger = ReplicaIO()
    try:
        with pytest.raises(BookieError):
            await stranger.read_entry(bookie.address, 9, 0)
    finally:
        await stranger.close()


def test_refusals_are_logged_without_the_secret(
    bookie: ThreadBookie, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.INFO, logger="quire.bookie.server"):
        raw = Raw(bookie.port)
        client_nonce = secrets.token_bytes(NONCE_BYTES)
        _, reply = raw.call(Op.AUTH, hello_body(client_nonce))
        raw.send(
            encode_frame(Op.AUTH, 0, 2, proof_body(client_proof(OTHER, reply[:NONCE_BYTES], client_nonce)))
        )
        refused(raw)
    assert "refused connection" in caplog.text
    assert SECRET.decode() not in caplog.text and OTHER.decode() not in caplog.text
