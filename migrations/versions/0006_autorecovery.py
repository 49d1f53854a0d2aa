"""Auto-recovery: named leader leases (the auditor's election) and the under-replicated ledgers
recovery workers claim.

Revision ID: 0006
Revises: 0005
Create Date: 2026-11-23
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision: str = "0006"
down_revision: str | None = "0005"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

JSON = sa.JSON().with_variant(postgresql.JSONB(), "postgresql")


def upgrade() -> None:
    op.create_table(
        "leader_leases",
        sa.Column("name", sa.String(255), primary_key=True),
        sa.Column("holder", sa.String(255), nullable=False),
        sa.Column("expires_ms", sa.BigInteger, nullable=False),
        sa.Column("version", sa.Integer, nullable=False),
    )
    op.create_table(
        "underreplicated_ledgers",
        sa.Column("ledger_id", sa.BigInteger, primary_key=True, autoincrement=False),
        sa.Column("missing", JSON, nullable=False),
        sa.Column("marked_ms", sa.BigInteger, nullable=False),
        sa.Column("claimed_by", sa.String(255), nullable=False),
        sa.Column("claim_expires_ms", sa.BigInteger, nullable=False),
        sa.Column("version", sa.Integer, nullable=False),
    )


def downgrade() -> None:
    op.drop_table("underreplicated_ledgers")
    op.drop_table("leader_leases")
