"""Per-segment bookie instance ids: a "not there" counts only from the instance recorded.

- ledgers.instances: JSON list of [first_entry_id, bookie, instance_id], the cookie instance
  each bookie reported when it entered that segment of the ensemble history. NULL for rows
  written before: no instance known, and such bookies are judged as before.

Revision ID: 0011
Revises: 0010
Create Date: 2026-11-29
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision: str = "0011"
down_revision: str | None = "0010"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

JSON = sa.JSON().with_variant(postgresql.JSONB(), "postgresql")


def upgrade() -> None:
    with op.batch_alter_table("ledgers") as batch:
        batch.add_column(sa.Column("instances", JSON, nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("ledgers") as batch:
        batch.drop_column("instances")
