"""Wire protocol: round trips of every frame kind, framing errors, and a fuzzed decoder."""

from __future__ import annotations

import struct

import google_crc32c
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bookie.errors import ErrorCode
from bookie.protocol import (
    FLAG_RECOVERY,
    FLAG_REPLY,
    HEADER_SIZE,
    OP_BAD_VERSION,
    RANGE,
    FrameDecoder,
    Op,
    decode_range_body,
    encode_add,
    encode_error,
    encode_frame,
    encode_ok_add_reply,
    encode_range_reply,
)
from tests.examples import examples


def join(parts: list[bytes]) -> bytes:
    return b"".join(parts)


def test_add_round_trip() -> None:
    wire = join(encode_add(7, 42, 3, 2, b"payload", FLAG_RECOVERY))
    frames = FrameDecoder().feed(wire)
    assert frames == [(Op.ADD, FLAG_RECOVERY, 7, struct.pack("<QQq", 42, 3, 2) + b"payload")]
    assert len(wire) == HEADER_SIZE + 24 + 7


def test_header_layout_is_as_documented() -> None:
    wire = join(encode_frame(Op.READ_RANGE, 0, 99, RANGE.pack(1, 2, 3, 4)))
    length, crc = struct.unpack_from("<II", wire)
    assert length == len(wire) - 4
    assert crc == google_crc32c.value(wire[8:])
    assert struct.unpack_from("<BBHQ", wire, 8) == (1, Op.READ_RANGE, 0, 99)


def test_replies_round_trip() -> None:
    decoder = FrameDecoder()
    ok = decoder.feed(encode_ok_add_reply(5))
    assert ok == [(Op.ADD, FLAG_REPLY, 5, b"\x00\x00")]
    (err,) = decoder.feed(join(encode_error(Op.READ, 6, ErrorCode.FENCED, "ledger 1 is fenced")))
    assert err[:3] == (Op.READ, FLAG_REPLY, 6)
    assert err[3] == struct.pack("<H", ErrorCode.FENCED) + b"ledger 1 is fenced"
    (rng,) = decoder.feed(join(encode_range_reply(8, [b"a", b"", b"ccc"])))
    assert decode_range_body(rng[3]) == [b"a", b"", b"ccc"]


def test_many_frames_in_one_buffer_and_split_anywhere() -> None:
    wire = b"".join(join(encode_add(i, 1, i, i - 1, bytes([i]) * i)) for i in range(50))
    for cut in (1, 7, 8, 19, 20, 63, len(wire) // 2, len(wire) - 1):
        decoder = FrameDecoder()
        frames = decoder.feed(wire[:cut]) + decoder.feed(wire[cut:])
        assert [f[2] for f in frames] == list(range(50))
        assert decoder.error is None and decoder.buffered == 0


def test_large_frame_in_small_pieces() -> None:
    payload = bytes(range(256)) * 4096  # 1 MiB
    wire = join(encode_add(1, 1, 0, -1, payload))
    decoder = FrameDecoder()
    frames = []
    for i in range(0, len(wire), 1000):
        frames += decoder.feed(wire[i : i + 1000])
    assert len(frames) == 1 and frames[0][3][24:] == payload


def test_bad_crc_is_a_framing_error_after_the_good_frames() -> None:
    good = join(encode_add(1, 1, 0, -1, b"x"))
    bad = bytearray(join(encode_add(2, 1, 1, 0, b"y")))
    bad[-1] ^= 0xFF
    decoder = FrameDecoder()
    frames = decoder.feed(good + bytes(bad) + good)
    assert [f[2] for f in frames] == [1]
    assert decoder.error is not None and "CRC" in str(decoder.error)
    assert decoder.feed(good) == []  # the stream is dead


@pytest.mark.parametrize("length", [0, 15, 1025])
def test_length_out_of_bounds(length: int) -> None:
    decoder = FrameDecoder(max_frame_bytes=1024)
    assert decoder.feed(struct.pack("<II", length, 0) + bytes(40)) == []
    assert decoder.error is not None and "length" in str(decoder.error)


def test_other_version_is_flagged_per_frame() -> None:
    rest = struct.pack("<BBHQ", 9, Op.READ, 0, 3) + bytes(16)
    wire = struct.pack("<II", len(rest) + 4, google_crc32c.value(rest)) + rest
    (frame,) = FrameDecoder().feed(wire)
    assert frame[0] == OP_BAD_VERSION and frame[2] == 3


def test_range_body_that_lies_about_sizes() -> None:
    with pytest.raises(ValueError):
        decode_range_body(b"\x00\x00" + struct.pack("<II", 1, 10) + b"abc")
    with pytest.raises(ValueError):
        decode_range_body(b"\x00\x00" + struct.pack("<II", 1, 1) + b"abc")


@settings(max_examples=examples(300), deadline=None)
@given(st.binary(max_size=600), st.lists(st.integers(0, 600), max_size=6))
def test_decoder_never_raises_on_garbage(data: bytes, cuts: list[int]) -> None:
    decoder = FrameDecoder(max_frame_bytes=4096)
    pieces = []
    last = 0
    for c in sorted(cuts):
        pieces.append(data[last:c])
        last = max(last, c)
    pieces.append(data[last:])
    for piece in pieces:
        for op, _flags, _rid, body in decoder.feed(piece):
            assert 0 <= op <= 255 and isinstance(body, bytes)
    assert decoder.buffered <= len(data)


@settings(max_examples=examples(200), deadline=None)
@given(
    st.lists(
        st.tuples(
            st.integers(0, 2**64 - 1),
            st.integers(0, 2**63 - 1),
            st.integers(-1, 2**63 - 1),
            st.binary(max_size=300),
        ),
        min_size=1,
        max_size=20,
    ),
    st.integers(1, 97),
)
def test_decoder_recovers_every_frame_of_any_split(
    frames: list[tuple[int, int, int, bytes]], step: int
) -> None:
    wire = b"".join(join(encode_add(rid, 1, entry, lac, p)) for rid, entry, lac, p in frames)
    decoder = FrameDecoder()
    out = []
    for i in range(0, len(wire), step):
        out += decoder.feed(wire[i : i + step])
    assert [(f[2], f[3][24:]) for f in out] == [(rid, p) for rid, _e, _l, p in frames]
    assert [struct.unpack_from("<Qq", f[3], 8) for f in out] == [(e, lac) for _r, e, lac, _p in frames]
