"""Errors of the bookie layer.

Every failure a client can branch on is a `BookieError` carrying an `ErrorCode` (the code also
travels on the wire) and whether retrying the same request may succeed, as BookKeeper's return
codes do. What each code means to a caller (its class, kind, whether to retry) is written once,
in `WIRE_CODES`; `error_from_code` rebuilds an error from a reply with it.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import IntEnum

from common.errors import ErrorKind, QuireError

__all__ = [
    "WIRE_CODES",
    "BookieError",
    "ErrorCode",
    "FencedError",
    "InstanceReplacedError",
    "JournalDamagedError",
    "NoSuchEntryError",
    "NoSuchLedgerError",
    "ProcessReplacedError",
    "QuireError",
    "ReadOnlyError",
    "TwinBookieError",
    "WireCode",
    "error_from_code",
]


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
    NOT_AUTHENTICATED = 11  # the bookie asks for AUTH first, or the handshake failed (bookie.auth)


class BookieError(QuireError):
    """A bookie request failed; its kind, retriability and title follow its code."""

    def __init__(self, code: ErrorCode, message: str = "") -> None:
        super().__init__(f"{code.name}: {message}" if message else code.name)
        self.code = code
        self.message = message
        rule = WIRE_CODES[code]
        self.kind = rule.kind
        self.retriable = rule.retriable
        self.title = rule.title

    @classmethod
    def from_reply(cls, code: ErrorCode, message: str, ledger_id: int, entry_id: int) -> BookieError:
        """The error for a reply of `code` about `ledger_id`/`entry_id` (-1 when not about one)."""
        return cls(code, message)


class NoSuchLedgerError(BookieError):
    def __init__(self, ledger_id: int) -> None:
        super().__init__(ErrorCode.NO_SUCH_LEDGER, f"ledger {ledger_id}")

    @classmethod
    def from_reply(cls, code: ErrorCode, message: str, ledger_id: int, entry_id: int) -> BookieError:
        return cls(ledger_id)


class NoSuchEntryError(BookieError):
    def __init__(self, ledger_id: int, entry_id: int) -> None:
        super().__init__(ErrorCode.NO_SUCH_ENTRY, f"ledger {ledger_id} entry {entry_id}")

    @classmethod
    def from_reply(cls, code: ErrorCode, message: str, ledger_id: int, entry_id: int) -> BookieError:
        return cls(ledger_id, entry_id)


class FencedError(BookieError):
    def __init__(self, ledger_id: int) -> None:
        super().__init__(ErrorCode.FENCED, f"ledger {ledger_id} is fenced")

    @classmethod
    def from_reply(cls, code: ErrorCode, message: str, ledger_id: int, entry_id: int) -> BookieError:
        return cls(ledger_id)


class ReadOnlyError(BookieError):
    def __init__(self, message: str = "bookie is read-only") -> None:
        super().__init__(ErrorCode.READ_ONLY, message)

    @classmethod
    def from_reply(cls, code: ErrorCode, message: str, ledger_id: int, entry_id: int) -> BookieError:
        return cls(message or "bookie is read-only")


class JournalDamagedError(BookieError):
    """The journal is damaged where it held acknowledged records (before an intact record, or
    anywhere in a sealed segment): not a torn tail, so the bookie refuses to start rather than
    cut or skip them and answer "no such entry" for them. Never sent on the wire."""

    def __init__(self, segment: str, damage_at: int, valid_at: int | None) -> None:
        why = (
            f"yet a valid record follows at offset {valid_at}"
            if valid_at is not None
            else "and the segment is sealed (every record in it was synced)"
        )
        super().__init__(
            ErrorCode.INTERNAL,
            f"journal segment {segment} is damaged at offset {damage_at}, {why}: this is not a torn "
            "tail, and cutting or skipping it would lose acknowledged entries, so the bookie refuses "
            "to start. Copy the data directory aside for diagnosis; then restore the disk, or start "
            "the bookie with --format (it erases the journal) so that its ledgers are copied again "
            "from their other bookies",
        )
        self.segment = segment
        self.damage_at = damage_at
        self.valid_at = valid_at


@dataclass(frozen=True, slots=True)
class WireCode:
    """What one wire code means to a caller."""

    error: type[BookieError]
    kind: ErrorKind
    retriable: bool
    title: str | None = None


_MISSING = "Message not found"  # a missing ledger or entry is, to a reader, a missing message
_STORAGE = "Storage unavailable"

# One row per code. A fenced ledger is translated by the managed ledger (another owner took the
# topic over), so a FencedError that reaches a caller raw is a bug: internal, like a request the
# bookie found malformed or an entry whose checksum failed.
WIRE_CODES: dict[ErrorCode, WireCode] = {
    ErrorCode.OK: WireCode(BookieError, ErrorKind.internal, False),
    ErrorCode.NO_SUCH_LEDGER: WireCode(NoSuchLedgerError, ErrorKind.not_found, False, _MISSING),
    ErrorCode.NO_SUCH_ENTRY: WireCode(NoSuchEntryError, ErrorKind.not_found, False, _MISSING),
    ErrorCode.FENCED: WireCode(FencedError, ErrorKind.internal, False),
    ErrorCode.READ_ONLY: WireCode(ReadOnlyError, ErrorKind.unavailable, False, _STORAGE),
    ErrorCode.TOO_MANY_REQUESTS: WireCode(BookieError, ErrorKind.unavailable, True, _STORAGE),
    ErrorCode.BAD_REQUEST: WireCode(BookieError, ErrorKind.internal, False),
    ErrorCode.INTERNAL: WireCode(BookieError, ErrorKind.internal, False),
    ErrorCode.UNAVAILABLE: WireCode(BookieError, ErrorKind.unavailable, True, _STORAGE),
    ErrorCode.TIMEOUT: WireCode(BookieError, ErrorKind.unavailable, True, _STORAGE),
    ErrorCode.CORRUPT: WireCode(BookieError, ErrorKind.internal, False),
    # A misconfigured secret or certificate: nothing a retry fixes, and to a caller the bookie
    # is as good as down.
    ErrorCode.NOT_AUTHENTICATED: WireCode(BookieError, ErrorKind.unavailable, False, _STORAGE),
}


def error_from_code(code: int, message: str, ledger_id: int = -1, entry_id: int = -1) -> BookieError:
    """The typed error for a non-OK reply (so callers can catch NoSuchEntryError etc.); a code
    this side does not know is an internal error that names it."""
    try:
        ec = ErrorCode(code)
    except ValueError:
        return BookieError(ErrorCode.INTERNAL, f"unknown error code {code}: {message}")
    return WIRE_CODES[ec].error.from_reply(ec, message, ledger_id, entry_id)


class ShortOfQuorumError(BookieError):
    """Recovery found an entry it cannot bring to an ack quorum of its write set: `unreachable`
    members neither hold it nor could take a copy. The ledger must not be closed like this; the
    ledger manager replaces them (an ensemble change from `entry_id` on) or recovery fails."""

    def __init__(self, ledger_id: int, entry_id: int, holders: int, unreachable: tuple[str, ...]) -> None:
        super().__init__(
            ErrorCode.UNAVAILABLE,
            f"recovery of ledger {ledger_id}: entry {entry_id} is on {holders} bookies, fewer than the "
            f"ack quorum; {', '.join(unreachable) or 'none'} could not take a copy; retry when more "
            "bookies are up",
        )
        self.ledger_id = ledger_id
        self.entry_id = entry_id
        self.unreachable = unreachable


class InstanceReplacedError(QuireError):
    """A bookie's registration carries an instance other than the one its cookie in the store
    names: the bookie id now belongs to another process (formatted as new since), and this one
    must stop serving under it. Two processes under one id would each answer for entries only
    one of them holds."""

    kind = ErrorKind.conflict
    title = "Bookie instance replaced"


class ProcessReplacedError(InstanceReplacedError):
    """A heartbeat from a process other than the one the bookie's registration names: another
    process (on the same disk, or a copy of it) registered under the id since, this one having
    been silent for a whole heartbeat timeout (paused, cut off); this one must stop."""

    title = "Bookie process replaced"


class TwinBookieError(QuireError):
    """A bookie process found another one, alive, registered under its id (its heartbeat moved
    while this one watched): a second process on a copy of the disk, or the same bookie started
    twice. It refuses to start: two processes under one id would each answer for the other's
    writes."""

    kind = ErrorKind.conflict
    title = "Bookie id served by another process"
