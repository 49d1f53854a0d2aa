"""Per-process bookie registration: the process that registered a bookie id, new at every start,
so that a second process on a copy of a bookie's disk (the same cookie instance) is refused.

- bookies.process_id: the registering process's id; "" for rows written before (anyone's).

Revision ID: 0014
Revises: 0013
Create Date: 2026-11-29
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0014"
down_revision: str | None = "0013"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("bookies") as batch:
        batch.add_column(sa.Column("process_id", sa.String(64), nullable=False, server_default=""))


def downgrade() -> None:
    with op.batch_alter_table("bookies") as batch:
        batch.drop_column("process_id")
