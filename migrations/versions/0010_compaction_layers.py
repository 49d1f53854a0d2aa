"""Incremental compaction: the compacted view is a base ledger plus small delta ledgers.

- compaction_states.delta_ledger_ids: the delta ledgers after the base (`compacted_ledger_id`),
  oldest first (JSON list; NULL for none).
- compaction_states.delta_size_bytes: their total size.
- compaction_states.view_rules: the rules (key-less policy, tombstone retention) the layers were
  written under; "" for a view written before layers existed, so its next run folds.
- compaction_states.retired_ledger_ids: layers a fold replaced and has not deleted yet (JSON
  list; NULL for none), deleted by the next run or compactor poll if the fold's compactor died.

Revision ID: 0010
Revises: 0009
Create Date: 2026-11-27
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision: str = "0010"
down_revision: str | None = "0009"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

JSON = sa.JSON().with_variant(postgresql.JSONB(), "postgresql")


def upgrade() -> None:
    op.add_column("compaction_states", sa.Column("delta_ledger_ids", JSON, nullable=True))
    op.add_column(
        "compaction_states", sa.Column("delta_size_bytes", sa.BigInteger, nullable=False, server_default="0")
    )
    op.add_column(
        "compaction_states", sa.Column("view_rules", sa.String(64), nullable=False, server_default="")
    )
    op.add_column("compaction_states", sa.Column("retired_ledger_ids", JSON, nullable=True))


def downgrade() -> None:
    op.drop_column("compaction_states", "retired_ledger_ids")
    op.drop_column("compaction_states", "view_rules")
    op.drop_column("compaction_states", "delta_size_bytes")
    op.drop_column("compaction_states", "delta_ledger_ids")
