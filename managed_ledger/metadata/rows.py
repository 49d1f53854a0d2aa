"""Records <-> rows of the SQL store: the only place that knows both shapes.

Positions are stored as two BIGINT columns (ledger id, entry id) so that they sort and compare
in SQL; lists of ranges, ensembles, ledger lists and free-form properties are JSON. Values read
back go through `records.*` so they come out frozen and as tuples, like the memory store's.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import Any, TypeVar, cast

from sqlalchemy import Table, bindparam, update

from managed_ledger.metadata import records
from managed_ledger.metadata.api import (
    CompactionState,
    CompactionStatus,
    CursorMetadata,
    DedupSnapshot,
    LedgerMetadata,
    LedgerState,
    ManagedLedgerMetadata,
    TopicMetadata,
)
from managed_ledger.metadata.models import (
    CompactionStateRow,
    CursorRow,
    DedupSnapshotRow,
    LedgerRow,
    ManagedLedgerRow,
    NamespaceRow,
    PolicyRow,
    TenantRow,
    TopicRow,
)

Row = Mapping[str, Any]
R = TypeVar(
    "R", LedgerMetadata, ManagedLedgerMetadata, CursorMetadata, DedupSnapshot, TopicMetadata, CompactionState
)


def _table(model: type[Any]) -> Table:
    return cast(Table, model.__table__)


LEDGERS = _table(LedgerRow)
MANAGED_LEDGERS = _table(ManagedLedgerRow)
CURSORS = _table(CursorRow)
DEDUP = _table(DedupSnapshotRow)
TENANTS = _table(TenantRow)
NAMESPACES = _table(NamespaceRow)
TOPICS = _table(TopicRow)
POLICIES = _table(PolicyRow)
COMPACTIONS = _table(CompactionStateRow)


def bump(rec: R) -> R:
    """The record as stored by a successful CAS write."""
    return replace(rec, version=rec.version + 1)


def with_version(rec: R, version: int) -> R:
    return replace(rec, version=version)


# --- ledgers -------------------------------------------------------------------------------------
def ledger_values(rec: LedgerMetadata) -> dict[str, Any]:
    return {
        "ensemble": list(rec.ensemble),
        "ensembles": [[first, list(bookies)] for first, bookies in rec.history()],
        "instances": [[first, bookie, instance] for first, bookie, instance in rec.instances] or None,
        "write_quorum": rec.write_quorum,
        "ack_quorum": rec.ack_quorum,
        "state": rec.state.value,
        "last_entry_id": rec.last_entry_id,
        "length_bytes": rec.length_bytes,
        "created_ms": rec.created_ms,
        "closed_ms": rec.closed_ms,
    }


def ledger_from_row(row: Row) -> LedgerMetadata:
    return records.ledger(
        LedgerMetadata(
            ledger_id=int(row["id"]),
            ensemble=tuple(row["ensemble"]),
            write_quorum=row["write_quorum"],
            ack_quorum=row["ack_quorum"],
            state=LedgerState(row["state"]),
            last_entry_id=row["last_entry_id"],
            length_bytes=row["length_bytes"],
            created_ms=row["created_ms"],
            closed_ms=row["closed_ms"],
            version=row["version"],
            # NULL in rows written before revision 0005: the first ensemble from entry 0.
            ensembles=tuple((int(f), tuple(b)) for f, b in row["ensembles"] or ()),
            # NULL in rows written before revision 0011: no instance known, judged as before.
            instances=tuple((int(f), str(b), str(i)) for f, b, i in row["instances"] or ()),
        )
    )


# --- managed ledgers, cursors, dedup -------------------------------------------------------------
def managed_ledger_values(rec: ManagedLedgerMetadata) -> dict[str, Any]:
    return {"ledger_ids": list(rec.ledger_ids), "properties": dict(rec.properties)}


def managed_ledger_from_row(row: Row) -> ManagedLedgerMetadata:
    return records.managed_ledger(
        ManagedLedgerMetadata(
            name=row["name"],
            ledger_ids=row["ledger_ids"],
            properties=row["properties"],
            version=row["version"],
        )
    )


def cursor_values(rec: CursorMetadata) -> dict[str, Any]:
    return {
        "mark_delete_ledger_id": rec.mark_delete[0],
        "mark_delete_entry_id": rec.mark_delete[1],
        "individually_deleted": records.thaw(rec.individually_deleted),
        "properties": records.thaw(rec.properties),
        "delivery_state": records.thaw(rec.delivery_state),
    }


def cursor_from_row(row: Row) -> CursorMetadata:
    return records.cursor(
        CursorMetadata(
            managed_ledger=row["managed_ledger"],
            name=row["name"],
            mark_delete=(row["mark_delete_ledger_id"], row["mark_delete_entry_id"]),
            individually_deleted=row["individually_deleted"],
            properties=row["properties"],
            version=row["version"],
            delivery_state=row["delivery_state"],
        )
    )


# One statement for a whole flush of cursors, run as an executemany.
CURSOR_BATCH_UPDATE = (
    update(CURSORS)
    .where(
        CURSORS.c.managed_ledger == bindparam("b_managed_ledger"),
        CURSORS.c.name == bindparam("b_name"),
        CURSORS.c.version == bindparam("b_version"),
    )
    .values(
        mark_delete_ledger_id=bindparam("b_mark_delete_ledger_id"),
        mark_delete_entry_id=bindparam("b_mark_delete_entry_id"),
        individually_deleted=bindparam("b_individually_deleted", type_=CURSORS.c.individually_deleted.type),
        properties=bindparam("b_properties", type_=CURSORS.c.properties.type),
        delivery_state=bindparam("b_delivery_state", type_=CURSORS.c.delivery_state.type),
        version=bindparam("b_new_version"),
    )
)


def cursor_batch_params(rec: CursorMetadata) -> dict[str, Any]:
    params = {f"b_{k}": v for k, v in cursor_values(rec).items()}
    params.update(
        b_managed_ledger=rec.managed_ledger,
        b_name=rec.name,
        b_version=rec.version,
        b_new_version=rec.version + 1,
    )
    return params


def dedup_values(rec: DedupSnapshot) -> dict[str, Any]:
    return {
        "position_ledger_id": rec.position[0],
        "position_entry_id": rec.position[1],
        "sequences": dict(rec.sequences),
    }


def dedup_from_row(row: Row) -> DedupSnapshot:
    return records.dedup(
        DedupSnapshot(
            managed_ledger=row["managed_ledger"],
            position=(row["position_ledger_id"], row["position_entry_id"]),
            sequences=row["sequences"],
            version=row["version"],
        )
    )


# --- topics and compaction -----------------------------------------------------------------------
def topic_values(rec: TopicMetadata) -> dict[str, Any]:
    return {"partitions": rec.partitions, "created_ms": rec.created_ms}


def topic_from_row(row: Row) -> TopicMetadata:
    return TopicMetadata(
        name=row["name"], partitions=row["partitions"], created_ms=row["created_ms"], version=row["version"]
    )


_COMPACTION_PLAIN = (
    "compacted_ledger_id",
    "last_error",
    "requested",
    "started_ms",
    "ended_ms",
    "messages_in",
    "messages_out",
    "compacted_entries",
    "compacted_size_bytes",
    "last_succeeded_ms",
    "last_failed_ms",
    "run_ledger_id",
    "lease_holder",
    "lease_expires_ms",
    "delta_size_bytes",
    "view_rules",
)


def compaction_values(rec: CompactionState) -> dict[str, Any]:
    horizon = rec.horizon if rec.horizon is not None else (None, None, None)
    values = {name: getattr(rec, name) for name in _COMPACTION_PLAIN}
    values.update(
        status=rec.status.value,
        horizon_ledger_id=horizon[0],
        horizon_entry_id=horizon[1],
        horizon_batch_index=horizon[2],
        delta_ledger_ids=list(rec.delta_ledger_ids) or None,
        retired_ledger_ids=list(rec.retired_ledger_ids) or None,
    )
    return values


def compaction_from_row(row: Row) -> CompactionState:
    horizon = None
    if row["horizon_ledger_id"] is not None:
        horizon = (row["horizon_ledger_id"], row["horizon_entry_id"], row["horizon_batch_index"])
    plain = {name: row[name] for name in _COMPACTION_PLAIN}
    plain["requested"] = bool(plain["requested"])
    return records.compaction(
        CompactionState(
            topic=row["topic"],
            horizon=horizon,
            status=CompactionStatus(row["status"]),
            delta_ledger_ids=tuple(row["delta_ledger_ids"] or ()),
            retired_ledger_ids=tuple(row["retired_ledger_ids"] or ()),
            version=row["version"],
            **plain,
        )
    )
