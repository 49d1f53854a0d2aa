"""The metadata stores' auto-recovery methods (`bookie.recovery_store.RecoveryStore`): leader
leases and under-replicated ledgers, for the SQL store and the in-memory one, mixed into each
store class. Both follow the put_* rule: version 0 creates, version v replaces version v.
"""

from __future__ import annotations

import threading
from dataclasses import replace
from typing import Any, cast

from sqlalchemy import Table, delete, insert, select, update

from bookie.recovery_store import LeaderLease, UnderReplicatedLedger
from managed_ledger.metadata.api import BadVersionError, MetadataError, NotFoundError
from managed_ledger.metadata.engine import Transactional
from managed_ledger.metadata.models import LeaderLeaseRow, UnderReplicatedRow

LEASES = cast(Table, LeaderLeaseRow.__table__)
UNDER = cast(Table, UnderReplicatedRow.__table__)


def _lease_from_row(row: Any) -> LeaderLease:
    return LeaderLease(row["name"], row["holder"], int(row["expires_ms"]), int(row["version"]))


def _under_from_row(row: Any) -> UnderReplicatedLedger:
    return UnderReplicatedLedger(
        ledger_id=int(row["ledger_id"]),
        missing=tuple(sorted(row["missing"])),
        marked_ms=int(row["marked_ms"]),
        claimed_by=row["claimed_by"],
        claim_expires_ms=int(row["claim_expires_ms"]),
        version=int(row["version"]),
        rotten=tuple(sorted((str(b), int(e)) for b, e in row["rotten"] or ())),
    )


def _checked(row: UnderReplicatedLedger) -> UnderReplicatedLedger:
    if not row.missing and not row.rotten:
        raise ValueError(f"under-replicated ledger {row.ledger_id} names no missing bookie or rotten copy")
    return replace(row, missing=tuple(sorted(set(row.missing))), rotten=tuple(sorted(set(row.rotten))))


def _stale(what: str, given: int, stored: int | None) -> MetadataError:
    if stored is None:
        return NotFoundError(f"{what} not found")
    return BadVersionError(f"{what}: version {given} is stale (stored version {stored})")


def _cas_put(
    store: Transactional, table: Table, key: Any, version: int, values: dict[str, Any], what: str
) -> None:
    """Insert at version 1 when `version` is 0, else update the row still at `version`."""
    key_column = table.primary_key.columns.values()[0]
    with store._write(BadVersionError(f"{what}: version 0 is stale (one exists)")) as conn:
        if version == 0:
            conn.execute(insert(table).values({key_column.name: key, **values, "version": 1}))
            return
        stmt = update(table).where(key_column == key, table.c.version == version)
        if conn.execute(stmt.values(**values, version=version + 1)).rowcount != 1:
            stored = conn.execute(select(table.c.version).where(key_column == key)).scalar()
            raise _stale(what, version, stored)


class SqlRecoveryMethods:
    """Mixed into SqlMetadataStore: uses its `_read` / `_write` transactions."""

    def get_lease(self: Transactional, name: str) -> LeaderLease | None:
        with self._read() as conn:
            row = conn.execute(select(LEASES).where(LEASES.c.name == name)).mappings().first()
        return None if row is None else _lease_from_row(row)

    def put_lease(self: Transactional, lease: LeaderLease) -> LeaderLease:
        values = {"holder": lease.holder, "expires_ms": lease.expires_ms}
        _cas_put(self, LEASES, lease.name, lease.version, values, f"lease {lease.name}")
        return replace(lease, version=lease.version + 1)

    def list_underreplicated(self: Transactional) -> list[UnderReplicatedLedger]:
        with self._read() as conn:
            result = conn.execute(select(UNDER).order_by(UNDER.c.ledger_id)).mappings().all()
        return [_under_from_row(r) for r in result]

    def get_underreplicated(self: Transactional, ledger_id: int) -> UnderReplicatedLedger | None:
        with self._read() as conn:
            row = conn.execute(select(UNDER).where(UNDER.c.ledger_id == ledger_id)).mappings().first()
        return None if row is None else _under_from_row(row)

    def put_underreplicated(self: Transactional, row: UnderReplicatedLedger) -> UnderReplicatedLedger:
        new = _checked(row)
        values = {
            "missing": list(new.missing),
            "marked_ms": new.marked_ms,
            "claimed_by": new.claimed_by,
            "claim_expires_ms": new.claim_expires_ms,
            "rotten": [[b, e] for b, e in new.rotten],
        }
        what = f"under-replicated ledger {new.ledger_id}"
        _cas_put(self, UNDER, new.ledger_id, new.version, values, what)
        return replace(new, version=new.version + 1)

    def delete_underreplicated(self: Transactional, ledger_id: int, version: int) -> None:
        where = UNDER.c.ledger_id == ledger_id
        with self._write() as conn:
            if conn.execute(delete(UNDER).where(where, UNDER.c.version == version)).rowcount != 1:
                stored = conn.execute(select(UNDER.c.version).where(where)).scalar()
                raise _stale(f"under-replicated ledger {ledger_id}", version, stored)


class InMemoryRecoveryMethods:
    """Mixed into InMemoryMetadataStore: its own lock and dictionaries."""

    def __init__(self) -> None:
        self._recovery_lock = threading.Lock()
        self._leases: dict[str, LeaderLease] = {}
        self._under: dict[int, UnderReplicatedLedger] = {}

    @staticmethod
    def _check(what: str, stored: Any, version: int) -> None:
        stored_version = None if stored is None else int(stored.version)
        if stored is None and version == 0:
            return
        if stored_version != version:
            if version == 0:
                raise BadVersionError(f"{what}: version 0 is stale (one exists)")
            raise _stale(what, version, stored_version)

    def get_lease(self, name: str) -> LeaderLease | None:
        with self._recovery_lock:
            return self._leases.get(name)

    def put_lease(self, lease: LeaderLease) -> LeaderLease:
        with self._recovery_lock:
            self._check(f"lease {lease.name}", self._leases.get(lease.name), lease.version)
            new = replace(lease, version=lease.version + 1)
            self._leases[lease.name] = new
            return new

    def list_underreplicated(self) -> list[UnderReplicatedLedger]:
        with self._recovery_lock:
            return [self._under[k] for k in sorted(self._under)]

    def get_underreplicated(self, ledger_id: int) -> UnderReplicatedLedger | None:
        with self._recovery_lock:
            return self._under.get(ledger_id)

    def put_underreplicated(self, row: UnderReplicatedLedger) -> UnderReplicatedLedger:
        new = _checked(row)
        with self._recovery_lock:
            what = f"under-replicated ledger {new.ledger_id}"
            self._check(what, self._under.get(new.ledger_id), new.version)
            stored = replace(new, version=new.version + 1)
            self._under[new.ledger_id] = stored
            return stored

    def delete_underreplicated(self, ledger_id: int, version: int) -> None:
        with self._recovery_lock:
            stored = self._under.get(ledger_id)
            if stored is None or stored.version != version:
                raise _stale(
                    f"under-replicated ledger {ledger_id}",
                    version,
                    None if stored is None else stored.version,
                )
            del self._under[ledger_id]
