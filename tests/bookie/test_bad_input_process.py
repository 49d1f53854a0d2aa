"""Bad input at the port of a real `quire bookie` process: random garbage, truncated frames,
lengths out of bounds, bad checksums, and well-framed requests whose bodies are garbage.

After every kind the bookie is still running and still serving (a new connection adds an entry
and reads it back), every reply it sent is a well-formed frame, and a framing error is answered
BAD_REQUEST and then the connection is closed. At the end the bookie stops cleanly on SIGTERM and
starts again over the journal all that input left, with every entry it acknowledged.

`tests/bookie/test_protocol.py` covers the same ground for the decoder alone, in process.
"""

from __future__ import annotations

import os
import random
import signal
import socket
import struct
from collections.abc import Iterator
from pathlib import Path

import pytest

from bookie.errors import ErrorCode
from bookie.protocol import (
    DEFAULT_MAX_FRAME_BYTES,
    HEADER_SIZE,
    VERSION,
    FrameDecoder,
    Op,
    encode_add,
    encode_frame,
)
from tests.bookie.conftest import BookieProcess, start_bookie_process

IO_TIMEOUT_S = 10.0
SEED = 20_261_125
CHECK_LEDGER_BASE = 7_000_000  # ledgers the serving checks write; garbage ids are random 64-bit


class Bookie:
    """A bookie process and the entries it acknowledged to the serving checks."""

    def __init__(self, process: BookieProcess) -> None:
        self.process = process
        self.acknowledged: dict[int, bytes] = {}  # ledger -> entry 0's payload

    def assert_serving(self) -> None:
        """Still running; a fresh connection adds entry 0 of a new ledger and reads it back."""
        assert self.process.alive(), f"bookie exited:\n{self.process.log()[-3000:]}"
        ledger = CHECK_LEDGER_BASE + len(self.acknowledged)
        payload = b"check %d " % ledger + os.urandom(16)
        with connect(self.process.port) as conn:
            conn.sendall(b"".join(encode_add(1, ledger, 0, -1, payload)))
            added = read_replies(conn, 1)
            assert [(op, rid, code) for op, rid, code, _ in added] == [(Op.ADD, 1, 0)], added
            conn.sendall(b"".join(encode_frame(Op.READ, 0, 2, struct.pack("<QQ", ledger, 0))))
            read = read_replies(conn, 1)
        assert [(op, rid, code, body) for op, rid, code, body in read] == [(Op.READ, 2, 0, payload)], read
        self.acknowledged[ledger] = payload

    def assert_all_readable(self) -> None:
        with connect(self.process.port) as conn:
            for i, ledger in enumerate(self.acknowledged):
                conn.sendall(b"".join(encode_frame(Op.READ, 0, i, struct.pack("<QQ", ledger, 0))))
            replies = read_replies(conn, len(self.acknowledged))
        got = {rid: (code, body) for _op, rid, code, body in replies}
        for i, (ledger, payload) in enumerate(self.acknowledged.items()):
            assert got[i] == (0, payload), f"ledger {ledger}: {got[i]}"


def connect(port: int, timeout_s: float = IO_TIMEOUT_S) -> socket.socket:
    return socket.create_connection(("127.0.0.1", port), timeout=timeout_s)


Reply = tuple[int, int, int, bytes]  # op, request id, error code, rest of the body


def read_replies(conn: socket.socket, count: int) -> list[Reply]:
    """`count` replies, each checked as a well-formed frame; fails if the bookie closes first."""
    replies = read_until_closed(conn, stop_after=count)
    assert len(replies) == count, f"connection closed after {len(replies)} of {count} replies"
    return replies


def read_until_closed(conn: socket.socket, stop_after: int | None = None) -> list[Reply]:
    """Replies until the bookie closes the connection (or `stop_after` of them); every socket
    read is bounded by IO_TIMEOUT_S, so a bookie that neither answers nor closes fails the test."""
    decoder = FrameDecoder(DEFAULT_MAX_FRAME_BYTES)
    replies: list[Reply] = []
    while stop_after is None or len(replies) < stop_after:
        try:
            data = conn.recv(1 << 16)
        except ConnectionResetError:
            break
        if not data:
            break
        for op, flags, rid, body in decoder.feed(data):
            assert flags & 0x8000, "a reply carries the REPLY flag"
            (code,) = struct.unpack_from("<H", body)
            replies.append((op, rid, code, body[2:]))
        assert decoder.error is None, f"the bookie sent a malformed frame: {decoder.error}"
    return replies


def send_and_close_writing(port: int, data: bytes) -> list[Reply]:
    """Send `data`, end our side, and collect what the bookie answers until it closes."""
    with connect(port) as conn:
        try:
            conn.sendall(data)
            conn.shutdown(socket.SHUT_WR)
        except (BrokenPipeError, ConnectionResetError):
            pass  # the bookie already closed on a framing error: what it said is still readable
        return read_until_closed(conn)


@pytest.fixture(scope="module")
def bookie(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Bookie]:
    process = start_bookie_process(tmp_path_factory.mktemp("bad-input"))
    try:
        b = Bookie(process)
        b.assert_serving()
        yield b
    finally:
        process.stop()


def assert_framing_error(replies: list[Reply]) -> None:
    """The last thing a bookie says on a stream it cannot frame: BAD_REQUEST, then it closes."""
    assert replies, "no reply before the close"
    assert replies[-1][2] == ErrorCode.BAD_REQUEST, replies[-1]


def test_random_garbage_bytes(bookie: Bookie) -> None:
    rng = random.Random(SEED)
    for size in [*range(1, 40), *(rng.randrange(40, 1 << 16) for _ in range(160))]:
        data = rng.randbytes(size)
        replies = send_and_close_writing(bookie.process.port, data)
        # Garbage rarely frames: whatever was answered is BAD_REQUEST or a real reply, never INTERNAL.
        assert all(code != ErrorCode.INTERNAL for _op, _rid, code, _body in replies), replies
        length = struct.unpack_from("<I", data)[0] if size >= 8 else None
        if length is not None and not 16 <= length <= DEFAULT_MAX_FRAME_BYTES:
            assert_framing_error(replies)
    bookie.assert_serving()


def valid_frames() -> list[bytes]:
    return [
        b"".join(encode_add(11, 1, 0, -1, b"payload " * 40)),
        b"".join(encode_frame(Op.READ, 0, 12, struct.pack("<QQ", 1, 0))),
        b"".join(encode_frame(Op.STATS, 0, 13)),
    ]


@pytest.mark.parametrize("frame_index", range(3), ids=["ADD", "READ", "STATS"])
def test_truncated_frames(bookie: Bookie, frame_index: int) -> None:
    frame = valid_frames()[frame_index]
    cuts = sorted({1, 3, 4, 7, 8, 9, 12, 19, HEADER_SIZE, HEADER_SIZE + 1, len(frame) // 2, len(frame) - 1})
    for cut in (c for c in cuts if c < len(frame)):
        # Cut, then our side ends: the bookie drops the partial frame and closes, saying nothing.
        assert send_and_close_writing(bookie.process.port, frame[:cut]) == []
        # A whole frame after a partial one is read as the rest of the partial one: garbage.
        replies = send_and_close_writing(bookie.process.port, frame[:cut] + frame)
        assert all(code != ErrorCode.INTERNAL for _op, _rid, code, _body in replies), (cut, replies)
    bookie.assert_serving()


@pytest.mark.parametrize(
    "length",
    [0, 1, 15, DEFAULT_MAX_FRAME_BYTES + 1, 0x7FFF_FFFF, 0xFFFF_FFFF],
    ids=["0", "1", "15", "limit+1", "2^31-1", "2^32-1"],
)
def test_length_prefix_out_of_bounds(bookie: Bookie, length: int) -> None:
    data = struct.pack("<II", length, 0) + bytes(64)
    replies = send_and_close_writing(bookie.process.port, data)
    assert_framing_error(replies)
    assert b"frame length" in replies[-1][3]
    bookie.assert_serving()


def test_a_frame_that_promises_the_limit_and_stops(bookie: Bookie) -> None:
    """The length is in bounds (the whole 16 MiB frame limit) but the sender stops after 1 MiB
    and goes away: the bookie drops what it buffered."""
    head = struct.pack("<II", DEFAULT_MAX_FRAME_BYTES, 0) + struct.pack("<BBHQ", VERSION, Op.ADD, 0, 1)
    assert send_and_close_writing(bookie.process.port, head + bytes(1 << 20)) == []
    bookie.assert_serving()


def test_bad_checksum_after_good_frames(bookie: Bookie) -> None:
    good = b"".join(encode_frame(Op.STATS, 0, 1))
    bad = bytearray(b"".join(encode_frame(Op.READ, 0, 2, struct.pack("<QQ", 1, 0))))
    bad[-1] ^= 0x5A
    replies = send_and_close_writing(bookie.process.port, good + bytes(bad) + good)
    assert [(op, rid, code) for op, rid, code, _ in replies] == [
        (Op.STATS, 1, 0),
        (0, 2, ErrorCode.BAD_REQUEST),
    ]
    assert b"CRC" in replies[-1][3]
    bookie.assert_serving()


def garbage_body(rng: random.Random, op: int) -> bytes:
    body = rng.randbytes(rng.choice([0, 1, 7, 8, 9, 15, 16, 17, 24, 28, 32, rng.randrange(0, 300)]))
    if op == Op.ADD and len(body) >= 24:
        # An entry id the index can address (see test_add_of_an_entry_id_past_the_index below).
        body = body[:8] + struct.pack("<Q", rng.randrange(1 << 20)) + body[16:]
    return body


def test_well_framed_requests_with_garbage_bodies(bookie: Bookie) -> None:
    """Every op (and ops that do not exist, and other versions) with random bodies and flags,
    pipelined on one connection: one reply per request, none INTERNAL, the connection stays up."""
    rng = random.Random(SEED + 1)
    ops = [*range(0, 10), 127, 255]
    with connect(bookie.process.port) as conn:
        for round_ in range(40):
            frames = []
            for i in range(len(ops) * 3):
                op = ops[i % len(ops)]
                body = garbage_body(rng, op)
                version = VERSION if rng.random() < 0.9 else rng.choice([0, 2, 255])
                rest = struct.pack("<BBHQ", version, op, rng.randrange(1 << 16), round_ * 1000 + i) + body
                frames.append(encode_frame_raw(rest))
            conn.sendall(b"".join(frames))
            replies = read_replies(conn, len(frames))
            assert sorted(rid for _op, rid, _code, _body in replies) == [
                round_ * 1000 + i for i in range(len(frames))
            ]
            internal = [r for r in replies if r[2] == ErrorCode.INTERNAL]
            assert not internal, internal
        conn.sendall(b"".join(encode_frame(Op.STATS, 0, 1)))
        assert read_replies(conn, 1)[0][:3] == (Op.STATS, 1, 0)
    bookie.assert_serving()


def encode_frame_raw(rest: bytes) -> bytes:
    """A frame around any header rest (version, op, flags, request id, body), CRC and all."""
    import google_crc32c

    return struct.pack("<II", len(rest) + 4, google_crc32c.value(rest)) + rest


def test_many_connections_left_half_sent(bookie: Bookie) -> None:
    """Fifty connections each stop inside a frame and stay open: the bookie keeps serving others,
    and lets them go when they close."""
    frame = valid_frames()[0]
    conns = [connect(bookie.process.port) for _ in range(50)]
    try:
        for i, conn in enumerate(conns):
            conn.sendall(frame[: 1 + i % (len(frame) - 1)])
        bookie.assert_serving()
    finally:
        for conn in conns:
            conn.close()
    bookie.assert_serving()


def test_zz_after_all_that_it_stops_cleanly_and_restarts_with_every_acknowledged_entry(
    bookie: Bookie,
) -> None:
    """Runs last in this module (name order within the file): the journal now holds whatever the
    garbage ADDs and FENCEs above wrote; replaying it must work."""
    process = bookie.process.process
    assert process is not None and process.proc is not None
    os.killpg(process.pid, signal.SIGTERM)
    assert process.proc.wait(timeout=30) == 0, bookie.process.log()[-3000:]
    bookie.process.start()
    bookie.assert_all_readable()
    bookie.assert_serving()


# --- an entry id the index cannot address ------------------------------------------------------


@pytest.mark.parametrize("entry_id", [2**40, 2**62], ids=["2^40", "2^62"])
def test_add_of_an_entry_id_past_the_index_is_refused(tmp_path: Path, entry_id: int) -> None:
    process = start_bookie_process(tmp_path)
    try:
        b = Bookie(process)
        with connect(process.port, timeout_s=3) as conn:
            conn.sendall(b"".join(encode_add(1, 5, entry_id, -1, b"x")))
            replies = read_replies(conn, 1)
        assert replies[0][2] == ErrorCode.BAD_REQUEST, replies
        b.assert_serving()
        process.stop()
        process.start()
        b.assert_all_readable()
    finally:
        process.stop()
