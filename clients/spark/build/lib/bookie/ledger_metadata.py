"""Ledger metadata: the records and the store seam the ledger lifecycle needs (BookKeeper keeps
these in ZooKeeper and only its `LedgerManager` writes them).

A ledger's metadata is the truth about the ledger: its ensemble history and quorums (how to
reach it), its state, and once CLOSED its last entry and length. The history is a list of
(first entry id, bookies) segments: the first starts at entry 0 with `ensemble`, and the writer
adds one each time it replaces a bookie that failed (BookKeeper's ensemble change). Rows written
before the history existed have an empty one, which means `((0, ensemble),)`.
`bookie.ledgers.LedgerManager` is the one writer of these rows; everything else reads them
through it.

`LedgerMetadataStore` is the ledger-row part of the managed ledger's metadata store
(`managed_ledger.metadata.api.MetadataStore` extends it; the SQL and in-memory stores implement
it). Every update is compare-and-set on `version`: the caller passes the record it read; the
store writes it only if the stored version is still that one and returns the record with
version + 1, else raises `BadVersionError`. A created record comes back with version 1. Calls
are synchronous and short.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import Protocol

from bookie.types import Segment, normalize_history
from common.errors import ErrorKind, QuireError


class MetadataError(QuireError):
    """Root of the metadata store's errors."""

    kind = ErrorKind.internal


class BadVersionError(MetadataError):
    """A compare-and-set lost the race: someone else updated the record first."""

    kind = ErrorKind.conflict
    title = "Concurrent update"


class NotFoundError(MetadataError):
    """No record of that name exists."""

    kind = ErrorKind.not_found
    title = "Not found"


class AlreadyExistsError(MetadataError):
    """A record of that name exists already."""

    kind = ErrorKind.conflict
    title = "Already exists"


class MetadataUnavailableError(MetadataError):
    """The database could not be reached, or a lock wait timed out; retrying may succeed."""

    kind = ErrorKind.unavailable
    retriable = True
    title = "Metadata store unavailable"


class LedgerState(StrEnum):
    OPEN = "OPEN"
    IN_RECOVERY = "IN_RECOVERY"
    CLOSED = "CLOSED"
    # Marked for deletion: its bookie data may already be gone, so nothing may read it; the row
    # itself goes last (see `bookie.ledgers` for the order and who finishes it after a crash).
    DELETING = "DELETING"


@dataclass(frozen=True, slots=True)
class LedgerMetadata:
    ledger_id: int
    ensemble: tuple[str, ...]
    write_quorum: int
    ack_quorum: int
    state: LedgerState
    last_entry_id: int = -1
    length_bytes: int = 0
    created_ms: int = 0
    closed_ms: int | None = None
    version: int = 0
    # (first entry id, bookies) segments sorted by first entry id; empty means ((0, ensemble),).
    ensembles: tuple[Segment, ...] = ()
    # (segment's first entry id, bookie, instance id): the instance (cookie) each bookie reported
    # when it entered that segment. A "not there" from another instance is no evidence that an
    # entry is absent (a wiped and formatted bookie, or a second process under the same id,
    # cannot know what the recorded one held). Bookies without one (rows written before
    # revision 0011, bookies that do not report one) are judged as before.
    instances: tuple[SegmentInstance, ...] = ()

    def history(self) -> tuple[Segment, ...]:
        """The normalized ensemble history (never empty)."""
        return normalize_history(self.ensemble, self.ensembles)

    def segment_instances(self, first_entry_id: int) -> dict[str, str]:
        """bookie -> instance id recorded for the segment starting at `first_entry_id`."""
        return {b: i for f, b, i in self.instances if f == first_entry_id}


SegmentInstance = tuple[int, str, str]


def recorded_instances(
    kept: tuple[SegmentInstance, ...], first_entry_id: int, bookies: dict[str, str | None]
) -> tuple[SegmentInstance, ...]:
    """`kept` (the entries of segments before `first_entry_id`) plus the known instances of a
    new segment's bookies."""
    new = tuple((first_entry_id, b, i) for b, i in bookies.items() if i)
    return tuple(sorted((*(x for x in kept if x[0] < first_entry_id), *new)))


def ensemble_history(meta: LedgerMetadata) -> tuple[Segment, ...]:
    """The normalized ensemble history of a ledger's metadata (never empty)."""
    return meta.history()


class LedgerMetadataStore(Protocol):
    """The ledger rows of the metadata store."""

    def create_ledger(
        self,
        ensemble: tuple[str, ...],
        write_quorum: int,
        ack_quorum: int,
        created_ms: int,
        instances: tuple[SegmentInstance, ...] = (),
    ) -> LedgerMetadata:
        """A new OPEN ledger; its id comes from a sequence: unique and increasing. `instances`
        as in `LedgerMetadata` (for the first segment)."""
        ...

    def get_ledger(self, ledger_id: int) -> LedgerMetadata:
        """Raises NotFoundError when the row is gone."""
        ...

    def update_ledger(self, ledger: LedgerMetadata) -> LedgerMetadata:
        """CAS on version; NotFoundError when the row is gone, BadVersionError when it moved."""
        ...

    def delete_ledger(self, ledger_id: int) -> None:
        """Raises NotFoundError when the row is gone."""
        ...

    def list_ledgers(self) -> list[LedgerMetadata]: ...
