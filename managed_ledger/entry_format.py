"""The format of an entry's payload: a batch of messages.

Every entry a topic writes holds one produce batch (one message or many, stored atomically).
Compacted ledgers hold batches of surviving messages, each with its original message id.

Byte layout, version 2 (written since the Kafka listener; version 1 is still read):

    offset 0   1 byte   magic 0x51 ('Q')
    offset 1   1 byte   format version (2)
    offset 2   1 byte   kind: 0 = topic batch, 1 = compacted batch, 2 = Kafka record batch
    offset 3   8 bytes  base offset, int64 big-endian: the Kafka offset of the entry's first
                        message, stamped by the managed ledger as it appends the entry (-1 until
                        then, and always in compacted entries, whose rows carry their own)
    offset 11  4 bytes  message count, uint32 big-endian (the entry's next base offset is
                        base offset + count)
    offset 15  ...      the body

Version 1 is the same without the offset and count: the body starts at offset 3. Its entries
have no Kafka offset (the managed ledger counts them but cannot find them by offset later).

    kind 0 body: [publish_time_ms, producer_name | nil, [message, ...]] or, when the entry has
                 entry-level fields, [publish_time_ms, producer_name | nil, [message, ...], extras]
        message: [key | nil, value (bin), properties (map str->str) | nil,
                  event_time_ms | nil, sequence_id | nil]
        The message at list index i has batch_index i; its id is ledger:entry:i.
        extras: a map of what a Pulsar SEND's MessageMetadata holds for the whole entry:
                "ordering_key" (bin), "deliver_at" (ms). Readers that know only the first three
                elements (the compactor, the Spark connector) read the entry as before.

    kind 1 body: [[ledger_id, entry_id, batch_index, publish_time_ms, producer_name | nil,
                   key | nil, value (bin), properties | nil, event_time_ms | nil,
                   sequence_id | nil, offset], ...]   (in message-id order; offset is the
                   message's Kafka offset, -1 when its entry had none; absent in version 1)

    kind 2 body: publish_time_ms (int64 big-endian), then one Kafka record batch (magic 2)
                 exactly as the producer sent it; its own base offset field is not trusted
                 (the header's is) and is patched on the way out to Kafka consumers.

The bookie checksums the whole payload (CRC32C), so this format carries no checksum of its own.
An empty value is a tombstone for compaction.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

import msgpack

from common.errors import ErrorKind, QuireError
from managed_ledger.position import MessageId

MAGIC = 0x51
VERSION = 2
VERSION_1 = 1
KIND_TOPIC = 0
KIND_COMPACTED = 1
KIND_KAFKA = 2
NO_OFFSET = -1
_HEADER = struct.Struct(">BBBqI")
HEADER_SIZE = _HEADER.size  # 15: the body's offset in a version 2 entry
_OFFSET = struct.Struct(">q")
_COUNT = struct.Struct(">I")


def header(kind: int, count: int) -> bytes:
    """A version 2 header with no offset yet (the managed ledger stamps it)."""
    return _HEADER.pack(MAGIC, VERSION, kind, NO_OFFSET, count)


def body_start(payload: bytes) -> int:
    """Where the body starts: 15 in a version 2 entry, 3 in a version 1 entry."""
    return HEADER_SIZE if payload[1] == VERSION else 3


class EntryFormatError(QuireError, ValueError):
    """The payload is not an entry of a known format and version.

    Payloads decoded here were read from storage, not sent by the caller, so a failure is
    damaged or foreign data on our side: internal, never the caller's bad input."""

    kind = ErrorKind.internal


@dataclass(frozen=True, slots=True)
class Message:
    """One message as stored (without its id, which comes from where it is stored)."""

    value: bytes
    key: str | None = None
    properties: Mapping[str, str] | None = None
    event_time: int | None = None
    sequence_id: int | None = None
    # The entry's, not this message's (Pulsar's MessageMetadata: one per SEND, a batch's first
    # message's): taken from the first message of a produce batch.
    ordering_key: bytes | None = None
    deliver_at: int | None = None  # ms: not dispatched to shared and key_shared before


@dataclass(frozen=True, slots=True)
class StoredMessage:
    """A message read back, with its id and the batch-level fields."""

    message_id: MessageId
    value: bytes
    key: str | None
    properties: Mapping[str, str] | None
    event_time: int | None
    sequence_id: int | None
    publish_time: int
    producer_name: str | None = field(default=None)
    # The message's Kafka offset; None when its entry has none (version 1, or not stamped)
    offset: int | None = field(default=None)
    # The entry-level fields below are for dispatch; compaction does not keep them (a compacted
    # view's survivors have none), so they take no part in a message's equality.
    # The key its whole entry goes by on key_shared when entries go whole (a Pulsar batch):
    # the entry's ordering key, else its first message's key ("" for none). None: not known
    # (a compacted entry's survivors): the message's own key.
    entry_key: str | None = field(default=None, compare=False)
    ordering_key: bytes | None = field(default=None, compare=False)  # the entry's (a Pulsar SEND's)
    deliver_at: int | None = field(default=None, compare=False)  # the entry's delivery time (ms)


def encode_batch(publish_time: int, producer_name: str | None, messages: Iterable[Message]) -> bytes:
    messages = list(messages)
    rows: list[list[object]] = [
        [m.key, m.value, m.properties or None, m.event_time, m.sequence_id] for m in messages
    ]
    extras = entry_extras(messages[0]) if messages else None
    return encode_batch_raw(publish_time, producer_name, rows, extras)


def entry_extras(first: Message) -> dict[str, object] | None:
    """The entry-level fields a batch takes from its first message (None: none)."""
    if first.ordering_key is None and first.deliver_at is None:
        return None
    extras: dict[str, object] = {}
    if first.ordering_key is not None:
        extras["ordering_key"] = first.ordering_key
    if first.deliver_at is not None:
        extras["deliver_at"] = first.deliver_at
    return extras


def encode_batch_raw(
    publish_time: int,
    producer_name: str | None,
    rows: list[list[object]],
    extras: dict[str, object] | None = None,
) -> bytes:
    """Encode rows already shaped [key, value, properties, event_time, sequence_id] (hot path)."""
    body: list[object] = [publish_time, producer_name, rows]
    if extras:
        body.append(extras)
    return header(KIND_TOPIC, len(rows)) + msgpack.packb(body, use_bin_type=True)


def encode_kafka(publish_time: int, batch: bytes, count: int) -> bytes:
    """A kind 2 entry: one Kafka record batch of `count` records, stored as it came."""
    return header(KIND_KAFKA, count) + _OFFSET.pack(publish_time) + batch


def _check_header(payload: bytes) -> int:
    """The entry's version, after checking magic and length."""
    if len(payload) < 3 or payload[0] != MAGIC:
        raise EntryFormatError("not a Quire entry (bad magic)")
    version = payload[1]
    if version == VERSION:
        if len(payload) < HEADER_SIZE:
            raise EntryFormatError("truncated entry header")
    elif version != VERSION_1:
        raise EntryFormatError(f"unsupported entry format version {version}")
    return version


def _body(payload: bytes, kind: int) -> Any:
    version = _check_header(payload)
    if payload[2] != kind:
        raise EntryFormatError(f"entry kind {payload[2]}, expected {kind}")
    try:
        start = HEADER_SIZE if version == VERSION else 3
        return msgpack.unpackb(memoryview(payload)[start:], raw=False, strict_map_key=False)
    except Exception as exc:  # msgpack raises several unrelated types
        raise EntryFormatError(f"undecodable entry body: {exc}") from exc


def entry_kind(payload: bytes) -> int:
    _check_header(payload)
    return payload[2]


def entry_offsets(payload: bytes) -> tuple[int, int] | None:
    """(base offset, message count) of a version 2 entry; None for anything else (a version 1
    entry, or a payload that is not a Quire entry at all, as the managed ledger's own tests
    append). The base offset is -1 until the managed ledger stamps it."""
    if len(payload) < HEADER_SIZE or payload[0] != MAGIC or payload[1] != VERSION:
        return None
    return _OFFSET.unpack_from(payload, 3)[0], _COUNT.unpack_from(payload, 11)[0]


def stamp_offset(payload: bytes, base_offset: int) -> bytes:
    """The entry with its base offset set (one copy: the bytes are immutable). Payloads without
    a version 2 header are returned as they are."""
    if len(payload) < HEADER_SIZE or payload[0] != MAGIC or payload[1] != VERSION:
        return payload
    return b"".join((payload[:3], _OFFSET.pack(base_offset), memoryview(payload)[11:]))


def decode_batch_header(payload: bytes) -> tuple[int, str | None, list[list[Any]]]:
    """Return (publish_time, producer_name, rows) of a topic batch, rows as encoded; a Kafka
    batch's records come as the same rows (kafka_rows)."""
    publish_time, producer_name, rows, _ = decode_batch_extras(payload)
    return publish_time, producer_name, rows


# --- kind 2: a Kafka record batch (field positions: the record batch v2 layout) ------------------
_KAFKA_AT = HEADER_SIZE + 8  # the batch after the publish time
_KAFKA_PRODUCER = struct.Struct(">qhi")  # producerId, producerEpoch, baseSequence at batch byte 43
_KAFKA_HEADER_BYTES = 61


def _kafka_checked(payload: bytes) -> None:
    if len(payload) < _KAFKA_AT + _KAFKA_HEADER_BYTES or payload[1] != VERSION:
        raise EntryFormatError("truncated Kafka entry")


def kafka_batch(payload: bytes) -> memoryview:
    """The record batch of a kind 2 entry, as the producer sent it."""
    _kafka_checked(payload)
    return memoryview(payload)[_KAFKA_AT:]


def kafka_publish_time(payload: bytes) -> int:
    _kafka_checked(payload)
    value: int = _OFFSET.unpack_from(payload, HEADER_SIZE)[0]
    return value


def kafka_producer(payload: bytes) -> tuple[str | None, int | None]:
    """(dedup producer name, the batch's last sequence) of an idempotent producer's batch,
    (None, None) for others. The name carries the epoch: a new epoch starts its sequences at 0."""
    _kafka_checked(payload)
    producer_id, epoch, base_sequence = _KAFKA_PRODUCER.unpack_from(payload, _KAFKA_AT + 43)
    if producer_id < 0 or base_sequence < 0:
        return None, None
    count: int = _COUNT.unpack_from(payload, 11)[0]
    return f"kafka-{producer_id}-{epoch}", base_sequence + count - 1


# Kafka keys and header values are bytes; Quire's view of a message (REST, compaction, Key_Shared)
# has text keys and properties. `text_of` maps bytes to text one to one: UTF-8 as it is, anything
# else (and UTF-8 that happens to begin with the mark) as the mark and the bytes in hex. So two
# distinct binary keys stay two keys through compaction, and `bytes_of` gives the bytes back.
BINARY_MARK = "\U000f0000"  # a private-use character (plane 15): no text key begins with it


def text_of(raw: bytes) -> str:
    """Text for Kafka bytes: the UTF-8 itself, or BINARY_MARK + hex (one to one)."""
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        return BINARY_MARK + raw.hex()
    return BINARY_MARK + raw.hex() if text.startswith(BINARY_MARK) else text


def bytes_of(text: str) -> bytes:
    """The bytes `text_of` was given; text from elsewhere (REST) as UTF-8."""
    if text.startswith(BINARY_MARK):
        try:
            return bytes.fromhex(text[len(BINARY_MARK) :])
        except ValueError:
            pass  # not text_of's: a REST key that begins with the mark
    return text.encode()


def kafka_rows(payload: bytes) -> list[list[Any]]:
    """The records of a kind 2 entry as topic batch rows [key, value, properties, event_time,
    sequence_id]: keys and header values as text by `text_of` (in this view only: Kafka
    consumers get the batch as stored), a null value as empty (a tombstone), the record's
    timestamp as its event time."""
    from common.kafka_records import decode_records

    _kafka_checked(payload)
    try:
        records = decode_records(bytes(kafka_batch(payload)))
    except ValueError as exc:
        raise EntryFormatError(f"undecodable Kafka batch: {exc}") from exc
    _, last = kafka_producer(payload)
    first = None if last is None else last - len(records) + 1
    return [
        [
            None if r.key is None else text_of(r.key),
            r.value or b"",
            {k: text_of(v or b"") for k, v in r.headers} or None,
            r.timestamp,
            None if first is None else first + i,
        ]
        for i, r in enumerate(records)
    ]


def decode_batch_extras(payload: bytes) -> tuple[int, str | None, list[list[Any]], dict[str, Any]]:
    """decode_batch_header's and the entry-level fields (empty for entries without)."""
    if len(payload) > 2 and payload[2] == KIND_KAFKA and payload[0] == MAGIC:
        return kafka_publish_time(payload), kafka_producer(payload)[0], kafka_rows(payload), {}
    body: list[Any] = _body(payload, KIND_TOPIC)
    extras = body[3] if len(body) > 3 and isinstance(body[3], dict) else {}
    return body[0], body[1], body[2], extras


def decode_batch(ledger_id: int, entry_id: int, payload: bytes) -> list[StoredMessage]:
    publish_time, producer_name, rows, extras = decode_batch_extras(payload)
    offsets = entry_offsets(payload)
    base = offsets[0] if offsets is not None and offsets[0] >= 0 else None
    ordering_key = extras.get("ordering_key")
    if isinstance(ordering_key, bytes):
        entry_key: str | None = text_of(ordering_key)
    else:
        ordering_key, entry_key = None, (rows[0][0] if rows else None) or ""
    deliver_at = extras.get("deliver_at")
    if not isinstance(deliver_at, int):
        deliver_at = None
    out = []
    for i, row in enumerate(rows):
        key, value, props, event_time, seq = row
        out.append(
            StoredMessage(
                MessageId(ledger_id, entry_id, i),
                value,
                key,
                props,
                event_time,
                seq,
                publish_time,
                producer_name,
                None if base is None else base + i,
                entry_key,
                ordering_key,
                deliver_at,
            )
        )
    return out


def encode_compacted(messages: Iterable[StoredMessage]) -> bytes:
    rows = [
        [
            m.message_id.ledger_id,
            m.message_id.entry_id,
            m.message_id.batch_index,
            m.publish_time,
            m.producer_name,
            m.key,
            m.value,
            m.properties or None,
            m.event_time,
            m.sequence_id,
            NO_OFFSET if m.offset is None else m.offset,
        ]
        for m in messages
    ]
    return header(KIND_COMPACTED, len(rows)) + msgpack.packb(rows, use_bin_type=True)


def decode_compacted(payload: bytes) -> list[StoredMessage]:
    rows = _body(payload, KIND_COMPACTED)
    out = []
    for r in rows:
        lid, eid, bidx, pt, prod, key, value, props, et, seq = r[:10]
        offset = r[10] if len(r) > 10 and r[10] >= 0 else None
        out.append(StoredMessage(MessageId(lid, eid, bidx), value, key, props, et, seq, pt, prod, offset))
    return out


def iter_messages(ledger_id: int, entry_id: int, payload: bytes) -> Iterator[StoredMessage]:
    """Messages of either kind of entry, in id order."""
    if entry_kind(payload) == KIND_COMPACTED:
        yield from decode_compacted(payload)
    else:
        yield from decode_batch(ledger_id, entry_id, payload)


def batch_publish_time(payload: bytes) -> int:
    """The publish time of a topic batch (used to reset cursors by time)."""
    if len(payload) > 2 and payload[2] == KIND_KAFKA and payload[0] == MAGIC:
        return kafka_publish_time(payload)
    return decode_batch_header(payload)[0]


def batch_sequence(payload: bytes) -> tuple[str | None, int | None]:
    """(producer_name, highest sequence id) of a topic batch, for rebuilding dedup state."""
    if len(payload) > 2 and payload[2] == KIND_KAFKA and payload[0] == MAGIC:
        return kafka_producer(payload)
    _, producer, rows = decode_batch_header(payload)
    seqs: list[int] = [r[4] for r in rows if r[4] is not None]
    return producer, (max(seqs) if seqs else None)
