"""Errors of the bookie layer.

Every failure a client can branch on is a `BookieError` carrying an `ErrorCode` (the code also
travels on the wire) and whether retrying the same request may succeed, as BookKeeper's return
codes do.
"""

from __future__ import annotations

from enum import IntEnum


class QuireError(Exception):
    """Root of every Quire exception; each package's errors derive from it."""

    retriable: bool = False


class ErrorCode(IntEnum):
    OK = 0
    NO_SUCH_LEDGER = 1
    NO_SUCH_ENTRY = 2
    FENCED = 3
    READ_ONLY = 4
    TOO_MANY_REQUESTS = 5
    BAD_REQUEST = 6
    INTERNAL = 7
    UNAVAILABLE = 8  # no connection to the bookie, or it went away mid-request
    TIMEOUT = 9
    CORRUPT = 10  # a checksum did not match


_RETRIABLE = {ErrorCode.TOO_MANY_REQUESTS, ErrorCode.UNAVAILABLE, ErrorCode.TIMEOUT}


class BookieError(QuireError):
    def __init__(self, code: ErrorCode, message: str = "") -> None:
        super().__init__(f"{code.name}: {message}" if message else code.name)
        self.code = code
        self.message = message
        self.retriable = code in _RETRIABLE


class NoSuchLedgerError(BookieError):
    def __init__(self, ledger_id: int) -> None:
        super().__init__(ErrorCode.NO_SUCH_LEDGER, f"ledger {ledger_id}")


class NoSuchEntryError(BookieError):
    def __init__(self, ledger_id: int, entry_id: int) -> None:
        super().__init__(ErrorCode.NO_SUCH_ENTRY, f"ledger {ledger_id} entry {entry_id}")


class FencedError(BookieError):
    def __init__(self, ledger_id: int) -> None:
        super().__init__(ErrorCode.FENCED, f"ledger {ledger_id} is fenced")


class ReadOnlyError(BookieError):
    def __init__(self, message: str = "bookie is read-only") -> None:
        super().__init__(ErrorCode.READ_ONLY, message)


_BY_CODE: dict[ErrorCode, type[BookieError]] = {}


def error_from_code(code: int, message: str) -> BookieError:
    """Rebuild an error received over the wire."""
    try:
        ec = ErrorCode(code)
    except ValueError:
        ec = ErrorCode.INTERNAL
    return BookieError(ec, message)
