"""The metadata stores' bookie methods (`bookie.registry.BookieDirectory`): registrations and
cookies, for the SQL store and the in-memory one, mixed into each store class.

Registrations are upserts by the bookie itself, compared against its cookie: a record whose
instance id is not the one the stored cookie names is refused (`InstanceReplacedError`), so a
second process under one bookie id (a paused one resuming after the id was formatted anew) can
neither heartbeat nor flip the row's instance, and stops. A registration may also name the
process it expects to find registered (`expect_process`): one that finds another process there
is refused (`ProcessReplacedError`), so two processes on one disk (a copy of it) cannot both
heartbeat under one id. A stored DECOMMISSIONING or
DECOMMISSIONED state survives heartbeats: an operator (or the auditor, once the bookie is
drained) set it through `set_bookie_state`, the only way to change it. Cookies follow the put_*
rule of the other records: version 0 creates, version v replaces version v, anything else is a
stale version.
"""

from __future__ import annotations

import threading
from dataclasses import replace
from typing import Any, cast

from sqlalchemy import Table, insert, select, update

from bookie.errors import InstanceReplacedError, ProcessReplacedError
from bookie.registry import OPERATOR_STATES, STORED_STATES, BookieCookie, BookieRecord, BookieState
from managed_ledger.metadata.api import BadVersionError, NotFoundError
from managed_ledger.metadata.engine import Transactional
from managed_ledger.metadata.models import BookieCookieRow, BookieRow

BOOKIES = cast(Table, BookieRow.__table__)
COOKIES = cast(Table, BookieCookieRow.__table__)


def _checked(record: BookieRecord) -> BookieRecord:
    if not record.bookie_id:
        raise ValueError("a bookie needs an id (its advertised host:port)")
    if record.state not in STORED_STATES:
        raise ValueError(f"bookie state {record.state} is not stored (down means: heartbeat expired)")
    return record


def _same_instance(record: BookieRecord, cookie_instance: str | None) -> None:
    """Refuse a registration from another instance than the stored cookie's (module docstring)."""
    if cookie_instance is not None and cookie_instance != record.instance_id:
        raise InstanceReplacedError(
            f"bookie {record.bookie_id} is now instance {cookie_instance} (formatted as new); "
            f"instance {record.instance_id} may no longer register under its id"
        )


def _same_process(record: BookieRecord, stored_process: str | None, expect: str | None) -> None:
    """Refuse a registration when another process took the id over (`put_bookie`)."""
    if expect is not None and stored_process not in (None, "", expect, record.process_id):
        raise ProcessReplacedError(
            f"bookie {record.bookie_id} is registered by process {stored_process} now; process "
            f"{record.process_id} may no longer register under its id"
        )


def _kept_state(stored: BookieState | None, reported: BookieState) -> BookieState:
    return stored if stored in OPERATOR_STATES else reported


def _record_from_row(row: Any) -> BookieRecord:
    return BookieRecord(
        bookie_id=row["bookie_id"],
        instance_id=row["instance_id"],
        state=BookieState(row["state"]),
        heartbeat_ms=int(row["heartbeat_ms"]),
        free_bytes=int(row["free_bytes"]),
        ledgers=int(row["ledgers"]),
        process_id=row["process_id"] or "",
    )


def _cookie_from_row(row: Any) -> BookieCookie:
    return BookieCookie(
        bookie_id=row["bookie_id"],
        instance_id=row["instance_id"],
        data_dir=row["data_dir"],
        created_ms=int(row["created_ms"]),
        version=int(row["version"]),
    )


class SqlBookieMethods:
    """Mixed into SqlMetadataStore: uses its `_read` / `_write` transactions."""

    def put_bookie(self: Transactional, record: BookieRecord, *, expect_process: str | None = None) -> None:
        new = _checked(record)
        with self._write() as conn:
            cookie = conn.execute(
                select(COOKIES.c.instance_id).where(COOKIES.c.bookie_id == new.bookie_id)
            ).scalar()
            _same_instance(new, cookie)
            row = conn.execute(
                select(BOOKIES.c.state, BOOKIES.c.process_id).where(BOOKIES.c.bookie_id == new.bookie_id)
            ).first()
            stored = None if row is None else row[0]
            _same_process(new, None if row is None else row[1], expect_process)
            values = {
                "instance_id": new.instance_id,
                "state": str(_kept_state(None if stored is None else BookieState(stored), new.state)),
                "heartbeat_ms": new.heartbeat_ms,
                "free_bytes": new.free_bytes,
                "ledgers": new.ledgers,
                "process_id": new.process_id,
            }
            if stored is None:
                conn.execute(insert(BOOKIES).values(bookie_id=new.bookie_id, **values))
            else:
                conn.execute(update(BOOKIES).where(BOOKIES.c.bookie_id == new.bookie_id).values(**values))

    def set_bookie_state(
        self: Transactional, bookie_id: str, state: BookieState, *, expect: BookieState | None = None
    ) -> BookieRecord:
        if state not in STORED_STATES:
            raise ValueError(f"bookie state {state} is not stored")
        where = BOOKIES.c.bookie_id == bookie_id
        guarded = where if expect is None else where & (BOOKIES.c.state == str(expect))
        with self._write() as conn:
            if conn.execute(update(BOOKIES).where(guarded).values(state=str(state))).rowcount != 1:
                row = conn.execute(select(BOOKIES).where(where)).mappings().first()
                if row is None:
                    raise NotFoundError(f"bookie {bookie_id} is not registered")
                raise BadVersionError(f"bookie {bookie_id} is {row['state']}, not {expect}")
            row = conn.execute(select(BOOKIES).where(where)).mappings().one()
        return _record_from_row(row)

    def list_bookies(self: Transactional) -> list[BookieRecord]:
        with self._read() as conn:
            result = conn.execute(select(BOOKIES).order_by(BOOKIES.c.bookie_id)).mappings().all()
        return [_record_from_row(r) for r in result]

    def get_bookie_cookie(self: Transactional, bookie_id: str) -> BookieCookie | None:
        with self._read() as conn:
            row = conn.execute(select(COOKIES).where(COOKIES.c.bookie_id == bookie_id)).mappings().first()
        return None if row is None else _cookie_from_row(row)

    def put_bookie_cookie(self: Transactional, cookie: BookieCookie) -> BookieCookie:
        what = f"cookie of bookie {cookie.bookie_id}"
        values = {
            "instance_id": cookie.instance_id,
            "data_dir": cookie.data_dir,
            "created_ms": cookie.created_ms,
        }
        with self._write(BadVersionError(f"{what}: version 0 is stale (one exists)")) as conn:
            if cookie.version == 0:
                conn.execute(insert(COOKIES).values(bookie_id=cookie.bookie_id, **values, version=1))
                return replace(cookie, version=1)
            where = COOKIES.c.bookie_id == cookie.bookie_id
            stmt = update(COOKIES).where(where, COOKIES.c.version == cookie.version)
            if conn.execute(stmt.values(**values, version=cookie.version + 1)).rowcount != 1:
                stored = conn.execute(select(COOKIES.c.version).where(where)).scalar()
                if stored is None:
                    raise NotFoundError(f"{what} not found")
                raise BadVersionError(f"{what}: version {cookie.version} is stale (stored version {stored})")
        return replace(cookie, version=cookie.version + 1)


class InMemoryBookieMethods:
    """Mixed into InMemoryMetadataStore: its own lock and dictionaries."""

    def __init__(self) -> None:
        self._bookie_lock = threading.Lock()
        self._bookies: dict[str, BookieRecord] = {}
        self._cookies: dict[str, BookieCookie] = {}

    def put_bookie(self, record: BookieRecord, *, expect_process: str | None = None) -> None:
        new = _checked(record)
        with self._bookie_lock:
            cookie = self._cookies.get(new.bookie_id)
            _same_instance(new, None if cookie is None else cookie.instance_id)
            stored = self._bookies.get(new.bookie_id)
            _same_process(new, None if stored is None else stored.process_id, expect_process)
            state = _kept_state(None if stored is None else stored.state, new.state)
            self._bookies[new.bookie_id] = replace(new, state=state)

    def set_bookie_state(
        self, bookie_id: str, state: BookieState, *, expect: BookieState | None = None
    ) -> BookieRecord:
        if state not in STORED_STATES:
            raise ValueError(f"bookie state {state} is not stored")
        with self._bookie_lock:
            stored = self._bookies.get(bookie_id)
            if stored is None:
                raise NotFoundError(f"bookie {bookie_id} is not registered")
            if expect is not None and stored.state != expect:
                raise BadVersionError(f"bookie {bookie_id} is {stored.state}, not {expect}")
            self._bookies[bookie_id] = replace(stored, state=state)
            return self._bookies[bookie_id]

    def list_bookies(self) -> list[BookieRecord]:
        with self._bookie_lock:
            return [self._bookies[b] for b in sorted(self._bookies)]

    def get_bookie_cookie(self, bookie_id: str) -> BookieCookie | None:
        with self._bookie_lock:
            return self._cookies.get(bookie_id)

    def put_bookie_cookie(self, cookie: BookieCookie) -> BookieCookie:
        what = f"cookie of bookie {cookie.bookie_id}"
        with self._bookie_lock:
            stored = self._cookies.get(cookie.bookie_id)
            if stored is None and cookie.version != 0:
                raise NotFoundError(f"{what} not found")
            stored_version = 0 if stored is None else stored.version
            if stored_version != cookie.version:
                raise BadVersionError(
                    f"{what}: version {cookie.version} is stale (stored version {stored_version})"
                )
            new = replace(cookie, version=cookie.version + 1)
            self._cookies[cookie.bookie_id] = new
            return new
