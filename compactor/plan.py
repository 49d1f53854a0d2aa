"""What a run reads: the previous compacted ledger and the topic's entries in (old, new horizon].

The plan is built on the driver from metadata alone (plus one LAC read of the open ledger and
one read of the horizon entry), so it is small whatever the topic's size: one `ReadRange` per
ledger, later split into Spark tasks by `split_ranges`.

The new horizon is the id of the topic's last confirmed message when the run starts. A closed
ledger's end is in its metadata. The last ledger may be OPEN and owned by a broker in another
process: its end is the last add confirmed (LAC) its bookies hold, as a BookKeeper reader sees
it, and never an entry past that. An entry past the LAC may never have been acknowledged: if
the one bookie holding it is away when the ledger is recovered, the others' "not there" drops
it, and a view that had compacted it would keep a message (or a tombstone) the topic never had
and a horizon past the ledger's end (BookKeeper's `readUnconfirmed` warns of the same). The LAC
travels with the *next* add, so the newest acknowledged entry of an open ledger waits for the
next run (or for the ledger to close); later writes wait for the next run too.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from bookie.api import LedgerClient
from bookie.errors import NoSuchLedgerError
from bookie.ledgers import ledger_spec
from bookie.metadata_calls import call_store
from bookie.types import LedgerSpec, Segment
from compactor.errors import CompactionTopicNotFoundError
from managed_ledger.entry_format import KIND_COMPACTED, decode_batch_header, entry_kind
from managed_ledger.metadata.api import (
    CompactionState,
    LedgerMetadata,
    LedgerState,
    MetadataStore,
    NotFoundError,
)
from managed_ledger.position import MessageId

DEFAULT_ENTRY_BYTES = 64 * 1024  # when a ledger is still open its size is unknown


@dataclass(frozen=True, slots=True)
class ReadRange:
    """Entries first..last (inclusive) of one ledger. `compacted`: a previous compacted ledger."""

    ledger_id: int
    ensemble: tuple[str, ...]
    write_quorum: int
    ack_quorum: int
    first_entry_id: int
    last_entry_id: int
    compacted: bool = False
    entry_bytes_hint: int = DEFAULT_ENTRY_BYTES
    ensembles: tuple[Segment, ...] = ()  # the ledger's ensemble history (empty: one segment)
    layer: int = 0  # compacted ranges: 0 the base, i the i-th delta (read in this order)

    @property
    def spec(self) -> LedgerSpec:
        return ledger_spec(self)

    @property
    def entries(self) -> int:
        return self.last_entry_id - self.first_entry_id + 1


@dataclass(frozen=True, slots=True)
class CompactionPlan:
    """Messages to read: every message of `ranges` with old_horizon < id <= new_horizon for topic
    ranges, and every message of the compacted ranges (all of them are <= old_horizon): the
    view's layers for a fold, none for a delta run (`delta`)."""

    ml_name: str
    old_horizon: MessageId | None
    new_horizon: MessageId | None
    ranges: tuple[ReadRange, ...]
    delta: bool = False
    closed_new_bytes: int = 0  # the new messages' bytes in CLOSED ledgers (their size is known)

    @property
    def has_new_messages(self) -> bool:
        return any(not r.compacted for r in self.ranges)


def _range(meta: LedgerMetadata, first: int, last: int, compacted: bool, layer: int = 0) -> ReadRange:
    hint = DEFAULT_ENTRY_BYTES
    if meta.state == LedgerState.CLOSED and meta.last_entry_id >= 0 and meta.length_bytes > 0:
        hint = max(1, meta.length_bytes // (meta.last_entry_id + 1))
    return ReadRange(
        meta.ledger_id,
        tuple(meta.ensemble),
        meta.write_quorum,
        meta.ack_quorum,
        first,
        last,
        compacted,
        hint,
        meta.history(),
        layer,
    )


async def last_confirmed_entry(client: LedgerClient, spec: LedgerSpec) -> int:
    """The last entry of an open ledger known to be acknowledged: the highest LAC its bookies
    hold (-1 when none has seen an add). Never more: see the module docstring."""
    try:
        return await client.read_last_add_confirmed(spec)
    except NoSuchLedgerError:
        return -1  # no bookie has seen an add yet


async def _ledger_end(client: LedgerClient, meta: LedgerMetadata) -> int:
    if meta.state == LedgerState.CLOSED:
        return meta.last_entry_id
    return await last_confirmed_entry(client, ledger_spec(meta))


async def _horizon_of(client: LedgerClient, last: ReadRange) -> MessageId:
    """The id of the last message of the range's last entry."""
    (payload,) = await client.read_entries(last.spec, last.last_entry_id, last.last_entry_id)
    if entry_kind(payload) == KIND_COMPACTED:  # never in a topic; keep the entry id
        return MessageId(last.ledger_id, last.last_entry_id, 0)
    _, _, rows = decode_batch_header(payload)
    return MessageId(last.ledger_id, last.last_entry_id, max(len(rows) - 1, 0))


async def build_plan(
    store: MetadataStore, client: LedgerClient, ml_name: str, state: CompactionState, delta: bool = False
) -> CompactionPlan:
    """The plan of a fold (the view's layers and the new messages) or, with `delta`, of a delta
    run (the new messages alone)."""
    ml = await call_store(store.get_managed_ledger, ml_name)
    if ml is None:
        raise CompactionTopicNotFoundError(f"managed ledger {ml_name!r} does not exist")
    old = MessageId(*state.horizon) if state.horizon is not None else None
    ranges: list[ReadRange] = []
    for layer, ledger_id in enumerate(() if delta else state.layer_ledger_ids):
        meta = await call_store(store.get_ledger, ledger_id)
        if meta.last_entry_id >= 0:
            ranges.append(_range(meta, 0, meta.last_entry_id, compacted=True, layer=layer))
    topic_ranges: list[ReadRange] = []
    closed_bytes = 0
    for ledger_id in ml.ledger_ids:
        if old is not None and ledger_id < old.ledger_id:
            continue
        try:
            meta = await call_store(store.get_ledger, ledger_id)
        except NotFoundError:
            continue  # trimmed by retention while we looked
        first = old.entry_id + 1 if old is not None and ledger_id == old.ledger_id else 0
        last = await _ledger_end(client, meta)
        if last >= first:
            topic_ranges.append(_range(meta, first, last, compacted=False))
            if meta.state == LedgerState.CLOSED:
                closed_bytes += topic_ranges[-1].entries * topic_ranges[-1].entry_bytes_hint
    new = await _horizon_of(client, topic_ranges[-1]) if topic_ranges else old
    return CompactionPlan(ml_name, old, new, tuple(ranges + topic_ranges), delta, closed_bytes)


def split_ranges(ranges: tuple[ReadRange, ...], tasks: int) -> list[ReadRange]:
    """Cut ranges into about `tasks` pieces of similar byte size (each piece one Spark task)."""
    total = sum(r.entries * r.entry_bytes_hint for r in ranges)
    if total == 0:
        return []
    target = max(1, math.ceil(total / max(1, tasks)))
    pieces: list[ReadRange] = []
    for r in ranges:
        per_piece = max(1, target // r.entry_bytes_hint)
        for first in range(r.first_entry_id, r.last_entry_id + 1, per_piece):
            last = min(first + per_piece - 1, r.last_entry_id)
            pieces.append(
                ReadRange(
                    r.ledger_id,
                    r.ensemble,
                    r.write_quorum,
                    r.ack_quorum,
                    first,
                    last,
                    r.compacted,
                    r.entry_bytes_hint,
                    r.ensembles,
                    r.layer,
                )
            )
    return pieces
