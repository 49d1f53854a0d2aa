"""Initial schema: ledgers, managed ledgers, cursors, dedup snapshots, tenants, namespaces,
topics, policies, compaction states; seeds the `public` tenant and `public/default` namespace.

Revision ID: 0001
Revises:
Create Date: 2026-05-09
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects.postgresql import JSONB

revision: str = "0001"
down_revision: str | None = None
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

NAME = sa.String(1024)
JSON = sa.JSON().with_variant(JSONB(), "postgresql")


def _version() -> sa.Column:
    return sa.Column("version", sa.Integer, nullable=False)


def _ledgers(dialect: str) -> None:
    if dialect == "postgresql":
        # Ledger ids come from a sequence: unique and increasing across every broker.
        op.execute(sa.schema.CreateSequence(sa.Sequence("ledger_id_seq", start=1)))
        id_column = sa.Column(
            "id", sa.BigInteger, primary_key=True, server_default=sa.text("nextval('ledger_id_seq')")
        )
    else:
        # SQLite AUTOINCREMENT never reuses an id, even the highest one after a delete.
        id_column = sa.Column("id", sa.Integer, primary_key=True)
    op.create_table(
        "ledgers",
        id_column,
        sa.Column("ensemble", JSON, nullable=False),
        sa.Column("write_quorum", sa.Integer, nullable=False),
        sa.Column("ack_quorum", sa.Integer, nullable=False),
        sa.Column("state", sa.String(16), nullable=False),
        sa.Column("last_entry_id", sa.BigInteger, nullable=False),
        sa.Column("length_bytes", sa.BigInteger, nullable=False),
        sa.Column("created_ms", sa.BigInteger, nullable=False),
        sa.Column("closed_ms", sa.BigInteger, nullable=True),
        _version(),
        sqlite_autoincrement=True,
    )
    if dialect == "postgresql":
        op.execute("ALTER SEQUENCE ledger_id_seq OWNED BY ledgers.id")


def _managed_ledgers() -> None:
    op.create_table(
        "managed_ledgers",
        sa.Column("name", NAME, primary_key=True),
        sa.Column("ledger_ids", JSON, nullable=False),
        sa.Column("properties", JSON, nullable=False),
        _version(),
    )
    op.create_table(
        "cursors",
        sa.Column(
            "managed_ledger",
            NAME,
            sa.ForeignKey("managed_ledgers.name", ondelete="CASCADE"),
            primary_key=True,
        ),
        sa.Column("name", NAME, primary_key=True),
        sa.Column("mark_delete_ledger_id", sa.BigInteger, nullable=False),
        sa.Column("mark_delete_entry_id", sa.BigInteger, nullable=False),
        sa.Column("individually_deleted", JSON, nullable=False),
        sa.Column("properties", JSON, nullable=False),
        _version(),
    )
    op.create_table(
        "dedup_snapshots",
        sa.Column(
            "managed_ledger",
            NAME,
            sa.ForeignKey("managed_ledgers.name", ondelete="CASCADE"),
            primary_key=True,
        ),
        sa.Column("position_ledger_id", sa.BigInteger, nullable=False),
        sa.Column("position_entry_id", sa.BigInteger, nullable=False),
        sa.Column("sequences", JSON, nullable=False),
        _version(),
    )


def _names() -> None:
    tenants = op.create_table("tenants", sa.Column("name", NAME, primary_key=True), _version())
    namespaces = op.create_table(
        "namespaces",
        sa.Column("name", NAME, primary_key=True),
        sa.Column("tenant", NAME, sa.ForeignKey("tenants.name"), nullable=False),
        _version(),
    )
    op.create_table(
        "topics",
        sa.Column("name", NAME, primary_key=True),
        sa.Column("namespace", NAME, sa.ForeignKey("namespaces.name"), nullable=False),
        sa.Column("partitions", sa.Integer, nullable=False),
        sa.Column("created_ms", sa.BigInteger, nullable=False),
        _version(),
    )
    op.create_table(
        "policies",
        sa.Column("scope", NAME, primary_key=True),
        sa.Column("policies", JSON, nullable=False),
        _version(),
    )
    # `public/default` exists from the start, as in Pulsar.
    op.bulk_insert(tenants, [{"name": "public", "version": 1}])
    op.bulk_insert(namespaces, [{"name": "public/default", "tenant": "public", "version": 1}])


def _compaction_states() -> None:
    op.create_table(
        "compaction_states",
        sa.Column("topic", NAME, primary_key=True),
        sa.Column("compacted_ledger_id", sa.BigInteger, nullable=True),
        sa.Column("horizon_ledger_id", sa.BigInteger, nullable=True),
        sa.Column("horizon_entry_id", sa.BigInteger, nullable=True),
        sa.Column("horizon_batch_index", sa.BigInteger, nullable=True),
        sa.Column("status", sa.String(16), nullable=False),
        sa.Column("last_error", sa.Text, nullable=False),
        sa.Column("requested", sa.Boolean, nullable=False),
        sa.Column("started_ms", sa.BigInteger, nullable=True),
        sa.Column("ended_ms", sa.BigInteger, nullable=True),
        sa.Column("messages_in", sa.BigInteger, nullable=False),
        sa.Column("messages_out", sa.BigInteger, nullable=False),
        sa.Column("compacted_entries", sa.BigInteger, nullable=False),
        sa.Column("compacted_size_bytes", sa.BigInteger, nullable=False),
        sa.Column("last_succeeded_ms", sa.BigInteger, nullable=True),
        sa.Column("last_failed_ms", sa.BigInteger, nullable=True),
        _version(),
    )


def upgrade() -> None:
    dialect = op.get_bind().dialect.name
    _ledgers(dialect)
    _managed_ledgers()
    _names()
    _compaction_states()


def downgrade() -> None:
    for table in (
        "compaction_states",
        "policies",
        "topics",
        "namespaces",
        "tenants",
        "dedup_snapshots",
        "cursors",
        "managed_ledgers",
        "ledgers",
    ):
        op.drop_table(table)
    if op.get_bind().dialect.name == "postgresql":
        op.execute("DROP SEQUENCE IF EXISTS ledger_id_seq")
