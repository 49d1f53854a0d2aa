"""Rotten copies in the under-replicated list: entries a bookie holds but whose stored checksum
fails (found by its scrub, `bookie/scrubber.py`), rewritten in place by a recovery worker.

- underreplicated_ledgers.rotten: JSON list of [bookie, entry_id]; NULL for rows written before
  (none).

Revision ID: 0013
Revises: 0012
Create Date: 2026-11-29
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision: str = "0013"
down_revision: str | None = "0012"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

JSON = sa.JSON().with_variant(postgresql.JSONB(), "postgresql")


def upgrade() -> None:
    with op.batch_alter_table("underreplicated_ledgers") as batch:
        batch.add_column(sa.Column("rotten", JSON, nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("underreplicated_ledgers") as batch:
        batch.drop_column("rotten")
