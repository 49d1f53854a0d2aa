"""SQLAlchemy's errors that mean "the database cannot be reached now", as the store's own
retriable `MetadataUnavailableError`: one mapping for the SQL store's transactions, its schema
checks and the async seam (`bookie.metadata_calls`), which cannot import SQLAlchemy itself and
gets `unavailable` as a translator when a SQL store is built.
"""

from __future__ import annotations

from sqlalchemy.exc import DBAPIError, DisconnectionError, OperationalError

from bookie.ledger_metadata import MetadataUnavailableError


def unavailable_error(exc: DBAPIError) -> MetadataUnavailableError:
    return MetadataUnavailableError(f"metadata database unavailable: {exc.orig}")


def unavailable(exc: Exception) -> MetadataUnavailableError | None:
    """The retriable error for a lost or refused connection; None for any other error."""
    if isinstance(exc, OperationalError) or (isinstance(exc, DBAPIError) and exc.connection_invalidated):
        return unavailable_error(exc)
    if isinstance(exc, DisconnectionError):  # the pool's own check, before any statement
        return MetadataUnavailableError(f"metadata database unavailable: {exc}")
    return None
