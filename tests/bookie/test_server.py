"""The bookie server on the wire, with raw sockets: every op, and bad input of every kind.

Each test runs against the in-process server on the in-memory storage (fast) and against a real
`quire bookie` process on the real engine. After every kind of bad input a fresh, well-behaved
connection must still be served.
"""

from __future__ import annotations

import contextlib
import json
import struct
import time
from collections.abc import Iterator
from pathlib import Path

import google_crc32c
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from bookie.errors import ErrorCode
from bookie.protocol import (
    FLAG_RECOVERY,
    LEDGER,
    LEDGER_ENTRY,
    RANGE,
    RANGE_STRIDED,
    Op,
    decode_range_body,
    encode_add,
    encode_frame,
)
from tests.bookie.conftest import ThreadBookie, start_bookie_process
from tests.bookie.raw import WAIT_S, Raw
from tests.examples import examples


@pytest.fixture(params=["memory", pytest.param("process", marks=pytest.mark.process)])
def port(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[int]:
    if request.param == "memory":
        bookie = request.getfixturevalue("memory_bookie")
        yield bookie.port
        return
    proc = start_bookie_process(tmp_path)
    try:
        yield proc.port
    finally:
        proc.stop()


def still_serves(port: int) -> None:
    raw = Raw(port)
    try:
        code, body = raw.call(Op.STATS, request_id=77)
        assert code == ErrorCode.OK
        assert isinstance(json.loads(body), dict)
    finally:
        raw.close()


def test_every_op(port: int) -> None:
    raw = Raw(port)
    raw.send(
        encode_add(1, 5, 0, -1, b"zero") + encode_add(2, 5, 1, 0, b"one") + encode_add(3, 5, 2, 1, b"two")
    )
    replies = raw.recv(3)
    assert sorted(r[2] for r in replies) == [1, 2, 3]
    assert all(r[3] == b"\x00\x00" for r in replies)
    assert raw.call(Op.READ, LEDGER_ENTRY.pack(5, 1)) == (ErrorCode.OK, b"one")
    code, body = raw.call(Op.READ_RANGE, RANGE.pack(5, 0, 10, 1 << 20))
    assert code == ErrorCode.OK and decode_range_body(b"\x00\x00" + body) == [b"zero", b"one", b"two"]
    code, body = raw.call(Op.READ_RANGE, RANGE.pack(5, 0, 2, 1))  # size bound: still one entry
    assert decode_range_body(b"\x00\x00" + body) == [b"zero"]
    assert raw.call(Op.READ_LAC, LEDGER.pack(5)) == (ErrorCode.OK, struct.pack("<q", 1))
    assert raw.call(Op.LAST_ENTRY, LEDGER.pack(5)) == (ErrorCode.OK, struct.pack("<qq", 2, 1))
    assert raw.call(Op.FENCE, LEDGER.pack(5)) == (ErrorCode.OK, struct.pack("<q", 1))
    raw.send(encode_add(9, 5, 3, 2, b"three"))
    ((_, _, rid, body),) = raw.recv()
    assert rid == 9 and struct.unpack_from("<H", body)[0] == ErrorCode.FENCED
    raw.send(encode_add(10, 5, 3, 2, b"three", FLAG_RECOVERY))
    assert raw.recv()[0][3] == b"\x00\x00"
    assert raw.call(Op.DELETE_LEDGER, LEDGER.pack(5))[0] == ErrorCode.OK
    assert raw.call(Op.READ, LEDGER_ENTRY.pack(5, 0))[0] == ErrorCode.NO_SUCH_LEDGER
    assert raw.call(Op.READ_LAC, LEDGER.pack(404))[0] == ErrorCode.NO_SUCH_LEDGER
    raw.send(encode_add(11, 6, 0, -1, b"x"))
    raw.recv()
    assert raw.call(Op.READ, LEDGER_ENTRY.pack(6, 1))[0] == ErrorCode.NO_SUCH_ENTRY
    assert raw.call(Op.READ_RANGE, RANGE.pack(6, 1, 5, 100))[0] == ErrorCode.NO_SUCH_ENTRY
    raw.close()


def test_strided_range_reads_every_nth_entry(port: int) -> None:
    """A striped ledger's bookie holds every E-th entry of a write set: a stride reads them in
    one request, stops at the first one missing, and refuses a stride of 0."""
    raw = Raw(port)
    held = [e for e in range(12) if e % 3 != 1]  # as on a bookie of E=3 Qw=2 missing one run
    raw.send([part for e in held if e != 8 for part in encode_add(e + 1, 7, e, -1, b"e%d" % e)])
    raw.recv(len(held) - 1)
    code, body = raw.call(Op.READ_RANGE, RANGE_STRIDED.pack(7, 0, 11, 1 << 20, 3))
    assert code == ErrorCode.OK and decode_range_body(b"\x00\x00" + body) == [b"e0", b"e3", b"e6", b"e9"]
    code, body = raw.call(Op.READ_RANGE, RANGE_STRIDED.pack(7, 2, 11, 1 << 20, 3))
    assert code == ErrorCode.OK and decode_range_body(b"\x00\x00" + body) == [b"e2", b"e5"]  # 8 lacks
    assert raw.call(Op.READ_RANGE, RANGE_STRIDED.pack(7, 1, 11, 1 << 20, 3))[0] == ErrorCode.NO_SUCH_ENTRY
    assert raw.call(Op.READ_RANGE, RANGE_STRIDED.pack(7, 0, 11, 1 << 20, 0))[0] == ErrorCode.BAD_REQUEST
    assert raw.call(Op.READ, LEDGER_ENTRY.pack(7, 0)) == (ErrorCode.OK, b"e0")  # still usable
    raw.close()


def test_garbage_bytes(port: int) -> None:
    raw = Raw(port)
    raw.send(b"GET / HTTP/1.1\r\nHost: bookie\r\n\r\n" + bytes(range(256)) * 4)
    assert raw.closed_by_peer()
    still_serves(port)


def test_huge_length_is_refused_without_reading_it(port: int) -> None:
    raw = Raw(port)
    raw.send(struct.pack("<II", 0xFFFFFFF0, 0) + b"x" * 100)
    (frame,) = raw.recv()
    assert struct.unpack_from("<H", frame[3])[0] == ErrorCode.BAD_REQUEST
    assert b"length" in frame[3]
    assert raw.closed_by_peer()
    still_serves(port)


def test_bad_crc(port: int) -> None:
    raw = Raw(port)
    wire = bytearray(b"".join(encode_add(4, 1, 0, -1, b"payload")))
    wire[-2] ^= 0x55
    raw.send(bytes(wire))
    (frame,) = raw.recv()
    assert struct.unpack_from("<H", frame[3])[0] == ErrorCode.BAD_REQUEST and b"CRC" in frame[3]
    assert raw.closed_by_peer()
    still_serves(port)
    assert_not_stored(port, 1, 0)


def assert_not_stored(port: int, ledger_id: int, entry_id: int) -> None:
    raw = Raw(port)
    code, _ = raw.call(Op.READ, LEDGER_ENTRY.pack(ledger_id, entry_id))
    assert code in (ErrorCode.NO_SUCH_LEDGER, ErrorCode.NO_SUCH_ENTRY)
    raw.close()


def test_unknown_op_and_short_body_keep_the_connection(port: int) -> None:
    raw = Raw(port)
    code, body = raw.call(200, b"whatever", request_id=5)
    assert code == ErrorCode.BAD_REQUEST and b"unknown op" in body
    code, body = raw.call(Op.READ, b"\x01\x02", request_id=6)
    assert code == ErrorCode.BAD_REQUEST
    code, _ = raw.call(Op.ADD, b"short", request_id=7)
    assert code == ErrorCode.BAD_REQUEST
    code, _ = raw.call(Op.STATS, request_id=8)
    assert code == ErrorCode.OK  # same connection, still good
    raw.close()


def test_other_protocol_version(port: int) -> None:
    raw = Raw(port)
    rest = struct.pack("<BBHQ", 2, Op.STATS, 0, 12)
    raw.send(struct.pack("<II", len(rest) + 4, google_crc32c.value(rest)) + rest)
    (frame,) = raw.recv()
    assert frame[2] == 12 and struct.unpack_from("<H", frame[3])[0] == ErrorCode.BAD_REQUEST
    assert b"version" in frame[3]
    assert raw.call(Op.STATS)[0] == ErrorCode.OK
    raw.close()


def test_truncated_frame_then_vanish(port: int) -> None:
    raw = Raw(port)
    wire = b"".join(encode_add(1, 2, 0, -1, b"never complete"))
    raw.send(wire[: len(wire) - 3])
    raw.close()
    still_serves(port)
    assert_not_stored(port, 2, 0)


def test_pipelined_adds_replied_by_request_id(port: int) -> None:
    raw = Raw(port)
    count = 40  # under the in-memory bookie's in-flight limit
    raw.send([part for i in range(count) for part in encode_add(1000 + i, 8, i, i - 1, b"e%d" % i)])
    replies = raw.recv(count)
    assert sorted(r[2] for r in replies) == [1000 + i for i in range(count)]
    assert {r[3] for r in replies} == {b"\x00\x00"}
    code, body = raw.call(Op.READ_RANGE, RANGE.pack(8, 0, count - 1, 1 << 20))
    assert code == ErrorCode.OK
    assert decode_range_body(b"\x00\x00" + body) == [b"e%d" % i for i in range(count)]
    raw.close()


def test_stops_reading_at_the_in_flight_limit(memory_bookie: ThreadBookie) -> None:
    """With adds held in the engine, no more than the limit start, however many were sent at
    once; the rest start as the engine moves again, and all succeed."""
    import asyncio

    from tests.support import wait_until

    gate = asyncio.Event()
    memory_bookie.loop.call_soon_threadsafe(setattr, memory_bookie.storage, "add_gate", gate)
    limit = memory_bookie.config.max_requests_in_flight
    raw = Raw(memory_bookie.port)
    total = 3 * limit + 36
    raw.send([p for i in range(total) for p in encode_add(i, 3, i, i - 1, b"p%d" % i)])
    wait_until(lambda: memory_bookie.server.in_flight >= limit, WAIT_S, "adds in flight")
    assert memory_bookie.server.in_flight == limit
    memory_bookie.loop.call_soon_threadsafe(gate.set)
    replies = raw.recv(total)
    assert sorted(r[2] for r in replies) == list(range(total))
    assert {r[3] for r in replies} == {b"\x00\x00"}
    raw.close()


def test_client_vanishes_with_adds_in_flight(memory_bookie: ThreadBookie) -> None:
    import asyncio

    gate = asyncio.Event()
    memory_bookie.loop.call_soon_threadsafe(setattr, memory_bookie.storage, "add_gate", gate)
    raw = Raw(memory_bookie.port)
    raw.send([p for i in range(10) for p in encode_add(i, 4, i, i - 1, b"x")])
    time.sleep(0.1)  # not an assertion: just let the adds reach the engine before we vanish
    raw.close()
    memory_bookie.loop.call_soon_threadsafe(gate.set)
    still_serves(memory_bookie.port)


async def test_client_past_the_limit_is_slowed_not_refused(memory_bookie: ThreadBookie) -> None:
    """500 adds in flight against a limit of 64: the server stops reading, TCP holds the client
    back, and every add succeeds."""
    from bookie.client import BookieLedgerClient
    from bookie.types import LedgerSpec

    client = BookieLedgerClient()
    writer = await client.create_ledger(LedgerSpec(12, (memory_bookie.address,)))
    futures = [writer.add_entry_future(b"%d" % i * 50) for i in range(500)]
    assert [await f for f in futures] == list(range(500))
    await client.close()


def mutated_stream(data: st.DataObject) -> bytes:
    """A few valid frames with bytes flipped, cut short, or garbage spliced in."""
    wire = bytearray(
        b"".join(
            b"".join(encode_frame(op, 0, i, body))
            for i, (op, body) in enumerate(
                data.draw(st.lists(st.tuples(st.integers(0, 12), st.binary(max_size=40)), max_size=4))
            )
        )
    )
    for _ in range(data.draw(st.integers(0, 3))):
        if wire:
            wire[data.draw(st.integers(0, len(wire) - 1))] ^= data.draw(st.integers(1, 255))
    wire += data.draw(st.binary(max_size=64))
    return bytes(wire[: data.draw(st.integers(0, len(wire)))])


@settings(
    max_examples=examples(60), deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(st.data())
def test_fuzzed_streams_never_hurt_the_server(memory_bookie: ThreadBookie, data: st.DataObject) -> None:
    raw = Raw(memory_bookie.port)
    with contextlib.suppress(OSError):
        raw.send(mutated_stream(data))
    raw.close()
    still_serves(memory_bookie.port)


async def test_read_only_bookie_refuses_adds_serves_reads(memory_bookie: ThreadBookie) -> None:
    from bookie.client import BookieLedgerClient
    from bookie.errors import ReadOnlyError
    from bookie.types import LedgerSpec

    client = BookieLedgerClient()
    spec = LedgerSpec(13, (memory_bookie.address,))
    writer = await client.create_ledger(spec)
    await writer.add_entry(b"before")
    memory_bookie.storage.read_only_flag = True
    with pytest.raises(ReadOnlyError):
        await writer.add_entry(b"refused")
    assert await client.read_entries(spec, 0, 0) == [b"before"]
    await client.close()


def test_client_that_does_not_read_its_replies(memory_bookie: ThreadBookie) -> None:
    """200 reads of a 200 KiB entry sent at once and not read: the server holds the requests
    back instead of buffering 40 MB of replies, and serves them all once the client reads."""
    from tests.support import wait_until

    big = bytes(range(256)) * 800
    raw = Raw(memory_bookie.port)
    raw.send(encode_add(1, 14, 0, -1, big))
    assert raw.recv()[0][3] == b"\x00\x00"
    raw.send([p for i in range(200) for p in encode_frame(Op.READ, 0, 100 + i, LEDGER_ENTRY.pack(14, 0))])
    wait_until(lambda: any(c._held for c in list(memory_bookie.server.connections)), WAIT_S, "held requests")
    replies = raw.recv(200)
    assert [r[2] for r in replies] == [100 + i for i in range(200)]
    assert all(r[3] == b"\x00\x00" + big for r in replies)
    raw.close()
