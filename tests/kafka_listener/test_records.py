"""The record batch v2 codec: batches built by real clients' builders (kafka-python's and
aiokafka's, every codec), our own encoder read back by theirs, and a table of bad batches."""

from __future__ import annotations

import struct

import pytest
from aiokafka.record.default_records import DefaultRecordBatch as AioBatch
from aiokafka.record.default_records import DefaultRecordBatchBuilder as AioBuilder
from crc32c import crc32c
from kafka.record.default_records import DefaultRecordBatch as KpBatch
from kafka.record.default_records import DefaultRecordBatchBuilder as KpBuilder

from app.kafka_listener.errors import ErrorCode
from common.kafka_records import (
    CODEC_GZIP,
    CODEC_LZ4,
    CODEC_NONE,
    CODEC_SNAPPY,
    CODEC_ZSTD,
    HEADER_SIZE,
    KafkaRecord,
    RecordBatchError,
    decode_records,
    encode_batch,
    join_batches,
    parse_batches,
    parse_produced_batch,
    with_base_offset,
)

ALL_CODECS = [CODEC_NONE, CODEC_GZIP, CODEC_SNAPPY, CODEC_LZ4, CODEC_ZSTD]
T0 = 1_700_000_000_000


def sample(count: int = 50) -> list[KafkaRecord]:
    records = []
    for i in range(count):
        key = None if i % 7 == 0 else f"key-{i % 5}".encode()
        value = None if i % 11 == 3 else (b"v%d-" % i) * (i % 9 + 1)
        headers = [("h", b"x"), ("empty", None)] if i % 3 == 0 else []
        records.append(KafkaRecord(i, T0 + i * 3 - (5 if i == 4 else 0), key, value, headers))
    return records


def build(
    builder_cls: type, codec: int, records: list[KafkaRecord], *, pid: int = -1, seq: int = -1
) -> bytes:
    builder = builder_cls(
        magic=2,
        compression_type=codec,
        is_transactional=False,
        producer_id=pid,
        producer_epoch=0 if pid >= 0 else -1,
        base_sequence=seq,
        batch_size=2**30,
    )
    for record in records:
        builder.append(record.offset_delta, record.timestamp, record.key, record.value, record.headers)
    return bytes(builder.build())


def assert_same(decoded: list[KafkaRecord], expected: list[KafkaRecord]) -> None:
    assert [(r.offset_delta, r.timestamp, r.key, r.value, r.headers) for r in decoded] == [
        (r.offset_delta, r.timestamp, r.key, r.value, r.headers) for r in expected
    ]


@pytest.mark.parametrize("codec", ALL_CODECS)
def test_aiokafka_batches_of_every_codec_parse_and_decode(codec: int) -> None:
    records = sample()
    raw = build(AioBuilder, codec, records, pid=7, seq=100)
    header = parse_produced_batch(raw)
    assert (header.codec, header.records_count, header.last_offset_delta) == (codec, 50, 49)
    assert (header.producer_id, header.producer_epoch, header.base_sequence) == (7, 0, 100)
    assert header.last_sequence == 149 and header.length == len(raw)
    assert header.base_timestamp == T0 and header.max_timestamp == T0 + 49 * 3
    assert_same(decode_records(raw), records)


@pytest.mark.parametrize("codec", [CODEC_NONE, CODEC_GZIP])  # kafka-python's other codecs need more libraries
def test_kafka_python_batches_parse_and_decode(codec: int) -> None:
    records = sample(20)
    raw = build(KpBuilder, codec, records)
    header = parse_produced_batch(raw)
    assert header.codec == codec and header.producer_id == -1 and not header.is_transactional
    assert_same(decode_records(raw), records)


def test_encode_batch_is_read_back_by_the_clients_readers() -> None:
    records = sample(30)
    raw = encode_batch(1000, records, producer_id=5, producer_epoch=2, base_sequence=9)
    header = parse_produced_batch(raw)
    assert (header.base_offset, header.records_count, header.producer_id) == (1000, 30, 5)
    assert_same(decode_records(raw), records)
    for reader in (KpBatch(raw), AioBatch(raw)):
        assert reader.validate_crc()
        read = list(reader)
        assert [r.offset for r in read] == [1000 + r.offset_delta for r in records]
        assert [r.key for r in read] == [r.key for r in records]
        assert [r.value for r in read] == [r.value for r in records]
        assert [r.timestamp for r in read] == [r.timestamp for r in records]
        assert [list(r.headers) for r in read] == [r.headers for r in records]


def test_encode_batch_with_offset_gaps_is_a_valid_stored_batch() -> None:
    records = [KafkaRecord(d, T0 + d, b"k%d" % d, b"v") for d in (0, 3, 4, 10)]
    raw = encode_batch(50, records)
    (header,) = parse_batches(raw, from_client=False)
    assert (header.last_offset_delta, header.records_count, header.last_offset) == (10, 4, 60)
    assert [r.offset for r in KpBatch(raw)] == [50, 53, 54, 60]
    with pytest.raises(RecordBatchError) as err:  # a client may not send such a batch
        parse_batches(raw)
    assert err.value.code == ErrorCode.INVALID_RECORD
    with pytest.raises(ValueError):
        encode_batch(0, [KafkaRecord(2, T0, None, b""), KafkaRecord(2, T0, None, b"")])
    with pytest.raises(ValueError):
        encode_batch(0, [])


def test_base_offset_patch_keeps_the_crc_and_joins_batches() -> None:
    first = build(AioBuilder, CODEC_LZ4, sample(10))
    second = encode_batch(0, sample(5))
    patched = with_base_offset(first, 12345)
    assert len(patched) == len(first) and patched[8:] == first[8:]
    assert parse_batches(patched)[0].base_offset == 12345
    blob = join_batches([(100, first), (110, second)])
    headers = parse_batches(blob, from_client=False)
    assert [(h.position, h.base_offset, h.records_count) for h in headers] == [
        (0, 100, 10),
        (len(first), 110, 5),
    ]
    assert [r.offset for r in KpBatch(blob[len(first) :])] == [110, 111, 112, 113, 114]
    assert parse_batches(b"") == []


def test_log_append_time_batches_decode_with_the_max_timestamp() -> None:
    raw = bytearray(encode_batch(0, sample(3)))
    struct.pack_into(">h", raw, 21, 0x08)
    struct.pack_into(">I", raw, 17, crc32c(bytes(raw[21:])))
    assert {r.timestamp for r in decode_records(bytes(raw))} == {T0 + 6}


def corrupt(raw: bytes, at: int, fmt: str, value: int, *, fix_crc: bool = True) -> bytes:
    out = bytearray(raw)
    struct.pack_into(fmt, out, at, value)
    if fix_crc:
        struct.pack_into(">I", out, 17, crc32c(bytes(out[21:])))
    return bytes(out)


GOOD = encode_batch(0, [KafkaRecord(i, T0, None, b"x" * 10) for i in range(3)])
BAD_BATCHES = {
    "empty": (b"", ErrorCode.INVALID_RECORD),
    "truncated header": (GOOD[:10], ErrorCode.CORRUPT_MESSAGE),
    "truncated body": (GOOD[:-1], ErrorCode.CORRUPT_MESSAGE),
    "huge length": (corrupt(GOOD, 8, ">i", 2**31 - 1, fix_crc=False), ErrorCode.CORRUPT_MESSAGE),
    "length below the header": (corrupt(GOOD, 8, ">i", 10, fix_crc=False), ErrorCode.CORRUPT_MESSAGE),
    "negative length": (corrupt(GOOD, 8, ">i", -5, fix_crc=False), ErrorCode.CORRUPT_MESSAGE),
    "bad crc": (corrupt(GOOD, 17, ">I", 12345, fix_crc=False), ErrorCode.CORRUPT_MESSAGE),
    "flipped record byte": (GOOD[:-3] + bytes([GOOD[-3] ^ 1]) + GOOD[-2:], ErrorCode.CORRUPT_MESSAGE),
    "magic 1": (corrupt(GOOD, 16, ">b", 1, fix_crc=False), ErrorCode.INVALID_RECORD),
    "magic 3": (corrupt(GOOD, 16, ">b", 3, fix_crc=False), ErrorCode.INVALID_RECORD),
    "control batch": (corrupt(GOOD, 21, ">h", 0x20), ErrorCode.INVALID_RECORD),
    "log append time": (corrupt(GOOD, 21, ">h", 0x08), ErrorCode.INVALID_RECORD),
    "codec 5": (corrupt(GOOD, 21, ">h", 5), ErrorCode.UNSUPPORTED_COMPRESSION_TYPE),
    "count above the offset range": (corrupt(GOOD, 57, ">i", 4), ErrorCode.INVALID_RECORD),
    "count below the offset range": (corrupt(GOOD, 57, ">i", 2), ErrorCode.INVALID_RECORD),
    "zero records": (corrupt(corrupt(GOOD, 57, ">i", 0), 23, ">i", -1), ErrorCode.INVALID_RECORD),
    "negative offset delta": (corrupt(GOOD, 23, ">i", -3), ErrorCode.INVALID_RECORD),
    "producer id without sequence": (corrupt(GOOD, 43, ">q", 99), ErrorCode.INVALID_RECORD),
    "two batches": (GOOD + GOOD, ErrorCode.INVALID_RECORD),
    "trailing garbage": (GOOD + b"\x00" * 5, ErrorCode.CORRUPT_MESSAGE),
}


@pytest.mark.parametrize("name", list(BAD_BATCHES))
def test_bad_batches_get_the_kafka_error(name: str) -> None:
    raw, code = BAD_BATCHES[name]
    with pytest.raises(RecordBatchError) as err:
        parse_produced_batch(raw)
    assert err.value.code == code, str(err.value)


def test_none_records_is_no_batch() -> None:
    with pytest.raises(RecordBatchError) as err:
        parse_produced_batch(None)
    assert err.value.code == ErrorCode.INVALID_RECORD


UNDECODABLE = {
    "record length past the end": corrupt(GOOD, HEADER_SIZE, ">b", 0x7E),
    "record count too high": corrupt(corrupt(GOOD, 57, ">i", 4), 23, ">i", 3),
    "record count too low": corrupt(corrupt(GOOD, 57, ">i", 2), 23, ">i", 1),
    "garbage compressed stream": corrupt(corrupt(GOOD, 21, ">h", CODEC_GZIP), HEADER_SIZE, ">q", 7),
    "garbage zstd": corrupt(GOOD, 21, ">h", CODEC_ZSTD),
    "garbage lz4": corrupt(GOOD, 21, ">h", CODEC_LZ4),
    "garbage snappy": corrupt(GOOD, 21, ">h", CODEC_SNAPPY),
}


@pytest.mark.parametrize("name", list(UNDECODABLE))
def test_undecodable_records_are_corrupt(name: str) -> None:
    with pytest.raises(RecordBatchError) as err:
        decode_records(UNDECODABLE[name])
    assert err.value.code == ErrorCode.CORRUPT_MESSAGE, str(err.value)


@pytest.mark.parametrize("codec", [CODEC_GZIP, CODEC_SNAPPY, CODEC_LZ4, CODEC_ZSTD])
def test_decompression_is_bounded(codec: int) -> None:
    raw = build(AioBuilder, codec, [KafkaRecord(i, T0, None, bytes(100_000)) for i in range(20)])
    assert len(raw) < 200_000  # zeros compress well: about 2 MB inside
    assert len(decode_records(raw)) == 20
    with pytest.raises(RecordBatchError) as err:
        decode_records(raw, max_bytes=500_000)
    assert err.value.code == ErrorCode.CORRUPT_MESSAGE
