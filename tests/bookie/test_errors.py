"""The bookie's wire codes: one table says which error each code becomes, and the client's
`reply_error` builds errors from replies through it."""

from __future__ import annotations

import pytest

from bookie.client import reply_error
from bookie.errors import (
    WIRE_CODES,
    BookieError,
    ErrorCode,
    FencedError,
    NoSuchEntryError,
    NoSuchLedgerError,
    ReadOnlyError,
    error_from_code,
)
from bookie.protocol import CODE
from common.errors import ErrorKind

# code -> (error class, kind, retriable), written out so a change to the table is a visible one.
EXPECTED = {
    ErrorCode.OK: (BookieError, ErrorKind.internal, False),
    ErrorCode.NO_SUCH_LEDGER: (NoSuchLedgerError, ErrorKind.not_found, False),
    ErrorCode.NO_SUCH_ENTRY: (NoSuchEntryError, ErrorKind.not_found, False),
    ErrorCode.FENCED: (FencedError, ErrorKind.internal, False),
    ErrorCode.READ_ONLY: (ReadOnlyError, ErrorKind.unavailable, False),
    ErrorCode.TOO_MANY_REQUESTS: (BookieError, ErrorKind.unavailable, True),
    ErrorCode.BAD_REQUEST: (BookieError, ErrorKind.internal, False),
    ErrorCode.INTERNAL: (BookieError, ErrorKind.internal, False),
    ErrorCode.UNAVAILABLE: (BookieError, ErrorKind.unavailable, True),
    ErrorCode.TIMEOUT: (BookieError, ErrorKind.unavailable, True),
    ErrorCode.CORRUPT: (BookieError, ErrorKind.internal, False),
    ErrorCode.NOT_AUTHENTICATED: (BookieError, ErrorKind.unavailable, False),
}


def test_the_table_covers_every_code() -> None:
    assert set(WIRE_CODES) == set(ErrorCode) == set(EXPECTED)


@pytest.mark.parametrize("code", list(ErrorCode))
def test_every_wire_code(code: ErrorCode) -> None:
    cls, kind, retriable = EXPECTED[code]
    err = error_from_code(int(code), "why", 7, 3)
    assert type(err) is cls
    assert (err.code, err.kind, err.retriable) == (code, kind, retriable)
    # The class and a directly built error of the same code agree.
    assert (BookieError(code).kind, BookieError(code).retriable) == (kind, retriable)


def test_errors_name_what_is_missing_or_why() -> None:
    assert str(error_from_code(ErrorCode.NO_SUCH_ENTRY, "", 7, 3)) == "NO_SUCH_ENTRY: ledger 7 entry 3"
    assert str(error_from_code(ErrorCode.NO_SUCH_LEDGER, "", 7)) == "NO_SUCH_LEDGER: ledger 7"
    assert str(error_from_code(ErrorCode.FENCED, "", 7)) == "FENCED: ledger 7 is fenced"
    assert str(error_from_code(ErrorCode.READ_ONLY, "", 7)) == "READ_ONLY: bookie is read-only"
    assert str(error_from_code(ErrorCode.READ_ONLY, "disk full", 7)) == "READ_ONLY: disk full"
    assert str(error_from_code(ErrorCode.TIMEOUT, "no reply", 7)) == "TIMEOUT: no reply"


def test_an_unknown_code_is_an_internal_error_that_names_it() -> None:
    err = error_from_code(999, "what", 7)
    assert type(err) is BookieError
    assert err.code == ErrorCode.INTERNAL and err.kind == ErrorKind.internal
    assert "unknown error code 999: what" in str(err)


@pytest.mark.parametrize("code", [*list(ErrorCode), 999])
def test_reply_error_builds_through_the_table(code: int) -> None:
    body = CODE.pack(code) + b"why"
    got, want = reply_error(body, 7, 3), error_from_code(code, "why", 7, 3)
    assert (type(got), str(got)) == (type(want), str(want))
    assert (got.kind, got.retriable) == (want.kind, want.retriable)


def test_a_reply_too_short_for_a_code_is_a_bad_request() -> None:
    err = reply_error(b"\x01", 7)
    assert err.code == ErrorCode.BAD_REQUEST and err.kind == ErrorKind.internal
