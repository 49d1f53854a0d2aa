"""Rewriting rotten copies in place (the recovery worker's part of `bookie.scrubber`'s design).

A row of the under-replicated list may name (bookie, entry) copies that bookie holds rotten: their
stored checksum fails, so it answers CORRUPT for them. For each, the worker reads the entry from
another bookie of its write set and sends it to the rotten holder as a recovery add, which the
engine takes as a repair (`bookie.storage.engine`: a recovery add over a record whose checksum
fails appends the good one and points the index at it). The ledger's metadata is not changed:
the bookie already is in the write set. A copy is skipped when its bookie no longer is in the
entry's write set (its segment was moved off that bookie since) or, in a CLOSED ledger, the entry
lies past the ledger's end (a copy of an entry the ledger never had).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from bookie.ledger_metadata import LedgerMetadata, LedgerState
from bookie.ledgers import ledger_spec
from bookie.replica_io import ReplicaIO

ReadOne = Callable[[LedgerMetadata, int, list[str]], Awaitable[bytes]]


def rotten_to_repair(meta: LedgerMetadata, rotten: tuple[tuple[str, int], ...]) -> dict[str, list[int]]:
    """By bookie, the entries whose rotten copy still needs a rewrite (see the module docstring)."""
    spec = ledger_spec(meta)
    out: dict[str, list[int]] = {}
    for bookie, entry_id in rotten:
        if meta.state == LedgerState.CLOSED and entry_id > meta.last_entry_id:
            continue
        if bookie in spec.write_set(entry_id):
            out.setdefault(bookie, []).append(entry_id)
    return {b: sorted(entries) for b, entries in out.items()}


async def rewrite_rotten(
    io: ReplicaIO,
    meta: LedgerMetadata,
    bookie: str,
    entry_ids: list[int],
    read_one: ReadOne,
    on_durable: Callable[[int], None],
    max_count: int,
    max_bytes: int,
) -> None:
    """Read each entry from the other bookies of its write set and rewrite it on `bookie`;
    returns once every rewrite is durable there (UnrecoverableEntryError: no good copy left)."""
    spec = ledger_spec(meta)
    lac = meta.last_entry_id if meta.state == LedgerState.CLOSED else -1  # -1: raises no LAC
    adds = await io.recovery_adds(bookie, meta.ledger_id, lac, max_count, max_bytes, on_durable)
    for entry_id in entry_ids:
        sources = [b for b in spec.write_set(entry_id) if b != bookie]
        await adds.add(entry_id, await read_one(meta, entry_id, sources))
    await adds.drain()
