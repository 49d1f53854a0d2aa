"""The bookie wire protocol, version 1: length-prefixed, checksummed, pipelined frames over TCP
(or TLS, `bookie.auth`).

Every frame, request or reply, has the same 20-byte header (little-endian):

    offset  size  field
    0       4     length       u32  bytes after this field: 16 + len(body); 16 <= length <= max
    4       4     crc32c       u32  CRC32C (Castagnoli) of bytes [8, 4 + length): header rest + body
    8       1     version      u8   1
    9       1     op           u8   Op below (a reply carries its request's op)
    10      2     flags        u16  FLAG_RECOVERY on ADD; FLAG_REPLY set on every reply
    12      8     request_id   u64  chosen by the client, echoed by the reply
    20      ...   body

Request bodies (i64 ids, -1 meaning "none"):

    ADD            ledger u64 | entry u64 | last_add_confirmed i64 | payload (rest of frame)
    READ           ledger u64 | entry u64
    READ_RANGE     ledger u64 | first u64 | last u64 | max_reply_bytes u32 [| stride u32]
    READ_LAC       ledger u64
    FENCE          ledger u64
    DELETE_LEDGER  ledger u64
    LAST_ENTRY     ledger u64
    STATS          (empty)
    INSTANCE       (empty)
    AUTH           step u8 | 32 bytes: HELLO (1) | client nonce, then PROOF (2) | client proof

Reply bodies start with code u16 (bookie.errors.ErrorCode). When code != OK the rest is a UTF-8
message. When OK:

    ADD, DELETE_LEDGER   (nothing)
    READ                 payload (rest of frame)
    READ_RANGE           count u32 | count x (size u32 | payload): entries first,
                         first+stride, ... up to last (stride 1 when the request has none, 0 is
                         BAD_REQUEST); stops early at a missing entry, at max_reply_bytes or at
                         the server's own caps (always >= 1 entry; a missing first entry is
                         NO_SUCH_ENTRY). A stride lets a reader take, in one request, the entries
                         of a striped ledger (Qw < E) that one bookie holds: every E-th one.
    READ_LAC, FENCE      last_add_confirmed i64
    LAST_ENTRY           last_entry_id i64 | last_add_confirmed i64
    STATS                JSON object (UTF-8)
    INSTANCE             instance id (UTF-8; empty when the bookie has none, e.g. in tests)
    AUTH                 HELLO: server nonce (32) | server proof (32); PROOF: nothing

AUTH (`bookie.auth` has the handshake) was added to version 1 without a new version, as the
READ_RANGE stride was: a bookie without it answers "unknown op" (BAD_REQUEST), which a client
with a secret reports as a refusal. A bookie with a secret answers every request before a
successful PROOF with NOT_AUTHENTICATED and closes; one without a secret answers AUTH with
BAD_REQUEST ("authentication is off"). Until then frames are at most 4 KiB
(`bookie.auth.PRE_AUTH_MAX_FRAME_BYTES`), and a client sends nothing but AUTH before the
PROOF's OK.

INSTANCE was added to version 1 the same way: a bookie without it answers BAD_REQUEST, which a
client reads as "instance unknown". The instance id is the bookie's cookie (`bookie.cookie`): it
changes only when the bookie is formatted as new, so every reply on one connection comes from
that instance. A client asks once per connection, and a "not there" counts as evidence only
from the instance that was recorded when the bookie entered the ledger's segment (a wiped and
formatted bookie, or another process under the same id, cannot know what the old one held).

Framing errors (length out of bounds, CRC mismatch) leave the stream unsynchronised: the server
replies BAD_REQUEST and closes the connection. A well-framed request with an unknown op, a bad
version or a short body gets a BAD_REQUEST reply and the connection stays usable.

Encoders return lists of byte strings (header, fixed body, payload) so that a sender can gather
many frames and write them with one `b"".join` and one `transport.write`, without copying
payloads twice.
"""

from __future__ import annotations

import struct
from enum import IntEnum

import google_crc32c

from bookie.errors import ErrorCode
from common.errors import ErrorKind, QuireError

VERSION = 1


class Op(IntEnum):
    ADD = 1
    READ = 2
    READ_RANGE = 3
    READ_LAC = 4
    FENCE = 5
    DELETE_LEDGER = 6
    LAST_ENTRY = 7
    STATS = 8
    AUTH = 9
    INSTANCE = 10


OPS = frozenset(int(op) for op in Op)
FLAG_RECOVERY = 0x0001
FLAG_REPLY = 0x8000

PREFIX = struct.Struct("<II")  # length, crc32c
HEAD = struct.Struct("<BBHQ")  # version, op, flags, request_id
HEADER_SIZE = PREFIX.size + HEAD.size  # 20
MIN_LENGTH = HEADER_SIZE - 4  # a frame with an empty body
DEFAULT_MAX_FRAME_BYTES = 16 * 1024 * 1024

ADD_HEAD = struct.Struct("<BBHQQQq")  # header rest + ledger, entry, last_add_confirmed
ADD_BODY = struct.Struct("<QQq")
LEDGER = struct.Struct("<Q")
LEDGER_ENTRY = struct.Struct("<QQ")
RANGE = struct.Struct("<QQQI")
RANGE_STRIDED = struct.Struct("<QQQII")
CODE = struct.Struct("<H")
I64 = struct.Struct("<q")
U32 = struct.Struct("<I")
LAST_ENTRY = struct.Struct("<qq")

_crc_value = google_crc32c.value
_crc_extend = google_crc32c.extend
_pack_prefix = PREFIX.pack
_pack_head = HEAD.pack
_unpack_prefix = PREFIX.unpack_from
_unpack_head = HEAD.unpack_from
_OK = CODE.pack(ErrorCode.OK)
_ADD_OP = int(Op.ADD)
_ADD_REPLY_REST = struct.Struct("<BBHQH")  # header rest + code: an OK reply to ADD
_ADD_REPLY_LENGTH = _ADD_REPLY_REST.size + 4

# A decoded frame: (op, flags, request_id, body).
Frame = tuple[int, int, int, bytes]


class FrameError(QuireError):
    """The byte stream cannot be framed any more: reply BAD_REQUEST and close. It stays between
    a bookie and its peer; one that reaches anyone else is a bug."""

    kind = ErrorKind.internal

    code = ErrorCode.BAD_REQUEST

    def __init__(self, message: str, request_id: int = 0) -> None:
        super().__init__(message)
        self.request_id = request_id


def encode_frame(
    op: int, flags: int, request_id: int, body: bytes = b"", payload: bytes = b""
) -> list[bytes]:
    """One frame as [prefix, header rest + body, payload]; `payload` follows `body` on the wire."""
    rest = _pack_head(VERSION, op, flags, request_id) + body
    crc = _crc_extend(_crc_value(rest), payload) if payload else _crc_value(rest)
    return [_pack_prefix(len(rest) + len(payload) + 4, crc), rest, payload]


def encode_add(
    request_id: int, ledger_id: int, entry_id: int, lac: int, payload: bytes, flags: int = 0
) -> list[bytes]:
    """The hot path of the client: one ADD frame in three pieces, two CRC calls, two packs."""
    rest = ADD_HEAD.pack(VERSION, _ADD_OP, flags, request_id, ledger_id, entry_id, lac)
    crc = _crc_extend(_crc_value(rest), payload)
    return [_pack_prefix(len(rest) + len(payload) + 4, crc), rest, payload]


def encode_reply(op: int, request_id: int, body: bytes = b"", payload: bytes = b"") -> list[bytes]:
    """An OK reply: code OK, then `body` and `payload`."""
    return encode_frame(op, FLAG_REPLY, request_id, _OK + body, payload)


def encode_error(op: int, request_id: int, code: ErrorCode, message: str) -> list[bytes]:
    return encode_frame(op, FLAG_REPLY, request_id, CODE.pack(code) + message.encode()[:4096])


def encode_ok_add_reply(request_id: int) -> bytes:
    """The server's hot path: an empty OK reply to ADD as one byte string."""
    rest = _ADD_REPLY_REST.pack(VERSION, _ADD_OP, FLAG_REPLY, request_id, ErrorCode.OK)
    return _pack_prefix(_ADD_REPLY_LENGTH, _crc_value(rest)) + rest


def encode_range_reply(request_id: int, payloads: list[bytes]) -> list[bytes]:
    parts: list[bytes] = [U32.pack(len(payloads))]
    pack = U32.pack
    for p in payloads:
        parts.append(pack(len(p)))
        parts.append(p)
    return encode_reply(Op.READ_RANGE, request_id, b"".join(parts))


def decode_range_body(body: bytes, offset: int = 2) -> list[bytes]:
    """Entries of an OK READ_RANGE reply body (offset skips the code). Raises ValueError."""
    (count,) = U32.unpack_from(body, offset)
    pos = offset + 4
    out: list[bytes] = []
    unpack = U32.unpack_from
    end = len(body)
    for _ in range(count):
        (size,) = unpack(body, pos)
        pos += 4
        if pos + size > end:
            raise ValueError("READ_RANGE reply shorter than its entry sizes")
        out.append(body[pos : pos + size])
        pos += size
    if pos != end:
        raise ValueError("READ_RANGE reply longer than its entries")
    return out


OP_BAD_VERSION = 0  # never a valid op: the decoder puts it in place of a frame's op on a bad version


class FrameDecoder:
    """Splits a byte stream into frames; keeps a partial frame between `feed` calls.

    `feed` returns the complete, CRC-checked frames; the first framing error is left in
    `self.error` (frames before it are still returned) and the decoder refuses further input.
    A frame of another protocol version comes out with op OP_BAD_VERSION, to be answered with
    BAD_REQUEST one by one. A partial frame is gathered in a bytearray until it is complete, so
    a large frame arriving in many small reads is copied a bounded number of times.
    """

    __slots__ = ("_need", "_pending", "error", "max_frame_bytes")

    def __init__(self, max_frame_bytes: int = DEFAULT_MAX_FRAME_BYTES) -> None:
        self.max_frame_bytes = max_frame_bytes
        self._pending = bytearray()
        self._need = 0  # bytes `_pending` must hold before parsing again
        self.error: FrameError | None = None

    @property
    def buffered(self) -> int:
        return len(self._pending)

    def feed(self, data: bytes) -> list[Frame]:
        if self.error is not None:
            return []
        if self._pending:
            self._pending += data
            if len(self._pending) < self._need:
                return []
            buf = bytes(self._pending)
            self._pending.clear()
        else:
            buf = data
        frames: list[Frame] = []
        off = 0
        end = len(buf)
        max_len = self.max_frame_bytes
        need = 8
        while end - off >= 8:
            length, crc = _unpack_prefix(buf, off)
            if length < MIN_LENGTH or length > max_len:
                self.error = FrameError(f"frame length {length} outside [{MIN_LENGTH}, {max_len}]")
                return frames
            stop = off + 4 + length
            if stop > end:
                need = 4 + length
                break
            frame = buf[off + 8 : stop]
            version, op, flags, request_id = _unpack_head(frame)
            if _crc_value(frame) != crc:
                self.error = FrameError("frame CRC32C mismatch", request_id)
                return frames
            if version != VERSION:
                op = OP_BAD_VERSION
            frames.append((op, flags, request_id, frame[12:]))
            off = stop
        if off < end:
            self._pending += buf[off:] if off else buf
            self._need = need
        return frames
