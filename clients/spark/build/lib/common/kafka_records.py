"""Kafka record batches (magic 2, Kafka 0.11+): validation, base-offset patching, decoding and
encoding, on raw bytes.

A record batch, big-endian, offsets in bytes from its start:

    0   baseOffset            int64   the broker's: rewritten at append, not under the CRC
    8   batchLength           int32   bytes after this field (the batch is batchLength + 12)
    12  partitionLeaderEpoch  int32   the broker's, not under the CRC
    16  magic                 int8    2 (byte 16 holds the magic in every older format too)
    17  crc                   uint32  CRC-32C (Castagnoli) of bytes 21..end
    21  attributes            int16   bits 0-2 codec (0 none, 1 gzip, 2 snappy, 3 lz4, 4 zstd),
                                      3 timestamp type (1 = LogAppendTime), 4 transactional,
                                      5 control, 6 delete horizon set (KIP-534)
    23  lastOffsetDelta       int32   offset of the last record minus baseOffset
    27  baseTimestamp         int64   ms
    35  maxTimestamp          int64   ms
    43  producerId            int64   -1 without idempotence
    51  producerEpoch         int16
    53  baseSequence          int32   -1 without idempotence
    57  recordsCount          int32
    61  records               the records, or with a codec one compressed stream of them

A record: length varint | attributes int8 (unused) | timestampDelta varlong | offsetDelta
varint | keyLength varint (-1 = null) | key | valueLength varint (-1 = null) | value |
headerCount varint | headers, each keyLength varint | key (UTF-8) | valueLength varint (-1 =
null) | value. Varints are zigzag-encoded, as protobuf's sint32/sint64.

On the produce path a batch is validated here and stored unchanged; only the base offset (not
under the CRC) is patched on the way out, so no batch is re-encoded or decompressed on the hot
path. `decode_records` decompresses, for compaction or wherever keys and values are needed.

Error codes (`RecordBatchError.code`), as Kafka's broker answers a client (ProduceRequest and
LogValidator): a batch cut short, a length that does not fit, a CRC mismatch, undecodable
records -> CORRUPT_MESSAGE; magic other than 2, no batch or more than one in a produce, an
offset range that does not match the count, a count <= 0, a control batch, a producer id
without a base sequence -> INVALID_RECORD; a codec id above 4 -> UNSUPPORTED_COMPRESSION_TYPE.
Kafka ignores a LogAppendTime bit set by a client (it rewrites the timestamps to its own, by the
topic's setting); Quire stores batches unchanged, so it refuses one with INVALID_RECORD rather
than serve the client's claim as the broker's time.

Codecs: gzip with the standard library (zlib, bounded output); snappy, lz4 and zstd with cramjam:
one maintained package of Rust bindings with wheels for every platform and no system library,
which also decodes into a caller's buffer so the output is bounded (`max_bytes`: a batch that
decompresses beyond it is refused as corrupt, so a small compressed bomb cannot exhaust memory).
aiokafka uses cramjam for the same three codecs. Snappy comes raw (librdkafka) or in xerial's
block framing (the Java client, kafka-python, aiokafka), both read here. LZ4 is the LZ4 frame
format (KIP-57). CRC-32C comes from the `crc32c` package (kio depends on it too), which reads a
memoryview: google-crc32c takes only bytes, so checking bytes 21..end would copy each batch.
"""

from __future__ import annotations

import struct
import zlib
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from enum import IntEnum
from typing import Final

import cramjam
from crc32c import crc32c


class ErrorCode(IntEnum):
    """The Kafka error codes a batch can earn (the listener's ErrorCode has them all)."""

    CORRUPT_MESSAGE = 2
    UNSUPPORTED_COMPRESSION_TYPE = 76
    INVALID_RECORD = 87


MAGIC: Final = 2
HEADER: Final = struct.Struct(">qiibIhiqqqhii")  # the 61 bytes before the records
HEADER_SIZE: Final = HEADER.size
_LENGTH_OVERHEAD: Final = 12  # baseOffset and batchLength are not counted in batchLength
_CRC_START: Final = 21
_PREFIX = struct.Struct(">qi")  # baseOffset, batchLength
_MAGIC_AT: Final = 16
_BASE_OFFSET = struct.Struct(">q")
_CRC = struct.Struct(">I")
DEFAULT_MAX_DECOMPRESSED_BYTES: Final = 128 * 1024 * 1024

CODEC_NONE, CODEC_GZIP, CODEC_SNAPPY, CODEC_LZ4, CODEC_ZSTD = 0, 1, 2, 3, 4
_CODEC_MASK: Final = 0x07
_LOG_APPEND_TIME: Final = 0x08
_TRANSACTIONAL: Final = 0x10
_CONTROL: Final = 0x20
_DELETE_HORIZON: Final = 0x40
_XERIAL_HEADER: Final = b"\x82SNAPPY\x00"
_XERIAL_HEADER_SIZE: Final = 16  # the magic above, then version int32 and compatible int32


class RecordBatchError(Exception):
    """A batch that is not valid: `code` is the Kafka error to answer with."""

    def __init__(self, code: ErrorCode, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message

    def __str__(self) -> str:
        return f"{self.code.name}: {self.message}"


@dataclass(frozen=True, slots=True)
class BatchHeader:
    """The header of one batch, found at `position` in the bytes parsed; `length` is its whole
    size in bytes (batchLength + 12)."""

    position: int
    base_offset: int
    length: int
    partition_leader_epoch: int
    crc: int
    attributes: int
    last_offset_delta: int
    base_timestamp: int
    max_timestamp: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    records_count: int

    @property
    def codec(self) -> int:
        return self.attributes & _CODEC_MASK

    @property
    def is_log_append_time(self) -> bool:
        return bool(self.attributes & _LOG_APPEND_TIME)

    @property
    def is_transactional(self) -> bool:
        return bool(self.attributes & _TRANSACTIONAL)

    @property
    def is_control(self) -> bool:
        return bool(self.attributes & _CONTROL)

    @property
    def last_offset(self) -> int:
        return self.base_offset + self.last_offset_delta

    @property
    def last_sequence(self) -> int:
        """The sequence number of the last record (wraps past 2^31 - 1 to 0, as Kafka's), or -1
        when the batch has no sequence."""
        if self.base_sequence < 0:
            return -1
        return (self.base_sequence + self.last_offset_delta) % (1 << 31)


@dataclass(slots=True)
class KafkaRecord:
    """One record; its offset is the batch's base offset plus `offset_delta`, `timestamp` is in
    ms. Header keys are text, header values bytes or None."""

    offset_delta: int
    timestamp: int
    key: bytes | None
    value: bytes | None
    headers: list[tuple[str, bytes | None]] = field(default_factory=list)


# -- validation -------------------------------------------------------------------------------


def parse_batches(raw: bytes, *, from_client: bool = True) -> list[BatchHeader]:
    """The headers of the batches in `raw`, each checked: magic 2, its length inside `raw`, its
    CRC. With `from_client` (a produce), also what Kafka refuses from a client: a count that
    does not match the offset range or is <= 0, a control batch, a producer id without a base
    sequence, the LogAppendTime bit, an unknown codec. Stored batches (compacted ones may have
    gaps in their offsets) are parsed with from_client=False. Raises RecordBatchError."""
    view = memoryview(raw)
    headers = []
    position = 0
    while position < len(raw):
        header = _parse_header(raw, view, position)
        if from_client:
            _check_from_client(header)
        headers.append(header)
        position += header.length
    return headers


def parse_produced_batch(raw: bytes | None) -> BatchHeader:
    """The one batch of a partition in a Produce request (v3+ carries exactly one), validated as
    `parse_batches(raw, from_client=True)`."""
    headers = parse_batches(raw or b"", from_client=True)
    if len(headers) != 1:
        raise RecordBatchError(
            ErrorCode.INVALID_RECORD, f"a produce must carry exactly one record batch, not {len(headers)}"
        )
    return headers[0]


def _parse_header(raw: bytes, view: memoryview, position: int) -> BatchHeader:
    left = len(raw) - position
    if left <= _MAGIC_AT:
        raise RecordBatchError(ErrorCode.CORRUPT_MESSAGE, f"{left} bytes left: a batch header is cut short")
    _, batch_length = _PREFIX.unpack_from(raw, position)
    magic = raw[position + _MAGIC_AT]
    if magic != MAGIC:
        raise RecordBatchError(
            ErrorCode.INVALID_RECORD, f"record batch magic {magic}; only magic 2 is accepted"
        )
    length = batch_length + _LENGTH_OVERHEAD
    if length < HEADER_SIZE or length > left:
        raise RecordBatchError(
            ErrorCode.CORRUPT_MESSAGE, f"batch length {batch_length} does not fit ({left} bytes left)"
        )
    fields = HEADER.unpack_from(raw, position)
    computed = crc32c(view[position + _CRC_START : position + length])
    if computed != fields[4]:
        raise RecordBatchError(
            ErrorCode.CORRUPT_MESSAGE,
            f"CRC-32C mismatch: batch says {fields[4]:#010x}, bytes give {computed:#010x}",
        )
    return BatchHeader(position, fields[0], length, fields[2], *fields[4:])


def _check_from_client(header: BatchHeader) -> None:
    def refuse(message: str) -> RecordBatchError:
        return RecordBatchError(ErrorCode.INVALID_RECORD, message)

    if header.last_offset_delta < 0:
        raise refuse(f"batch has an invalid offset range: last offset delta {header.last_offset_delta}")
    if header.records_count <= 0:
        raise refuse(f"invalid reported count for record batch: {header.records_count}")
    if header.records_count != header.last_offset_delta + 1:
        raise refuse(
            f"inconsistent batch offset range (last delta {header.last_offset_delta}) "
            f"and count of records {header.records_count}"
        )
    if header.is_control:
        raise refuse("clients are not allowed to write control records")
    if header.producer_id >= 0 and header.base_sequence < 0:
        raise refuse(f"invalid sequence number {header.base_sequence} with producer id {header.producer_id}")
    if header.is_log_append_time:
        raise refuse("clients may not set the LogAppendTime timestamp type")
    if header.codec > CODEC_ZSTD:
        raise RecordBatchError(
            ErrorCode.UNSUPPORTED_COMPRESSION_TYPE, f"unknown compression codec {header.codec}"
        )


# -- serving ----------------------------------------------------------------------------------


def with_base_offset(batch: bytes, base_offset: int) -> bytes:
    """The batch with its base offset set (bytes 0..8, not under the CRC): one copy."""
    return b"".join((_BASE_OFFSET.pack(base_offset), memoryview(batch)[8:]))


def join_batches(batches: Iterable[tuple[int, bytes | memoryview]]) -> bytes:
    """One Fetch `records` blob from (base_offset, batch) pairs, each batch's base offset set on
    the way: one copy of all the bytes, none per batch. Batches whose stored base offset is
    already right can simply be joined: `b"".join(batches)`."""
    parts: list[bytes | memoryview] = []
    for base_offset, batch in batches:
        parts += based(batch, base_offset)
    return b"".join(parts)


def based(batch: bytes | memoryview, base_offset: int) -> tuple[bytes, memoryview]:
    """The batch as two pieces to join (no copy yet): its base offset set, then the rest."""
    return _BASE_OFFSET.pack(base_offset), memoryview(batch)[8:]


# -- decoding ---------------------------------------------------------------------------------


def decode_records(batch: bytes, *, max_bytes: int = DEFAULT_MAX_DECOMPRESSED_BYTES) -> list[KafkaRecord]:
    """The records of one batch (the first in `batch`), decompressed. The CRC is checked and the
    records must fill the batch exactly; offsets are deltas from the batch's base offset (its
    header: `parse_batches(batch, from_client=False)[0]`). Timestamps of a LogAppendTime batch
    are its max timestamp, as Kafka's. Raises RecordBatchError (CORRUPT_MESSAGE for undecodable
    records, or decompressed data over `max_bytes`)."""
    header = _parse_header(batch, memoryview(batch), 0)
    view = memoryview(batch)[HEADER_SIZE : header.length]
    payload = view if header.codec == CODEC_NONE else _decompress(header.codec, view, max_bytes)
    try:
        records, end = _read_records(payload, header)
    except (IndexError, ValueError, UnicodeDecodeError) as exc:
        raise RecordBatchError(ErrorCode.CORRUPT_MESSAGE, f"undecodable records: {exc}") from exc
    if end != len(payload):
        raise RecordBatchError(
            ErrorCode.CORRUPT_MESSAGE, f"{len(payload) - end} bytes left after {header.records_count} records"
        )
    return records


def _read_records(data: bytes | bytearray | memoryview, header: BatchHeader) -> tuple[list[KafkaRecord], int]:
    records = []
    pos = 0
    log_append_time = header.is_log_append_time
    for _ in range(header.records_count):
        length, pos = _read_varint(data, pos)
        end = pos + length
        if length < 0 or end > len(data):
            raise ValueError(f"record length {length} does not fit")
        pos += 1  # attributes, unused
        timestamp_delta, pos = _read_varint(data, pos)
        offset_delta, pos = _read_varint(data, pos)
        key, pos = _read_bytes(data, pos)
        value, pos = _read_bytes(data, pos)
        count, pos = _read_varint(data, pos)
        headers = []
        for _ in range(count):
            header_key, pos = _read_bytes(data, pos)
            if header_key is None:
                raise ValueError("null header key")
            header_value, pos = _read_bytes(data, pos)
            headers.append((header_key.decode("utf-8"), header_value))
        if pos != end:
            raise ValueError(f"record of length {length} holds {length + pos - end} bytes")
        timestamp = header.max_timestamp if log_append_time else header.base_timestamp + timestamp_delta
        records.append(KafkaRecord(offset_delta, timestamp, key, value, headers))
    return records, pos


def _read_varint(data: bytes | bytearray | memoryview, pos: int) -> tuple[int, int]:
    """A zigzag varint (up to 64 bits) at `pos`, and the position after it."""
    byte = data[pos]
    if byte < 0x80:
        return (byte >> 1) ^ -(byte & 1), pos + 1
    value = byte & 0x7F
    shift = 7
    while True:
        pos += 1
        byte = data[pos]
        value |= (byte & 0x7F) << shift
        if byte < 0x80:
            return (value >> 1) ^ -(value & 1), pos + 1
        shift += 7
        if shift > 63:
            raise ValueError("varint longer than 10 bytes")


def _read_bytes(data: bytes | bytearray | memoryview, pos: int) -> tuple[bytes | None, int]:
    length, pos = _read_varint(data, pos)
    if length < 0:
        if length != -1:
            raise ValueError(f"negative length {length}")
        return None, pos
    end = pos + length
    if end > len(data):
        raise ValueError(f"length {length} runs past the records")
    return bytes(data[pos:end]), end


def _decompress(codec: int, data: memoryview, max_bytes: int) -> bytes | bytearray:
    try:
        if codec == CODEC_GZIP:
            return _gunzip(data, max_bytes)
        if codec == CODEC_SNAPPY:
            return _unsnappy(data, max_bytes)
        if codec == CODEC_LZ4:
            return _bounded(cramjam.lz4.decompress_into, data, max_bytes)
        if codec == CODEC_ZSTD:
            return _bounded(cramjam.zstd.decompress_into, data, max_bytes)
    except (zlib.error, cramjam.DecompressionError, ValueError) as exc:
        raise RecordBatchError(ErrorCode.CORRUPT_MESSAGE, f"codec {codec}: {exc}") from exc
    raise RecordBatchError(ErrorCode.UNSUPPORTED_COMPRESSION_TYPE, f"unknown compression codec {codec}")


def _gunzip(data: memoryview, max_bytes: int) -> bytes:
    inflater = zlib.decompressobj(wbits=16 + zlib.MAX_WBITS)
    out = inflater.decompress(data, max_bytes + 1)
    if len(out) > max_bytes:
        raise ValueError(f"decompresses to more than {max_bytes} bytes")
    if not inflater.eof:
        raise ValueError("gzip stream cut short")
    return out


def _unsnappy(data: memoryview, max_bytes: int) -> bytes | bytearray:
    if bytes(data[: len(_XERIAL_HEADER)]) != _XERIAL_HEADER:
        return _snappy_block(data, max_bytes)
    out = bytearray()
    pos = _XERIAL_HEADER_SIZE
    while pos < len(data):
        if pos + 4 > len(data):
            raise ValueError("xerial block length cut short")
        (size,) = struct.unpack_from(">i", data, pos)
        pos += 4
        if size < 0 or pos + size > len(data):
            raise ValueError(f"xerial block of {size} bytes does not fit")
        out += _snappy_block(data[pos : pos + size], max_bytes - len(out))
        pos += size
    return out


def _snappy_block(data: memoryview, max_bytes: int) -> bytes:
    if cramjam.snappy.decompress_raw_len(data) > max_bytes:
        raise ValueError("snappy data decompresses beyond the limit")
    return bytes(cramjam.snappy.decompress_raw(data))


def _bounded(decompress_into: Callable[..., int], data: memoryview, max_bytes: int) -> bytearray:
    """Decompress into a buffer that grows (x4) up to max_bytes: cramjam fails when the output
    does not fit, so the output is never larger than max_bytes."""
    size = min(max_bytes, max(64 * 1024, len(data) * 8))
    while True:
        out = bytearray(size)
        try:
            written = decompress_into(data, out)
        except cramjam.DecompressionError:
            if size >= max_bytes:
                raise
            size = min(max_bytes, size * 4)
            continue
        del out[written:]
        return out


# -- encoding ---------------------------------------------------------------------------------


def encode_batch(
    base_offset: int,
    records: Sequence[KafkaRecord],
    *,
    producer_id: int = -1,
    producer_epoch: int = -1,
    base_sequence: int = -1,
    is_transactional: bool = False,
    partition_leader_epoch: int = -1,
) -> bytes:
    """An uncompressed magic-2 batch of `records` (CreateTime), with its CRC. Offset deltas must
    increase, and may leave gaps (a compacted view): lastOffsetDelta is the last record's.
    The base timestamp is the first record's, as Kafka's builder does."""
    if not records:
        raise ValueError("a record batch needs at least one record")
    base_timestamp = records[0].timestamp
    body: list[bytes] = []
    previous = -1
    for record in records:
        if record.offset_delta <= previous:
            raise ValueError(f"offset deltas must increase: {record.offset_delta} after {previous}")
        previous = record.offset_delta
        body.append(_encode_record(record, base_timestamp))
    records_bytes = b"".join(body)
    attributes = _TRANSACTIONAL if is_transactional else 0
    header = bytearray(
        HEADER.pack(
            base_offset,
            HEADER_SIZE - _LENGTH_OVERHEAD + len(records_bytes),
            partition_leader_epoch,
            MAGIC,
            0,
            attributes,
            records[-1].offset_delta,
            base_timestamp,
            max(record.timestamp for record in records),
            producer_id,
            producer_epoch,
            base_sequence,
            len(records),
        )
    )
    crc = crc32c(records_bytes, crc32c(memoryview(header)[_CRC_START:]))
    _CRC.pack_into(header, 17, crc)
    return bytes(header) + records_bytes


def _encode_record(record: KafkaRecord, base_timestamp: int) -> bytes:
    parts = [
        b"\x00",  # attributes
        _varint(record.timestamp - base_timestamp),
        _varint(record.offset_delta),
        *_bytes_field(record.key),
        *_bytes_field(record.value),
        _varint(len(record.headers)),
    ]
    for header_key, header_value in record.headers:
        parts += _bytes_field(header_key.encode("utf-8"))
        parts += _bytes_field(header_value)
    inner = b"".join(parts)
    return _varint(len(inner)) + inner


def _bytes_field(value: bytes | None) -> tuple[bytes, ...]:
    if value is None:
        return (b"\x01",)  # zigzag(-1)
    return _varint(len(value)), value


def _varint(value: int) -> bytes:
    """Zigzag varint (64-bit)."""
    zigzag = (value << 1) ^ (value >> 63)
    if zigzag < 0x80:
        return _SMALL_VARINTS[zigzag]
    out = bytearray()
    while zigzag >= 0x80:
        out.append((zigzag & 0x7F) | 0x80)
        zigzag >>= 7
    out.append(zigzag)
    return bytes(out)


_SMALL_VARINTS: Final = [bytes((n,)) for n in range(0x80)]
