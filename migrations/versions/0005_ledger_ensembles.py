"""Ledger ensemble history: a JSON list of [first_entry_id, [bookie, ...]] segments per ledger.

Rows written before this revision keep NULL, which the store reads as the ledger's first
ensemble from entry 0 (no ensemble change happened to them: the writer could not make one).

Revision ID: 0005
Revises: 0004
Create Date: 2026-11-23
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects.postgresql import JSONB

revision: str = "0005"
down_revision: str | None = "0004"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    json_type = sa.JSON().with_variant(JSONB(), "postgresql")
    with op.batch_alter_table("ledgers") as batch:
        batch.add_column(sa.Column("ensembles", json_type, nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("ledgers") as batch:
        batch.drop_column("ensembles")
