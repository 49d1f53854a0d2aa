"""Pulsar messages to Quire messages and back.

A SEND carries one message, or a batch: one `MessageMetadata` for the batch and a payload of
`[u32 size][SingleMessageMetadata][bytes]` per message, compressed as a whole (LZ4 raw block,
zlib, zstd frame, raw snappy) when the metadata says so. Each becomes one Quire `Message`:
partition key -> key, properties, event time, sequence id, value; the whole SEND is published as
one produce batch, so it is one entry and message i of the batch keeps batch index i
(`ledger:entry:i`, the Pulsar id). Pulsar's null value has no Quire counterpart: it is stored as
an empty value (a tombstone for compaction, as Pulsar's compactor also reads it).

On the way out an entry's messages become a MESSAGE: a message alone in its entry (batch index
0 and nothing else of the entry in hand) is sent as a plain message, whose Pulsar id has batch
index -1; otherwise a batch of `max batch index + 1` members in which the members not handed to
this consumer are placeholders masked out by the MESSAGE's `ack_set` (a 1 bit: deliver), as
Pulsar redelivers the rest of a partly acked batch.
"""

from __future__ import annotations

import struct
import zlib
from collections.abc import Sequence

import cramjam

from managed_ledger.entry_format import Message, StoredMessage

from .errors import PulsarFrameError
from .proto import pulsar_api_pb2 as pb

_U32 = struct.Struct(">I")
MAX_BATCH_MESSAGES = 100_000


def decompress(metadata: pb.MessageMetadata, body: bytes) -> bytes:
    codec = metadata.compression
    if codec == pb.NONE:
        return body
    size = metadata.uncompressed_size
    try:
        if codec == pb.LZ4:
            out = bytes(cramjam.lz4.decompress_block(body, output_len=size))
        elif codec == pb.ZLIB:
            out = zlib.decompress(body)
        elif codec == pb.ZSTD:
            out = bytes(cramjam.zstd.decompress(body))
        elif codec == pb.SNAPPY:
            out = bytes(cramjam.snappy.decompress_raw(body))
        else:
            raise PulsarFrameError(f"unknown compression {codec}")
    except (cramjam.DecompressionError, zlib.error, ValueError) as exc:
        raise PulsarFrameError(
            f"payload does not decompress ({pb.CompressionType.Name(codec)}): {exc}"
        ) from exc
    if len(out) != size:
        raise PulsarFrameError(f"payload decompressed to {len(out)} bytes, metadata says {size}")
    return out


def _properties(items: Sequence[pb.KeyValue]) -> dict[str, str] | None:
    return {kv.key: kv.value for kv in items} or None


def to_messages(metadata: pb.MessageMetadata, body: bytes) -> list[Message]:
    """The Quire messages of one SEND (PulsarFrameError when its batch does not parse)."""
    body = decompress(metadata, body)
    if not metadata.HasField("num_messages_in_batch"):
        return [
            Message(
                value=b"" if metadata.null_value else body,
                key=metadata.partition_key if metadata.HasField("partition_key") else None,
                properties=_properties(metadata.properties),
                event_time=metadata.event_time or None,
                sequence_id=metadata.sequence_id,
                ordering_key=_ordering_key(metadata),
                deliver_at=_deliver_at(metadata),
            )
        ]
    count = metadata.num_messages_in_batch
    if not 0 < count <= MAX_BATCH_MESSAGES:
        raise PulsarFrameError(f"batch of {count} messages")
    return _batch(metadata, memoryview(body), count)


def _ordering_key(metadata: pb.MessageMetadata) -> bytes | None:
    """The SEND's ordering key (a batch's: its first message's), kept for the whole entry."""
    return metadata.ordering_key if metadata.HasField("ordering_key") else None


def _deliver_at(metadata: pb.MessageMetadata) -> int | None:
    """The SEND's delayed delivery time (ms; the client never batches a delayed message)."""
    return metadata.deliver_at_time if metadata.HasField("deliver_at_time") else None


def _batch(metadata: pb.MessageMetadata, view: memoryview, count: int) -> list[Message]:
    out: list[Message] = []
    ordering_key, deliver_at = _ordering_key(metadata), _deliver_at(metadata)
    at = 0
    for i in range(count):
        if at + 4 > len(view):
            raise PulsarFrameError(f"batch cut short at message {i} of {count}")
        (size,) = _U32.unpack_from(view, at)
        single = pb.SingleMessageMetadata()
        try:
            single.ParseFromString(bytes(view[at + 4 : at + 4 + size]))
        except Exception as exc:
            raise PulsarFrameError(f"batch message {i}: metadata does not decode") from exc
        at += 4 + size
        end = at + single.payload_size
        if not single.HasField("payload_size") or single.payload_size < 0 or end > len(view):
            raise PulsarFrameError(f"batch message {i}: payload size past the batch")
        out.append(
            Message(
                value=b"" if single.null_value else bytes(view[at:end]),
                key=single.partition_key if single.HasField("partition_key") else None,
                properties=_properties(single.properties),
                event_time=single.event_time or None,
                sequence_id=single.sequence_id
                if single.HasField("sequence_id")
                else metadata.sequence_id + i,
                ordering_key=ordering_key,
                deliver_at=deliver_at,
            )
        )
        at = end
    return out


def _kv(properties: object) -> list[pb.KeyValue]:
    if not properties:
        return []
    assert isinstance(properties, dict) or hasattr(properties, "items")
    return [pb.KeyValue(key=k, value=v) for k, v in properties.items()]  # type: ignore[attr-defined]


def _metadata(first: StoredMessage) -> pb.MessageMetadata:
    metadata = pb.MessageMetadata(
        producer_name=first.producer_name or "",
        sequence_id=max(first.sequence_id or 0, 0),
        publish_time=first.publish_time,
    )
    if first.ordering_key is not None:
        metadata.ordering_key = first.ordering_key
    if first.deliver_at is not None:
        metadata.deliver_at_time = first.deliver_at
    return metadata


def encode_single(message: StoredMessage) -> tuple[bytes, bytes]:
    """(metadata, payload) of a message sent alone."""
    metadata = _metadata(message)
    metadata.properties.extend(_kv(message.properties))
    if message.key is not None:
        metadata.partition_key = message.key
    if message.event_time:
        metadata.event_time = message.event_time
    return metadata.SerializeToString(), message.value


def encode_batch(messages: Sequence[StoredMessage]) -> tuple[bytes, bytes, list[int]]:
    """(metadata, payload, ack_set) of one entry's messages (batch indexes ascending) as a
    batch of max index + 1 members; ack_set has a 1 bit for each member sent."""
    size = messages[-1].message_id.batch_index + 1
    by_index = {m.message_id.batch_index: m for m in messages}
    parts: list[bytes] = []
    for i in range(size):
        m = by_index.get(i)
        single = pb.SingleMessageMetadata(payload_size=0 if m is None else len(m.value))
        if m is not None:
            single.properties.extend(_kv(m.properties))
            if m.key is not None:
                single.partition_key = m.key
            if m.ordering_key is not None:
                single.ordering_key = m.ordering_key
            if m.event_time:
                single.event_time = m.event_time
            if m.sequence_id is not None and m.sequence_id >= 0:
                single.sequence_id = m.sequence_id
        data = single.SerializeToString()
        parts += (_U32.pack(len(data)), data, b"" if m is None else m.value)
    metadata = _metadata(messages[0])
    metadata.num_messages_in_batch = size
    words = [0] * ((size + 63) // 64)
    for i in by_index:
        words[i // 64] |= 1 << (i % 64)
    ack_set = [w - (1 << 64) if w >= 1 << 63 else w for w in words]  # int64 words, as Java's BitSet
    return metadata.SerializeToString(), b"".join(parts), ack_set
