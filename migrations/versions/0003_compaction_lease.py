"""Compaction: the run lease. A RUNNING state names the compactor instance that holds it and
when the lease lapses; a lapsed lease means the run is dead and reads as ERROR.

Rows written before this revision get no holder and no expiry; a RUNNING row without an expiry
reads as a lapsed run (no compactor of this version renews it).

Revision ID: 0003
Revises: 0002
Create Date: 2026-11-23
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0003"
down_revision: str | None = "0002"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("compaction_states") as batch:
        batch.add_column(sa.Column("lease_holder", sa.String(256), nullable=False, server_default=""))
        batch.add_column(sa.Column("lease_expires_ms", sa.BigInteger, nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("compaction_states") as batch:
        batch.drop_column("lease_expires_ms")
        batch.drop_column("lease_holder")
