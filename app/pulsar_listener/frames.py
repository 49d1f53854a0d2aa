"""Pulsar frames (the protocol's framing, version-free: the command carries the protocol version).

Byte layout of a frame, every integer big-endian:

    offset 0  4 bytes  total size: the bytes after this field
    offset 4  4 bytes  command size n
    offset 8  n bytes  the command: a `BaseCommand` (protobuf, proto2)
    -- SEND and MESSAGE only, the rest of the frame:
              2 bytes  magic 0x0e01, then 4 bytes CRC32C (Castagnoli) of everything after it;
                       a peer may leave both out (no checksum), which the listener accepts
              4 bytes  metadata size m
              m bytes  `MessageMetadata`
              ...      the payload (one message, or a batch: `entries`)

Limits: a frame is at most `max_frame_bytes` (the largest message the listener takes, sent to the
client in CONNECTED, plus 10 KiB for the command and metadata, as the Java broker allows); a
larger size, a command size past the frame, or a command that does not decode is a `PulsarFrameError`
and closes the connection. A checksum that does not match is not: it is answered per message
(SEND_ERROR ChecksumError), as Pulsar does.
"""

from __future__ import annotations

import asyncio
import struct
from dataclasses import dataclass
from typing import Final

from crc32c import crc32c
from google.protobuf.message import DecodeError

from .errors import PulsarError, PulsarFrameError
from .proto import pulsar_api_pb2 as pb

MAGIC_CRC32C: Final = 0x0E01
DEFAULT_MAX_MESSAGE_BYTES: Final = 5 * 1024 * 1024  # the Java broker's maxMessageSize
FRAME_OVERHEAD_BYTES: Final = 10 * 1024
_U32 = struct.Struct(">I")
_U16 = struct.Struct(">H")
_HEAD = struct.Struct(">II")  # total size, command size
_CHECKED = struct.Struct(">HI")  # magic, checksum


@dataclass(slots=True)
class Frame:
    command: pb.BaseCommand
    rest: memoryview  # after the command: a message's checksum, metadata and payload (or empty)


@dataclass(slots=True)
class Payload:
    metadata: pb.MessageMetadata
    body: bytes


class ChecksumMismatch(PulsarError):
    server_error = pb.ChecksumError


async def read_frame(reader: asyncio.StreamReader, max_frame_bytes: int) -> Frame | None:
    """The next frame, or None when the peer closed between frames."""
    try:
        head = await reader.readexactly(4)
    except asyncio.IncompleteReadError as exc:
        if not exc.partial:
            return None
        raise PulsarFrameError("frame cut short in its size") from exc
    (total,) = _U32.unpack(head)
    if total < 4 or total > max_frame_bytes:
        raise PulsarFrameError(f"frame size {total} outside 4..{max_frame_bytes}")
    try:
        body = await reader.readexactly(total)
    except asyncio.IncompleteReadError as exc:
        raise PulsarFrameError(f"frame cut short: {len(exc.partial)} of {total} bytes") from exc
    return parse_frame(body)


def parse_frame(body: bytes) -> Frame:
    """A frame after its total size field."""
    view = memoryview(body)
    (size,) = _U32.unpack_from(view)
    if size == 0 or size > len(view) - 4:
        raise PulsarFrameError(f"command size {size} outside 1..{len(view) - 4}")
    command = pb.BaseCommand()
    try:
        command.ParseFromString(bytes(view[4 : 4 + size]))
    except DecodeError as exc:
        raise PulsarFrameError(f"command does not decode: {exc}") from exc
    return Frame(command, view[4 + size :])


def open_payload(rest: memoryview) -> Payload:
    """A message's metadata and payload; ChecksumMismatch when its checksum does not match,
    PulsarFrameError when it is not there or its metadata does not decode."""
    if len(rest) >= 6 and _U16.unpack_from(rest)[0] == MAGIC_CRC32C:
        _, checksum = _CHECKED.unpack_from(rest)
        rest = rest[6:]
        if crc32c(rest) != checksum:
            raise ChecksumMismatch("checksum of the message's metadata and payload does not match")
    if len(rest) < 4:
        raise PulsarFrameError("a message without its metadata")
    (size,) = _U32.unpack_from(rest)
    if size > len(rest) - 4:
        raise PulsarFrameError(f"metadata size {size} past the frame")
    metadata = pb.MessageMetadata()
    try:
        metadata.ParseFromString(bytes(rest[4 : 4 + size]))
    except DecodeError as exc:
        raise PulsarFrameError(f"message metadata does not decode: {exc}") from exc
    return Payload(metadata, bytes(rest[4 + size :]))


def command_frame(command: pb.BaseCommand) -> bytes:
    data = command.SerializeToString()
    return _HEAD.pack(len(data) + 4, len(data)) + data


def message_frame(command: pb.BaseCommand, metadata: bytes, payload: bytes) -> bytes:
    """A MESSAGE (or SEND) frame with its checksummed metadata and payload."""
    data = command.SerializeToString()
    checked = _U32.pack(len(metadata)) + metadata + payload
    total = 4 + len(data) + 6 + len(checked)
    return _HEAD.pack(total, len(data)) + data + _CHECKED.pack(MAGIC_CRC32C, crc32c(checked)) + checked
