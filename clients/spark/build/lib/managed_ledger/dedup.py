"""Producer deduplication, by Pulsar's MessageDeduplication rule.

Per producer two numbers: the highest sequence id *pushed* (accepted for writing, maybe not yet
durable) and the highest *persisted* (durable). A message is checked against both, as Pulsar's
MessageDupStatus does:
- id <= highest persisted: a duplicate, not written (the caller reports it as such);
- highest persisted < id <= highest pushed: unknown, since a write of it is in flight or failed
  and not yet resolved. Calling it a duplicate would lose it if that write fails, and writing it
  again would store it twice if that write turns out durable, so the whole batch is refused
  with a retriable error and the producer retries later;
- id > highest pushed: new, written (and pushed from now on).

Pushed falls back to persisted (Pulsar's resetHighestSequenceIdPushed) only once every write
that failed is resolved: the managed ledger calls `write_failed` when it has closed the ledger
through recovery (entries recovery proves durable are replayed into persisted first) or failed
its waiting appends with no ledger open. A retry of a lost message is then new, a retry of one
that was durable after all is a duplicate.

The persisted map survives restarts as a snapshot in the metadata store (`DedupSnapshot`:
the map as of a position, that entry included), taken every N entries or T ms and on close. On
open the managed ledger replays the entries after the snapshot position and raises each
producer's number to the highest sequence id found, so a producer retrying after a crash never
creates a duplicate. Replaying an entry twice is harmless (max is idempotent), which lets the
snapshot position be the last confirmed entry at the moment it is taken.
"""

from __future__ import annotations

from collections.abc import AsyncIterable, Mapping, Sequence

from managed_ledger.entry_format import EntryFormatError, batch_sequence
from managed_ledger.errors import SequenceInFlightError
from managed_ledger.metadata.api import DedupSnapshot


class Deduplication:
    def __init__(self, persisted: Mapping[str, int] | None = None) -> None:
        self.persisted: dict[str, int] = dict(persisted or {})
        self.pushed: dict[str, int] = dict(self.persisted)
        self.entries_since_snapshot = 0
        self.last_snapshot_ms = 0
        self.snapshot_version = 0  # version of the stored DedupSnapshot (0 = none yet)

    def check(self, producer_name: str, sequence_ids: Sequence[int | None]) -> list[bool]:
        """True per duplicate message; marks the others pushed (earlier ids of the same batch
        count: a batch [5, 5] keeps the first 5 only). Raises SequenceInFlightError, marking
        nothing, when any id is unknown (pushed but not persisted)."""
        persisted = self.persisted.get(producer_name, -1)
        pushed = self.pushed.get(producer_name, -1)
        highest = pushed
        out: list[bool] = []
        for seq in sequence_ids:
            if seq is None:
                out.append(False)
            elif seq <= persisted:
                out.append(True)
            elif seq <= pushed:
                raise SequenceInFlightError(producer_name, seq)
            elif seq <= highest:
                out.append(True)  # an earlier message of this batch has it
            else:
                highest = seq
                out.append(False)
        if highest > pushed:
            self.pushed[producer_name] = highest
        return out

    def mark_pushed(self, producer_name: str, sequence_id: int) -> None:
        if sequence_id > self.pushed.get(producer_name, -1):
            self.pushed[producer_name] = sequence_id

    def record_persisted(self, producer_name: str, sequence_id: int) -> None:
        if sequence_id > self.persisted.get(producer_name, -1):
            self.persisted[producer_name] = sequence_id
        if sequence_id > self.pushed.get(producer_name, -1):
            self.pushed[producer_name] = sequence_id

    def write_failed(self) -> None:
        """Pulsar's resetHighestSequenceIdPushed: forget what was pushed but never persisted.
        Only once no write is unresolved: a retry is then new again (see the module doc)."""
        self.pushed = dict(self.persisted)


def replay(dedup: Deduplication, payload: bytes) -> None:
    """Raise the entry's producer to its batch's highest sequence id (entries that are not
    topic batches carry none)."""
    try:
        producer, seq = batch_sequence(payload)
    except EntryFormatError:
        return
    if producer is not None and seq is not None:
        dedup.record_persisted(producer, seq)


async def rebuild(
    state: Deduplication, snapshot: DedupSnapshot | None, entries: AsyncIterable[bytes]
) -> None:
    """Dedup state after a restart (or when dedup is turned on): the stored snapshot, raised by
    every entry after its position (`entries`), merged into what `state` already knows."""
    found = Deduplication(snapshot.sequences if snapshot is not None else None)
    replayed = 0
    async for payload in entries:
        replay(found, payload)
        replayed += 1
    for producer, seq in found.persisted.items():
        state.record_persisted(producer, seq)
    state.entries_since_snapshot += replayed  # the next snapshot covers them
    state.snapshot_version = snapshot.version if snapshot is not None else 0
