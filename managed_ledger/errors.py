"""Errors of the managed ledger layer.

`ManagedLedgerError` is the root; each error says whether retrying the same call may succeed
(BookKeeper-style), so the topics layer can answer "try again" or "gone" without string checks.
Bookie and metadata errors are translated at this boundary with `raise ... from exc`.
"""

from __future__ import annotations

from bookie.errors import QuireError


class ManagedLedgerError(QuireError):
    """Root of the managed ledger's errors."""


class EntryNotFoundError(ManagedLedgerError):
    """The entry was never written, is beyond the last confirmed entry, or was trimmed."""


class ManagedLedgerFencedError(ManagedLedgerError):
    """Another owner took the managed ledger over (a compare-and-set on its metadata lost, or
    the bookies fenced our ledger). This instance refuses every further write."""


class ManagedLedgerClosedError(ManagedLedgerError):
    """The managed ledger (or its factory) was closed."""


class ManagedLedgerWriteError(ManagedLedgerError):
    """An append failed on the bookies; the ledger is closed and the next append starts a new
    one, so retrying may succeed."""

    retriable = True


class ManagedLedgerReadError(ManagedLedgerError):
    """Reading entries from the bookies failed (a read, or the recovery of a ledger on open);
    the managed ledger is unchanged, so retrying may succeed."""

    retriable = True


class ManagedLedgerDeleteError(ManagedLedgerError):
    """Deleting a ledger on the bookies failed; its id stays listed as being deleted and the
    next trim or open finishes it, so retrying may succeed."""

    retriable = True


class MetadataUnavailableError(ManagedLedgerError):
    """The metadata store failed for a reason other than a lost compare-and-set."""

    retriable = True


class CursorNotFoundError(ManagedLedgerError):
    pass


class NoBookiesError(ManagedLedgerError):
    """Fewer bookies are configured than the ensemble size asks for."""
