"""How a Spark task reads: a ledger range straight from the bookies, or the compacted view.

Imports no PySpark: an executor needs PyArrow, msgpack, httpx and Quire's bookie client and
entry format (`bookie`, `managed_ledger.entry_format`, `common`), none of which needs the
broker's server dependencies. A range is read in chunks through one ledger client inside
`asyncio.run`, the next chunk asked for before the current one is decoded, and each chunk
becomes one Arrow record batch of ROW_SCHEMA.
"""

from __future__ import annotations

import asyncio
import base64
import logging
from collections.abc import AsyncGenerator, Iterator
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from bookie.auth import ClientSecurity
from bookie.client import BookieLedgerClient
from bookie.connection import BookieClientConfig
from bookie.errors import NoSuchLedgerError
from bookie.types import LedgerSpec
from managed_ledger.entry_format import EntryFormatError, decode_batch_header
from quire_spark.entries import entry_chunks
from quire_spark.errors import QuireDataLossError
from quire_spark.offsets import Id
from quire_spark.plan import LedgerRange, TopicPartition
from quire_spark.service import Service

log = logging.getLogger(__name__)
_TS = pa.timestamp("us", tz="UTC")
_TS_MS = pa.timestamp("ms", tz="UTC")
ROW_SCHEMA = pa.schema(
    [
        ("key", pa.string()),
        ("value", pa.binary()),
        ("valueString", pa.string()),
        ("topic", pa.string()),
        ("partition", pa.int32()),
        ("messageId", pa.string()),
        ("publishTime", _TS),
        ("eventTime", _TS),
        ("properties", pa.map_(pa.string(), pa.string())),
        ("producerName", pa.string()),
        ("sequenceId", pa.int64()),
        ("fromCompactedView", pa.bool_()),
    ]
)
ROW_DDL = (
    "key string, value binary, valueString string, topic string, partition int, messageId string, "
    "publishTime timestamp, eventTime timestamp, properties map<string,string>, producerName string, "
    "sequenceId long, fromCompactedView boolean"
)
READ_CHUNK_BYTES = 4 * 1024 * 1024


@dataclass(frozen=True, slots=True)
class CompactedRead:
    """One topic-partition's messages in [start, end) through the compacted view (REST reader)."""

    tp: TopicPartition
    start: Id
    end: Id
    horizon: Id | None


class _Columns:
    """A record batch in the making, filled one entry at a time (column-wise: per message only
    C-level work, so the decode of msgpack stays the main cost)."""

    def __init__(self) -> None:
        self.keys: list[Any] = []
        self.values: list[Any] = []
        self.properties: list[Any] = []
        self.event_times: list[Any] = []
        self.sequence_ids: list[Any] = []
        self.ledgers: list[int] = []
        self.entries: list[int] = []
        self.batch_indexes: list[int] = []
        self.publish_times: list[int] = []
        self.producers: list[Any] = []
        self.views: list[bool] = []
        self.topics: list[str] = []
        self.partitions: list[int] = []

    def add(
        self,
        tp: TopicPartition,
        lid: int,
        eid: int,
        rows: list[Any],
        window: tuple[int, int],
        pt: int,
        prod: Any,
        view: bool,
    ) -> None:
        """Rows lo..hi-1 of entry lid:eid (row = [key, value, properties, event_time, sequence_id])."""
        lo, hi = window
        n = hi - lo
        if n <= 0:
            return
        keys, values, props, event_times, seqs = zip(
            *(rows if (lo, hi) == (0, len(rows)) else rows[lo:hi]), strict=True
        )
        self.keys += keys
        self.values += values
        self.properties += props
        self.event_times += event_times
        self.sequence_ids += seqs
        self.ledgers += [lid] * n
        self.entries += [eid] * n
        self.batch_indexes += range(lo, hi)
        self.publish_times += [pt] * n
        self.producers += [prod] * n
        self.views += [view] * n
        self.topics += [tp.topic] * n
        self.partitions += [tp.partition] * n

    def __len__(self) -> int:
        return len(self.ledgers)

    def _ids(self) -> pa.Array:
        """`ledger:entry:batch_index` strings, joined by Arrow (no Python string per message)."""
        parts = [
            pa.array(x, pa.int64()).cast(pa.string())
            for x in (self.ledgers, self.entries, self.batch_indexes)
        ]
        return pc.binary_join_element_wise(*parts, ":")

    def batch(self) -> pa.RecordBatch:
        values = pa.array(self.values, pa.binary())
        arrays = [
            pa.array(self.keys, pa.string()),
            values,
            _as_text(values),
            pa.array(self.topics, pa.string()),
            pa.array(self.partitions, pa.int32()),
            self._ids(),
            pa.array(self.publish_times, _TS_MS).cast(_TS),
            pa.array(self.event_times, _TS_MS).cast(_TS),
            _maps(self.properties),
            pa.array(self.producers, pa.string()),
            pa.array(self.sequence_ids, pa.int64()),
            pa.array(self.views, pa.bool_()),
        ]
        return pa.RecordBatch.from_arrays(arrays, schema=ROW_SCHEMA)


def _maps(properties: list[Any]) -> pa.Array:
    """map<string,string> per message; messages without properties (most) cost nothing."""
    map_type = ROW_SCHEMA.field("properties").type
    if not any(properties):
        offsets = pa.array([0] * (len(properties) + 1), pa.int32())
        return pa.MapArray.from_arrays(
            offsets, pa.array([], pa.string()), pa.array([], pa.string()), type=map_type
        )
    return pa.array([list(p.items()) if p else [] for p in properties], map_type)


def _as_text(values: pa.Array) -> pa.Array:
    """The values as strings where they are UTF-8, else null (one cast when all are)."""
    try:
        return values.cast(pa.string())
    except (pa.ArrowInvalid, UnicodeDecodeError):
        out = []
        for v in values.to_pylist():
            try:
                out.append(v.decode())
            except UnicodeDecodeError:
                out.append(None)
        return pa.array(out, pa.string())


def client_factory(secret: str) -> BookieLedgerClient:
    security = ClientSecurity(secret=secret.encode()) if secret else ClientSecurity()
    return BookieLedgerClient(BookieClientConfig(security=security))


def spec_of(r: LedgerRange) -> LedgerSpec:
    ensembles = r.ledger.ensembles
    return LedgerSpec(
        r.ledger.ledger_id, ensembles[0][1], r.ledger.write_quorum, r.ledger.ack_quorum, ensembles
    )


def _window(r: LedgerRange, eid: int, n: int) -> tuple[int, int]:
    """The rows of entry eid (of n) inside [r.start, r.end)."""
    lid = r.ledger.ledger_id
    lo, hi = 0, n
    if (lid, eid) == (r.start.ledger_id, r.start.entry_id):
        lo = r.start.batch_index
    elif Id(lid, eid, 0) < r.start:
        lo = n
    if (lid, eid) == (r.end.ledger_id, r.end.entry_id):
        hi = min(n, r.end.batch_index)
    elif Id(lid, eid, 0) >= r.end:
        hi = 0
    return lo, hi


def _add_entry(out: _Columns, r: LedgerRange, eid: int, payload: bytes) -> None:
    lid = r.ledger.ledger_id
    try:
        pt, prod, rows = decode_batch_header(payload)
    except EntryFormatError as exc:  # as the broker's reader: not ours to serve, skipped
        log.warning("%s: skipping undecodable entry %d:%d: %s", r.tp.ml_name, lid, eid, exc)
        return
    out.add(r.tp, lid, eid, rows, _window(r, eid, len(rows)), pt, prod, False)


async def _read_range(
    r: LedgerRange, secret: str, fail_on_data_loss: bool
) -> AsyncGenerator[pa.RecordBatch, None]:
    client = client_factory(secret)
    spec = spec_of(r)
    step = max(1, READ_CHUNK_BYTES // r.ledger.entry_bytes)
    try:
        async for start, payloads in entry_chunks(client, spec, r.first_entry, r.last_entry, step):
            cols = _Columns()
            for eid, payload in enumerate(payloads, start=start):
                _add_entry(cols, r, eid, payload)
            if len(cols):
                yield cols.batch()
    except NoSuchLedgerError:
        text = f"{r.tp.ml_name}: ledger {r.ledger.ledger_id} entries {r.first_entry}..{r.last_entry} are gone"
        if fail_on_data_loss:
            raise QuireDataLossError(text + " (retention); failOnDataLoss=false skips them") from None
        log.warning("%s; skipped (failOnDataLoss=false)", text)
    finally:
        await client.close()


def read_range(r: LedgerRange, secret: str, fail_on_data_loss: bool) -> Iterator[pa.RecordBatch]:
    """The range's messages, one record batch per chunk read (one event loop for the task)."""
    loop = asyncio.new_event_loop()
    batches = _read_range(r, secret, fail_on_data_loss)
    try:
        while True:
            try:
                yield loop.run_until_complete(anext(batches))
            except StopAsyncIteration:
                return
    finally:
        loop.run_until_complete(batches.aclose())
        loop.close()


def read_compacted(
    c: CompactedRead, url: str, token: str | None, page: int = 1000
) -> Iterator[pa.RecordBatch]:
    """The REST reader with read_compacted, from start until end; rows at or below the horizon
    come from the view."""
    start = "earliest" if c.start.ledger_id < 0 else str(c.start)
    with Service(url, token) as service:
        while True:
            body = service.read_page(c.tp.ml_name, start, True, page)
            cols = _Columns()
            done = not body["messages"] or body["next"] is None
            for m in body["messages"]:
                lid, eid, bi = (int(x) for x in m["message_id"].split(":"))
                mid = Id(lid, eid, bi)
                if mid >= c.end:
                    done = True
                    break
                value = base64.b64decode(m["value"] or "")
                row = [m["key"], value, m["properties"] or None, m["event_time"], m["sequence_id"]]
                view = c.horizon is not None and mid <= c.horizon
                rows = [None] * bi + [row]  # the message at its batch index
                cols.add(c.tp, lid, eid, rows, (bi, bi + 1), m["publish_time"], m["producer_name"], view)
            if len(cols):
                yield cols.batch()
            if done:
                return
            start = body["next"]
