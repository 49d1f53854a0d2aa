"""The reads an open makes, each in one transaction (SqlMetadataStore's part; the in-memory store
has its own): a managed ledger's record with its listed ledgers' rows, its cursors and its dedup
snapshot (`load_managed_ledger`), and the policies of several scopes (`get_policies_of`).

Opening a topic used to read these with one transaction each (issue 26: eleven store calls to
open a topic); the factory now reads a managed ledger with one call, and needs no bookie round
trip for a listed ledger that this read already shows CLOSED.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from sqlalchemy import select

from managed_ledger.metadata import rows
from managed_ledger.metadata.api import ManagedLedgerOpening
from managed_ledger.metadata.engine import Transactional
from managed_ledger.metadata.rows import CURSORS, DEDUP, LEDGERS, MANAGED_LEDGERS, POLICIES


class SqlOpeningMethods:
    """Mixed into SqlMetadataStore: uses its `_read` transactions."""

    def load_managed_ledger(self: Transactional, name: str) -> ManagedLedgerOpening | None:
        with self._read() as conn:
            record = select(MANAGED_LEDGERS).where(MANAGED_LEDGERS.c.name == name)
            row: Any = conn.execute(record).mappings().first()
            if row is None:
                return None
            meta = rows.managed_ledger_from_row(row)
            listed: list[Any] = []
            if meta.ledger_ids:
                stmt = select(LEDGERS).where(LEDGERS.c.id.in_(meta.ledger_ids))
                listed = list(conn.execute(stmt).mappings())
            where = CURSORS.c.managed_ledger == name
            by_name = select(CURSORS).where(where).order_by(CURSORS.c.name)
            cursors: list[Any] = list(conn.execute(by_name).mappings())
            dedup: Any = conn.execute(select(DEDUP).where(DEDUP.c.managed_ledger == name)).mappings().first()
        ledgers = {int(r["id"]): rows.ledger_from_row(r) for r in listed}
        return ManagedLedgerOpening(
            meta,
            ledgers,
            tuple(rows.cursor_from_row(c) for c in cursors),
            None if dedup is None else rows.dedup_from_row(dedup),
        )

    def get_policies_of(self: Transactional, scopes: Sequence[str]) -> dict[str, dict[str, Any]]:
        stmt = select(POLICIES.c.scope, POLICIES.c.policies).where(POLICIES.c.scope.in_(list(scopes)))
        with self._read() as conn:
            stored = {scope: dict(value) for scope, value in conn.execute(stmt) if value is not None}
        return {scope: stored.get(scope, {}) for scope in scopes}
