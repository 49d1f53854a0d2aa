"""The format of an entry's payload: a batch of messages.

Every entry a topic writes holds one produce batch (one message or many, stored atomically).
Compacted ledgers hold batches of surviving messages, each with its original message id.

Byte layout, version 1:

    offset 0  1 byte   magic 0x51 ('Q')
    offset 1  1 byte   format version (1)
    offset 2  1 byte   kind: 0 = topic batch, 1 = compacted batch
    offset 3  ...      MessagePack body

    kind 0 body: [publish_time_ms, producer_name | nil, [message, ...]]
        message: [key | nil, value (bin), properties (map str->str) | nil,
                  event_time_ms | nil, sequence_id | nil]
        The message at list index i has batch_index i; its id is ledger:entry:i.

    kind 1 body: [[ledger_id, entry_id, batch_index, publish_time_ms, producer_name | nil,
                   key | nil, value (bin), properties | nil, event_time_ms | nil,
                   sequence_id | nil], ...]   (in message-id order)

The bookie checksums the whole payload (CRC32C), so this format carries no checksum of its own.
An empty value is a tombstone for compaction.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

import msgpack

from common.errors import ErrorKind, QuireError
from managed_ledger.position import MessageId

MAGIC = 0x51
VERSION = 1
KIND_TOPIC = 0
KIND_COMPACTED = 1
_HEADER_TOPIC = bytes((MAGIC, VERSION, KIND_TOPIC))
_HEADER_COMPACTED = bytes((MAGIC, VERSION, KIND_COMPACTED))


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


def encode_batch(publish_time: int, producer_name: str | None, messages: Iterable[Message]) -> bytes:
    body = [
        publish_time,
        producer_name,
        [[m.key, m.value, m.properties or None, m.event_time, m.sequence_id] for m in messages],
    ]
    return _HEADER_TOPIC + msgpack.packb(body, use_bin_type=True)


def encode_batch_raw(publish_time: int, producer_name: str | None, rows: list[list[object]]) -> bytes:
    """Encode rows already shaped [key, value, properties, event_time, sequence_id] (hot path)."""
    return _HEADER_TOPIC + msgpack.packb([publish_time, producer_name, rows], use_bin_type=True)


def _body(payload: bytes, kind: int) -> Any:
    if len(payload) < 3 or payload[0] != MAGIC:
        raise EntryFormatError("not a Quire entry (bad magic)")
    if payload[1] != VERSION:
        raise EntryFormatError(f"unsupported entry format version {payload[1]}")
    if payload[2] != kind:
        raise EntryFormatError(f"entry kind {payload[2]}, expected {kind}")
    try:
        return msgpack.unpackb(memoryview(payload)[3:], raw=False, strict_map_key=False)
    except Exception as exc:  # msgpack raises several unrelated types
        raise EntryFormatError(f"undecodable entry body: {exc}") from exc


def entry_kind(payload: bytes) -> int:
    if len(payload) < 3 or payload[0] != MAGIC:
        raise EntryFormatError("not a Quire entry (bad magic)")
    return payload[2]


def decode_batch_header(payload: bytes) -> tuple[int, str | None, list[list[Any]]]:
    """Return (publish_time, producer_name, rows) of a topic batch, rows as encoded."""
    body: list[Any] = _body(payload, KIND_TOPIC)
    return body[0], body[1], body[2]


def decode_batch(ledger_id: int, entry_id: int, payload: bytes) -> list[StoredMessage]:
    publish_time, producer_name, rows = decode_batch_header(payload)
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
        ]
        for m in messages
    ]
    return _HEADER_COMPACTED + msgpack.packb(rows, use_bin_type=True)


def decode_compacted(payload: bytes) -> list[StoredMessage]:
    rows = _body(payload, KIND_COMPACTED)
    out = []
    for r in rows:
        lid, eid, bidx, pt, prod, key, value, props, et, seq = r
        out.append(StoredMessage(MessageId(lid, eid, bidx), value, key, props, et, seq, pt, prod))
    return out


def iter_messages(ledger_id: int, entry_id: int, payload: bytes) -> Iterator[StoredMessage]:
    """Messages of either kind of entry, in id order."""
    if entry_kind(payload) == KIND_COMPACTED:
        yield from decode_compacted(payload)
    else:
        yield from decode_batch(ledger_id, entry_id, payload)


def batch_publish_time(payload: bytes) -> int:
    """The publish time of a topic batch (used to reset cursors by time)."""
    return decode_batch_header(payload)[0]


def batch_sequence(payload: bytes) -> tuple[str | None, int | None]:
    """(producer_name, highest sequence id) of a topic batch, for rebuilding dedup state."""
    _, producer, rows = decode_batch_header(payload)
    seqs: list[int] = [r[4] for r in rows if r[4] is not None]
    return producer, (max(seqs) if seqs else None)
