"""Which ledgers retention lets the trimmer delete (Pulsar's internalTrimLedgers rule).

Candidates are the closed ledgers wholly at or before the slowest durable cursor's persisted
mark-delete position (with no durable cursor, every closed ledger), never the last ledger of the
list (the current one). Oldest first, a candidate is deleted while it is past the retention
time or the data that would remain without it is still at least the retention size; the first
one that is neither stops the walk, so what remains is always a suffix of the list.

-1 means unlimited for either limit; 0 with 0 means "delete as soon as consumed" (Pulsar's
default). Non-durable readers are not cursors here, so they never hold data.

Compaction holds data like a cursor (Pulsar's `__compaction` cursor): on a topic whose
compaction is on, `compacted_only` keeps the ledgers that are not wholly at or before the
compaction horizon, whatever the subscriptions acked, until a run has read them.

Deletion order (`remove_ledgers`): the ledger list loses the ids and records them under the
`deleting` property in one compare-and-set, then each ledger is deleted by
`bookie.ledgers.LedgerManager.delete` (its own crash-safe order), then the property is cleared.
A crash or a failure anywhere leaves the ids in `deleting`; the next open finishes the job in
the background (`finish_deletions_logged`), and so does every timer pass until it succeeds: no
reference to a deleted ledger, and no open that waits for, or fails with, a deletion. A bookie
that is down does not hold a deletion up: `LedgerManager.delete` deletes the metadata without
it, and that bookie's ledger garbage collector deletes its copy when it is back.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

from bookie.errors import BookieError
from bookie.ledgers import LedgerManager
from managed_ledger.api import RetentionPolicy
from managed_ledger.errors import ManagedLedgerDeleteError, ManagedLedgerError, ManagedLedgerMetadataError
from managed_ledger.metadata.api import MetadataError
from managed_ledger.offsets import OffsetIndex
from managed_ledger.position import Position
from managed_ledger.ranges import LedgerInfo, LedgerList
from managed_ledger.record import DELETING, ManagedLedgerRecord, deleting_ids

__all__ = [
    "DELETING",
    "compacted_only",
    "deleting_ids",
    "finish_deletions",
    "finish_deletions_logged",
    "ledgers_to_delete",
    "next_expiry_ms",
    "remove_ledgers",
]

MB = 1024 * 1024
log = logging.getLogger(__name__)


def next_expiry_ms(
    ledgers: Sequence[LedgerInfo],
    slowest_mark_delete: Position | None,
    policy: RetentionPolicy,
    now_ms: int,
) -> int | None:
    """When `ledgers_to_delete` will name a ledger it does not name now by time alone: the
    retention deadline of the first consumed closed ledger it keeps (None: none does, or it is
    kept for another reason; a cursor move or an append wakes the trimmer instead)."""
    if policy.time_minutes < 0:
        return None
    retention_ms = policy.time_minutes * 60_000
    deleted = set(ledgers_to_delete(ledgers, slowest_mark_delete, policy, now_ms))
    for info in ledgers[:-1]:
        if info.ledger_id in deleted:
            continue
        if info.timestamp_ms == 0:
            return None
        if slowest_mark_delete is not None and info.last_position > slowest_mark_delete:
            return None
        at = info.timestamp_ms + retention_ms
        return at if at > now_ms else None
    return None


def ledgers_to_delete(
    ledgers: Sequence[LedgerInfo],
    slowest_mark_delete: Position | None,
    policy: RetentionPolicy,
    now_ms: int,
) -> list[int]:
    """Ids of the ledgers to delete, oldest first. `ledgers` is the whole list in order."""
    if policy.time_minutes < 0 and policy.size_mb < 0:
        return []
    total_size = sum(info.size_bytes for info in ledgers)
    retention_ms = policy.time_minutes * 60_000
    out: list[int] = []
    size_to_delete = 0
    for info in ledgers[:-1]:  # the current (last) ledger is never deleted
        if info.timestamp_ms == 0:
            break  # still open
        consumed = slowest_mark_delete is None or info.last_position <= slowest_mark_delete
        if not consumed:
            break
        expired = policy.time_minutes >= 0 and now_ms - info.timestamp_ms >= retention_ms
        # Retention size is what must remain: delete only if at least that much is left after.
        remaining = total_size - size_to_delete - info.size_bytes
        over_size = policy.size_mb >= 0 and remaining >= policy.size_mb * MB
        if not (expired or over_size):
            break
        out.append(info.ledger_id)
        size_to_delete += info.size_bytes
    return out


def compacted_only(ledgers: Sequence[LedgerInfo], ids: Sequence[int], horizon: Position | None) -> list[int]:
    """The leading `ids` (oldest first, as `ledgers_to_delete` gives them) whose ledgers lie
    wholly at or before the compaction horizon; None (no run yet, or not known yet): none."""
    if horizon is None:
        return []
    last = {info.ledger_id: info.last_position for info in ledgers}
    out: list[int] = []
    for ledger_id in ids:
        if last[ledger_id] > horizon:
            break
        out.append(ledger_id)
    return out


async def remove_ledgers(
    record: ManagedLedgerRecord,
    ledgers: LedgerList,
    lifecycle: LedgerManager,
    ids: Sequence[int],
    offsets: OffsetIndex,
    next_offset: int,
) -> None:
    """Take ids out of the list and record them as `deleting` (one CAS), then delete them. The
    offset floor becomes the first remaining ledger's first offset (`next_offset`, the next one
    to assign, when none remains)."""
    remaining = [i.ledger_id for i in ledgers if i.ledger_id not in ids]
    firsts = [f for f in (offsets.first_offset(i) for i in remaining) if f is not None]
    await record.move_to_deleting(ids, firsts[0] if firsts else next_offset)
    for ledger_id in ids:
        ledgers.remove(ledger_id)
    offsets.forget(list(ids))
    await finish_deletions(record, lifecycle)


async def finish_deletions(record: ManagedLedgerRecord, lifecycle: LedgerManager) -> None:
    """Delete every ledger listed under `deleting`, then clear the property. Idempotent, so a
    crash at any step is repaired by running it again."""
    ids, name = record.deleting, record.meta.name
    if not ids:
        return
    for ledger_id in ids:
        try:
            await lifecycle.delete(ledger_id)
        except BookieError as exc:
            raise ManagedLedgerDeleteError(f"{name}: cannot delete ledger {ledger_id}: {exc}") from exc
        except MetadataError as exc:
            raise ManagedLedgerMetadataError(f"{name}: metadata store: {exc}") from exc
    await record.forget_deleting(ids)


async def finish_deletions_logged(record: ManagedLedgerRecord, lifecycle: LedgerManager) -> None:
    """`finish_deletions` in the background: a failure is logged, and the ids stay listed for
    the next try."""
    try:
        await finish_deletions(record, lifecycle)
    except ManagedLedgerError as exc:
        log.warning("managed ledger %s: pending ledger deletions not finished: %s", record.meta.name, exc)
