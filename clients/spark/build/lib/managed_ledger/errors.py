"""Errors of the managed ledger layer.

`ManagedLedgerError` is the root; each error says what kind of failure it is and whether
retrying the same call may succeed (BookKeeper-style), so the topics layer can answer "try
again" or "gone" without string checks. Bookie and metadata errors are translated at this
boundary with `raise ... from exc`.
"""

from __future__ import annotations

from common.errors import ErrorKind, QuireError


class ManagedLedgerError(QuireError):
    """Root of the managed ledger's errors."""

    kind = ErrorKind.internal


class EntryNotFoundError(ManagedLedgerError):
    """The entry was never written, is beyond the last confirmed entry, or was trimmed."""

    kind = ErrorKind.not_found
    title = "Message not found"


class ManagedLedgerFencedError(ManagedLedgerError):
    """Another owner took the managed ledger over (a compare-and-set on its metadata lost, or
    the bookies fenced our ledger). This instance refuses every further write."""

    kind = ErrorKind.fenced
    title = "Topic moved; retry"


class ManagedLedgerClosedError(ManagedLedgerError):
    """The managed ledger (or its factory) was closed."""

    kind = ErrorKind.fenced
    title = "Topic closing; retry"


class ManagedLedgerWriteError(ManagedLedgerError):
    """An append failed on the bookies; the ledger is closed and the next append starts a new
    one, so retrying may succeed."""

    kind = ErrorKind.unavailable
    retriable = True
    title = "Storage unavailable"


class ManagedLedgerReadError(ManagedLedgerError):
    """Reading entries from the bookies failed (a read, or the recovery of a ledger on open);
    the managed ledger is unchanged, so retrying may succeed."""

    kind = ErrorKind.unavailable
    retriable = True
    title = "Storage unavailable"


class ManagedLedgerDeleteError(ManagedLedgerError):
    """Deleting a ledger on the bookies failed; its id stays listed as being deleted and the
    next trim or open finishes it, so retrying may succeed."""

    kind = ErrorKind.unavailable
    retriable = True
    title = "Storage unavailable"


class ManagedLedgerMetadataError(ManagedLedgerError):
    """The metadata store failed for a reason other than a lost compare-and-set."""

    kind = ErrorKind.unavailable
    retriable = True
    title = "Metadata store unavailable"


class ManagedLedgerTerminatedError(ManagedLedgerError):
    """The managed ledger was terminated: it takes no append again (Pulsar's
    ManagedLedgerTerminatedException)."""

    kind = ErrorKind.conflict
    title = "Topic terminated"


class CursorNotFoundError(ManagedLedgerError):
    """No cursor of that name exists on the managed ledger."""

    kind = ErrorKind.not_found
    title = "Subscription not found"


class NoBookiesError(ManagedLedgerError):
    """Fewer bookies are configured than the ensemble size asks for."""

    kind = ErrorKind.unavailable
    title = "Not enough bookies"


class SequenceInFlightError(ManagedLedgerError):
    """Dedup cannot tell yet whether a producer's message is stored: a write of its sequence id
    is in flight, or failed and the ledger is not yet recovered. Retrying later gets a definite
    answer (stored, or a duplicate)."""

    kind = ErrorKind.unavailable
    retriable = True
    title = "Write in flight"

    def __init__(self, producer_name: str, sequence_id: int) -> None:
        super().__init__(
            f"a write of sequence id {sequence_id} of producer {producer_name!r} is in flight; retry later"
        )
        self.producer_name = producer_name
        self.sequence_id = sequence_id
