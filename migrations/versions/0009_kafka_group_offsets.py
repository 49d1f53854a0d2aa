"""Kafka consumer groups' committed offsets.

- kafka_group_offsets: one row per (group_id, topic, partition): the committed offset (the next
  offset the group consumes), the client's metadata string (committed_metadata) and the commit
  time (epoch ms).
  `topic` is the Quire topic `tenant/namespace/topic`; partition 0 for a topic that is not
  partitioned. Indexed by topic, so that deleting a topic deletes its offsets cheaply.

Revision ID: 0009
Revises: 0008
Create Date: 2026-12-04
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0009"
down_revision: str | None = "0008"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "kafka_group_offsets",
        sa.Column("group_id", sa.String(255), primary_key=True),
        sa.Column("topic", sa.String(1024), primary_key=True),
        sa.Column("partition", sa.Integer, primary_key=True, autoincrement=False),
        sa.Column("committed_offset", sa.BigInteger, nullable=False),
        sa.Column("committed_metadata", sa.Text, nullable=False),
        sa.Column("commit_time_ms", sa.BigInteger, nullable=False),
    )
    op.create_index("ix_kafka_group_offsets_topic", "kafka_group_offsets", ["topic"])


def downgrade() -> None:
    op.drop_index("ix_kafka_group_offsets_topic", table_name="kafka_group_offsets")
    op.drop_table("kafka_group_offsets")
