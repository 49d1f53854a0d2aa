"""Bad input on the Pulsar port closes (or is answered on) that connection only: garbage, an
oversized frame, a frame cut short, a SEND whose checksum does not match (SEND_ERROR
ChecksumError, nothing stored), an unknown command (ERROR); meanwhile a `pulsar-client`
connection is served. Raw sockets speak the protocol with the listener's own codec."""

from __future__ import annotations

import socket
import struct
import uuid
from collections.abc import Iterator
from pathlib import Path

import httpx
import pulsar
import pytest

from app.pulsar_listener.frames import command_frame, message_frame, parse_frame
from app.pulsar_listener.proto import pulsar_api_pb2 as pb
from tests.pulsar_listener.support import CLIENT_TIMEOUT_S, Standalone, serving

pytestmark = pytest.mark.timeout(300)
T = pb.BaseCommand


@pytest.fixture(scope="module")
def standalone(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Standalone]:
    yield from serving(Path(tmp_path_factory.mktemp("pulsar-bad")))


def read_command(sock: socket.socket) -> pb.BaseCommand:
    head = recv_exactly(sock, 4)
    (size,) = struct.unpack(">I", head)
    return parse_frame(recv_exactly(sock, size)).command


def recv_exactly(sock: socket.socket, n: int) -> bytes:
    data = b""
    while len(data) < n:
        chunk = sock.recv(n - len(data))
        assert chunk, "connection closed"
        data += chunk
    return data


def closed(sock: socket.socket) -> bool:
    """The listener closed the connection (within 10 s)."""
    try:
        while sock.recv(65536):
            pass
    except ConnectionResetError:
        return True
    except TimeoutError:
        return False  # still open after 10 s
    return True


def connected(standalone: Standalone) -> socket.socket:
    sock = socket.create_connection(("127.0.0.1", standalone.pulsar_port), timeout=10)
    connect = pb.CommandConnect(client_version="raw-test", protocol_version=20)
    sock.sendall(command_frame(T(type=T.CONNECT, connect=connect)))
    assert read_command(sock).type == T.CONNECTED
    return sock


def round_trip(standalone: Standalone) -> None:
    """A real client produces and consumes: the listener still serves others."""
    name = f"persistent://public/default/ok-{uuid.uuid4().hex[:8]}"
    client = pulsar.Client(standalone.service_url, operation_timeout_seconds=CLIENT_TIMEOUT_S)
    try:
        consumer = client.subscribe(name, "s", initial_position=pulsar.InitialPosition.Earliest)
        client.create_producer(name).send(b"fine")
        assert consumer.receive(10_000).data() == b"fine"
    finally:
        client.close()


@pytest.mark.parametrize(
    "bad",
    [
        pytest.param(b"\xde\xad\xbe\xef" * 64, id="garbage"),
        pytest.param(struct.pack(">II", 200 * 1024 * 1024, 4) + b"x" * 64, id="oversized"),
        pytest.param(struct.pack(">II", 40, 10) + b"\x08\x02", id="cut-short"),
        pytest.param(struct.pack(">II", 8, 4) + b"\xff\xff\xff\xff", id="undecodable-command"),
    ],
)
def test_bad_frame_closes_only_its_connection(standalone: Standalone, bad: bytes) -> None:
    sock = connected(standalone)
    with sock:
        sock.sendall(bad)
        if bad.startswith(struct.pack(">II", 40, 10)):
            sock.shutdown(socket.SHUT_WR)  # the rest never comes
        assert closed(sock)
    round_trip(standalone)


def test_garbage_before_connect_closes(standalone: Standalone) -> None:
    with socket.create_connection(("127.0.0.1", standalone.pulsar_port), timeout=10) as sock:
        sock.sendall(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
        assert closed(sock)
    round_trip(standalone)


def test_wrong_checksum_is_refused_and_nothing_stored(standalone: Standalone) -> None:
    name = f"public/default/crc-{uuid.uuid4().hex[:8]}"
    with connected(standalone) as sock:
        producer = pb.CommandProducer(topic=f"persistent://{name}", producer_id=1, request_id=1)
        sock.sendall(command_frame(T(type=T.PRODUCER, producer=producer)))
        assert read_command(sock).type == T.PRODUCER_SUCCESS
        metadata = pb.MessageMetadata(producer_name="raw", sequence_id=0, publish_time=1).SerializeToString()
        frame = bytearray(
            message_frame(T(type=T.SEND, send=pb.CommandSend(producer_id=1, sequence_id=0)), metadata, b"v")
        )
        frame[-1] ^= 0xFF  # the payload no longer matches its checksum
        sock.sendall(bytes(frame))
        answer = read_command(sock)
        assert answer.type == T.SEND_ERROR and answer.send_error.error == pb.ChecksumError
        good = message_frame(
            T(type=T.SEND, send=pb.CommandSend(producer_id=1, sequence_id=1)), metadata, b"ok"
        )
        sock.sendall(good)  # the connection goes on
        answer = read_command(sock)
        assert answer.type == T.SEND_RECEIPT and answer.send_receipt.sequence_id == 1
        unknown = T(type=T.CONSUMER_STATS)
        sock.sendall(command_frame(unknown))
        answer = read_command(sock)
        assert answer.type == T.ERROR and "not supported" in answer.error.message
    r = httpx.get(f"{standalone.http}/v1/topics/{name}/messages", params={"start": "earliest"}, timeout=10)
    assert [m["value"] for m in r.json()["messages"]] == ["ok"]
