"""Bookie registry: a row per registered bookie (state, heartbeat, free bytes, ledger count) and
a row per bookie cookie (the instance id and data directory of its disk).

Revision ID: 0004
Revises: 0003
Create Date: 2026-11-23
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0004"
down_revision: str | None = "0003"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "bookies",
        sa.Column("bookie_id", sa.String(255), primary_key=True),
        sa.Column("instance_id", sa.String(64), nullable=False),
        sa.Column("state", sa.String(16), nullable=False),
        sa.Column("heartbeat_ms", sa.BigInteger, nullable=False),
        sa.Column("free_bytes", sa.BigInteger, nullable=False),
        sa.Column("ledgers", sa.BigInteger, nullable=False),
    )
    op.create_table(
        "bookie_cookies",
        sa.Column("bookie_id", sa.String(255), primary_key=True),
        sa.Column("instance_id", sa.String(64), nullable=False),
        sa.Column("data_dir", sa.Text, nullable=False),
        sa.Column("created_ms", sa.BigInteger, nullable=False),
        sa.Column("version", sa.Integer, nullable=False),
    )


def downgrade() -> None:
    op.drop_table("bookie_cookies")
    op.drop_table("bookies")
