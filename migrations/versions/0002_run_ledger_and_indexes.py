"""Compaction: remember the ledger a running compaction writes (so a restart can delete it);
index the foreign keys that listing namespaces and topics filters on.

Revision ID: 0002
Revises: 0001
Create Date: 2026-05-09
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0002"
down_revision: str | None = "0001"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("compaction_states") as batch:
        batch.add_column(sa.Column("run_ledger_id", sa.BigInteger, nullable=True))
    op.create_index("ix_namespaces_tenant", "namespaces", ["tenant"])
    op.create_index("ix_topics_namespace", "topics", ["namespace"])


def downgrade() -> None:
    op.drop_index("ix_topics_namespace", table_name="topics")
    op.drop_index("ix_namespaces_tenant", table_name="namespaces")
    with op.batch_alter_table("compaction_states") as batch:
        batch.drop_column("run_ledger_id")
