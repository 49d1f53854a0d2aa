"""What Spark tasks run on the executors: read ledger ranges from the bookies, decode, pre-aggregate.

This module imports no PySpark (only PyArrow, msgpack and Quire's bookie client), so executors
need nothing but the zip of Quire's packages the driver ships. Functions here are closed over
plain values (`TaskPlan`) and pickled to the executors with the job.

Read stage (`read_partition`, one task per few ledger ranges): each task reads its ranges in big
chunks through its own ledger client inside `asyncio.run` (`quire_spark.entries.entry_chunks`, the
Spark connector's tasks read ledgers the same way), decodes each entry with one msgpack
call, and keeps the newest message per key seen in its ranges (the map-side half of the
latest-per-key aggregation: ranges are read in id order, so the last one seen wins). Per message
that is a dict store; rows are encoded only for each task's survivors. Output rows (READ_SCHEMA):

    key        string   the message key; null for key-less messages and the task's stats row
    solo       string   null for keyed rows; unique per key-less message / stats row, so that
                        grouping by (key, solo) keeps them apart
    ledger, entry, batch_index   the message id (-1, -1, -1 for the stats row)
    deleted    bool     the key is deleted: its newest value is empty (a tombstone) and not
                        young enough to stay (TaskPlan.tombstones_after_ms); true for the stats
                        row. A tombstone that stays is a row like any other (not deleted)
    payload    binary   the message as one kind-1 row (msgpack), null for deleted keys and stats
    messages   int64    input messages this row accounts for: 0, or the task's total (stats row)

Pack stage (`pack_partition`, after the global sort by id): consecutive survivors are joined
into compacted entries without decoding them (kind-1 header + msgpack array header + rows), at
most `max_messages` rows and about `max_bytes` each. Output rows (PACK_SCHEMA): payload, count,
messages_in (non-zero only on each partition's last row).
"""

from __future__ import annotations

import asyncio
import json
import struct
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any, NamedTuple

import msgpack
import pyarrow as pa

from bookie.api import LedgerClient
from bookie.errors import NoSuchLedgerError
from bookie.ledgers import ledger_spec
from bookie.types import Segment
from compactor.config import HIDDEN_TOMBSTONE
from managed_ledger.entry_format import (
    KIND_COMPACTED,
    KIND_KAFKA,
    KIND_TOPIC,
    MAGIC,
    NO_OFFSET,
    VERSION,
    VERSION_1,
    body_start,
    decode_batch_header,
    entry_offsets,
    header,
)
from quire_spark.entries import entry_chunks

ClientFactory = Callable[[], LedgerClient]

RANGE_SCHEMA = pa.schema(
    [
        ("ledger_id", pa.int64()),
        ("ensemble", pa.string()),  # comma-separated host:port
        ("ensembles", pa.string()),  # JSON [[first_entry_id, [host:port, ...]], ...]
        ("write_quorum", pa.int32()),
        ("ack_quorum", pa.int32()),
        ("first_entry_id", pa.int64()),
        ("last_entry_id", pa.int64()),
        ("compacted", pa.bool_()),
        ("layer", pa.int32()),  # compacted ranges: 0 the base, i the i-th delta
        ("entries_per_read", pa.int64()),
    ]
)
READ_SCHEMA = pa.schema(
    [
        ("key", pa.string()),
        ("solo", pa.string()),
        ("ledger", pa.int64()),
        ("entry", pa.int64()),
        ("batch_index", pa.int32()),
        ("deleted", pa.bool_()),
        ("payload", pa.binary()),
        ("messages", pa.int64()),
    ]
)
PACK_SCHEMA = pa.schema([("payload", pa.binary()), ("count", pa.int64()), ("messages_in", pa.int64())])
# the same schemas as Spark DDL, for mapInArrow's return type
READ_DDL = (
    "key string, solo string, ledger long, entry long, batch_index int, deleted boolean, "
    "payload binary, messages long"
)
PACK_DDL = "payload binary, count long, messages_in long"
OUTPUT_ROWS_PER_BATCH = 8_192


@dataclass(frozen=True, slots=True)
class TaskPlan:
    """Plain values a task needs besides its ranges (pickled with the task's function)."""

    old_horizon: tuple[int, int, int] | None
    new_horizon: tuple[int, int, int] | None
    keep_keyless: bool
    client_factory: ClientFactory
    # tombstones published after this time (ms) stay in the view; None: none stays
    tombstones_after_ms: int | None = None


class _Latest:
    """The newest message per key among what one task read, plus key-less ones and a count."""

    def __init__(self, keep_keyless: bool) -> None:
        # (ledger, entry, batch_index, publish_time, producer, row, offset) per survivor, where
        # row = [key, value, properties, event_time, sequence_id]
        self.by_key: dict[str, tuple[int, int, int, int, Any, list[Any], int]] = {}
        self.keyless: list[tuple[int, int, int, int, Any, list[Any], int]] = []
        self.keep_keyless = keep_keyless
        self.messages = 0

    def add_topic_rows(
        self, lid: int, eid: int, pt: int, prod: Any, rows: list[Any], window: tuple[int, int], base: int
    ) -> None:
        """Rows lo..hi-1 of a topic batch (row = [key, value, properties, event_time, seq]) whose
        first message has Kafka offset `base` (NO_OFFSET: none)."""
        by_key = self.by_key
        lo, hi = window
        self.messages += hi - lo
        for i in range(lo, hi):
            row = rows[i]
            key = row[0]
            offset = base + i if base >= 0 else NO_OFFSET
            if key is None:
                if self.keep_keyless:
                    self.keyless.append((lid, eid, i, pt, prod, row, offset))
            else:
                by_key[key] = (lid, eid, i, pt, prod, row, offset)

    def add_compacted_rows(self, rows: list[Any], delta: bool = False) -> None:
        """Rows of a compacted batch: [ledger, entry, batch_index, publish_time, producer, key,
        value, properties, event_time, sequence_id, offset (absent in version 1)]. A `delta`
        layer's tombstones were never served: they take their keys and always go."""
        self.messages += len(rows)
        for r in rows:
            pt = HIDDEN_TOMBSTONE if delta and r[5] is not None and len(r[6]) == 0 else r[3]
            item = (r[0], r[1], r[2], pt, r[4], r[5:10], r[10] if len(r) > 10 else NO_OFFSET)
            if r[5] is None:
                if self.keep_keyless:
                    self.keyless.append(item)
            else:
                self.by_key[r[5]] = item


def _window(plan: TaskPlan, lid: int, eid: int, n: int) -> tuple[int, int]:
    """Rows of entry (lid, eid) inside (old, new horizon]; horizons fall on entry ends, but a
    plan never relies on it."""
    lo, hi = 0, n
    old, new = plan.old_horizon, plan.new_horizon
    if old is not None and (lid, eid) == (old[0], old[1]):
        lo = old[2] + 1
    if new is not None and (lid, eid) == (new[0], new[1]):
        hi = min(n, new[2] + 1)
    return lo, hi


class _ShippedLedger(NamedTuple):
    """The ledger placement of a RANGE_SCHEMA row (the driver copied it from the metadata)."""

    ledger_id: int
    ensemble: tuple[str, ...]
    write_quorum: int
    ack_quorum: int
    ensembles: tuple[Segment, ...]


async def _read_range(client: LedgerClient, plan: TaskPlan, r: dict[str, Any], latest: _Latest) -> None:
    spec = ledger_spec(
        _ShippedLedger(
            r["ledger_id"],
            tuple(r["ensemble"].split(",")),
            r["write_quorum"],
            r["ack_quorum"],
            tuple((int(f), tuple(b)) for f, b in json.loads(r["ensembles"])),
        )
    )
    lid, compacted, step = spec.ledger_id, r["compacted"], max(1, r["entries_per_read"])
    first, last = r["first_entry_id"], r["last_entry_id"]
    try:
        async for start, payloads in entry_chunks(client, spec, first, last, step):
            _decode_chunk(plan, lid, start, payloads, r, latest)
    except NoSuchLedgerError:
        if compacted:
            raise
        # trimmed by retention while we read: its data is gone from the view too


def _decode_chunk(
    plan: TaskPlan, lid: int, start: int, payloads: list[bytes], r: dict[str, Any], latest: _Latest
) -> None:
    unpackb = msgpack.unpackb
    for eid, payload in enumerate(payloads, start=start):
        if payload[0] != MAGIC or payload[1] not in (VERSION, VERSION_1):
            raise ValueError(f"entry {lid}:{eid} is not a Quire entry of version 1 or {VERSION}")
        offsets = entry_offsets(payload)
        if payload[2] == KIND_KAFKA:  # records decoded into topic batch rows
            pt, prod, rows = decode_batch_header(payload)
            base = offsets[0] if offsets is not None else NO_OFFSET
            latest.add_topic_rows(lid, eid, pt, prod, rows, _window(plan, lid, eid, len(rows)), base)
            continue
        body = unpackb(memoryview(payload)[body_start(payload) :], raw=False, strict_map_key=False)
        if payload[2] == KIND_TOPIC:
            window = _window(plan, lid, eid, len(body[2]))
            base = offsets[0] if offsets is not None else NO_OFFSET
            latest.add_topic_rows(lid, eid, body[0], body[1], body[2], window, base)
        elif payload[2] == KIND_COMPACTED:
            latest.add_compacted_rows(body, r.get("layer", 0) > 0)
        else:
            raise ValueError(f"entry {lid}:{eid} is of kind {payload[2]}, which compaction cannot read")


def _read_order(r: dict[str, Any]) -> tuple[bool, int, int, int]:
    return (not r["compacted"], r.get("layer", 0), r["ledger_id"], r["first_entry_id"])


async def _read_all(plan: TaskPlan, ranges: list[dict[str, Any]]) -> _Latest:
    latest = _Latest(plan.keep_keyless)
    client = plan.client_factory()
    try:
        # the view's layers first, base then deltas oldest first: each layer's ids are above the
        # older layers' and all below the topic's new messages, so "last seen wins" holds even
        # when a topic ledger's id is below a compacted ledger's
        for r in sorted(ranges, key=_read_order):
            await _read_range(client, plan, r, latest)
    finally:
        await client.close()
    return latest


def _rows(latest: _Latest, stats_solo: str, tombstones_after_ms: int | None) -> Iterator[tuple[Any, ...]]:
    """(key, solo, ledger, entry, batch_index, deleted, payload, messages) per output row."""
    packb = msgpack.packb
    yield (None, stats_solo, -1, -1, -1, True, None, latest.messages)
    for key, (lid, eid, i, pt, prod, row, off) in latest.by_key.items():
        if len(row[1]) == 0 and (tombstones_after_ms is None or pt <= tombstones_after_ms):
            yield (key, None, lid, eid, i, True, None, 0)
        else:
            packed = packb([lid, eid, i, pt, prod, *row, off], use_bin_type=True)
            yield (key, None, lid, eid, i, False, packed, 0)
    for lid, eid, i, pt, prod, row, off in latest.keyless:
        payload = packb([lid, eid, i, pt, prod, *row, off], use_bin_type=True)
        yield (None, f"{lid}:{eid}:{i}", lid, eid, i, False, payload, 0)


def _batches(rows: Iterator[tuple[Any, ...]], schema: pa.Schema) -> Iterator[pa.RecordBatch]:
    chunk: list[tuple[Any, ...]] = []
    for row in rows:
        chunk.append(row)
        if len(chunk) >= OUTPUT_ROWS_PER_BATCH:
            yield _to_batch(chunk, schema)
            chunk = []
    if chunk:
        yield _to_batch(chunk, schema)


def _to_batch(rows: list[tuple[Any, ...]], schema: pa.Schema) -> pa.RecordBatch:
    columns = list(zip(*rows, strict=True))
    return pa.RecordBatch.from_arrays(
        [pa.array(col, type=f.type) for col, f in zip(columns, schema, strict=True)], schema=schema
    )


def read_partition(
    plan: TaskPlan, pieces: list[dict[str, Any]]
) -> Callable[[Iterator[pa.RecordBatch]], Iterator[pa.RecordBatch]]:
    """The read stage's function for `mapInArrow` over `spark.range(len(pieces))`: each input
    row's `id` picks the piece (a RANGE_SCHEMA dict) to read. Output: READ_SCHEMA."""

    def run(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        ranges = [pieces[i] for b in batches for i in b.column("id").to_pylist()]
        if not ranges:
            return
        latest = asyncio.run(_read_all(plan, ranges))
        first = min(ranges, key=lambda r: (r["ledger_id"], r["first_entry_id"]))
        stats_solo = f"stats:{first['ledger_id']}:{first['first_entry_id']}"  # ranges never overlap
        yield from _batches(_rows(latest, stats_solo, plan.tombstones_after_ms), READ_SCHEMA)

    return run


def array_header(n: int) -> bytes:
    """MessagePack array header for n items (fixarray, array 16 or array 32)."""
    if n < 16:
        return bytes((0x90 | n,))
    if n < 1 << 16:
        return b"\xdc" + struct.pack(">H", n)
    return b"\xdd" + struct.pack(">I", n)


def _packed(
    rows: Iterator[tuple[bytes | None, bool, int]], max_messages: int, max_bytes: int
) -> Iterator[tuple[bytes | None, int, int]]:
    """PACK rows from (payload, deleted, messages) rows in id order: consecutive survivors
    joined into compacted entries, then one last row carrying the messages-in count."""
    batch: list[bytes] = []
    size = messages_in = 0
    for payload, deleted, n in rows:
        messages_in += n
        if deleted or payload is None:
            continue
        if batch and (len(batch) >= max_messages or size + len(payload) > max_bytes):
            yield (_compacted_entry(batch), len(batch), 0)
            batch, size = [], 0
        batch.append(payload)
        size += len(payload)
    if batch:
        yield (_compacted_entry(batch), len(batch), 0)
    yield (None, 0, messages_in)


def _compacted_entry(rows: list[bytes]) -> bytes:
    """A kind-1 entry from rows packed one by one (no decode, no re-encode)."""
    return header(KIND_COMPACTED, len(rows)) + array_header(len(rows)) + b"".join(rows)


def _in_groups(rows: Iterator[tuple[Any, ...]], n: int) -> Iterator[pa.RecordBatch]:
    """PACK_SCHEMA record batches of n rows (packed entries are big: a few per batch)."""
    out: list[tuple[Any, ...]] = []
    for row in rows:
        out.append(row)
        if len(out) >= n:
            yield _to_batch(out, PACK_SCHEMA)
            out = []
    if out:
        yield _to_batch(out, PACK_SCHEMA)


def pack_partition(
    max_messages: int, max_bytes: int
) -> Callable[[Iterator[pa.RecordBatch]], Iterator[pa.RecordBatch]]:
    """The pack stage's function for `mapInArrow` (sorted survivors -> PACK_SCHEMA)."""

    def rows(batches: Iterator[pa.RecordBatch]) -> Iterator[tuple[bytes | None, bool, int]]:
        for b in batches:
            yield from zip(
                b.column("payload").to_pylist(),
                b.column("deleted").to_pylist(),
                b.column("messages").to_pylist(),
                strict=True,
            )

    def run(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        yield from _in_groups(_packed(rows(batches), max_messages, max_bytes), 4)

    return run


def compact_partition(
    plan: TaskPlan, pieces: list[dict[str, Any]], max_messages: int, max_bytes: int
) -> Callable[[Iterator[pa.RecordBatch]], Iterator[pa.RecordBatch]]:
    """The whole job in one task, for small inputs (`mapInArrow` over `spark.range(1)`, one
    partition, so one Spark stage and no shuffle): read every piece, keep the newest message per
    key (as the read stage does), sort the survivors by id and pack them. Output: PACK_SCHEMA.

    The task holds what one read task holds plus its survivors' encoded rows, both bounded by the
    input, which the engine caps (CompactorConfig.single_task_max_bytes); the driver still
    receives packed entries only."""

    def run(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for b in batches:
            b.column("id")  # the one input row only says "run"
        latest = asyncio.run(_read_all(plan, pieces))
        rows = sorted(
            (r for r in _rows(latest, "stats", plan.tombstones_after_ms) if not r[5] or r[7]),
            key=lambda r: (r[2], r[3], r[4]),  # the stats row has id -1:-1:-1, first
        )
        survivors = ((r[6], r[5], r[7]) for r in rows)
        yield from _in_groups(_packed(survivors, max_messages, max_bytes), 4)

    return run
