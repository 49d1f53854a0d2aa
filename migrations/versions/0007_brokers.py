"""Several brokers: broker sessions, topic ownership, and the delivery state of cursors.

- brokers: one row per broker id (its advertised host:port): the current session (a random id
  per start or per lost session), its URLs, when its lease expires (renewed by heartbeats) and
  how many topics it reported owning.
- topic_owners: one row per owned topic: the broker and the session that own it. An ownership
  is valid while that broker's row still has that session and its lease has not expired (the
  ephemeral-node rule of Pulsar's ownership on ZooKeeper).
- cursors.delivery_state: what a subscription's consumers were handed and not yet acked, and
  acks inside batches (JSON; NULL for none), so a new owner of the topic carries them on.

Revision ID: 0007
Revises: 0006
Create Date: 2026-11-25
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision: str = "0007"
down_revision: str | None = "0006"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

JSON = sa.JSON().with_variant(postgresql.JSONB(), "postgresql")


def upgrade() -> None:
    op.create_table(
        "brokers",
        sa.Column("broker_id", sa.String(255), primary_key=True),
        sa.Column("session", sa.String(64), nullable=False),
        sa.Column("http_url", sa.String(1024), nullable=False),
        sa.Column("kafka_url", sa.String(1024), nullable=False),
        sa.Column("started_ms", sa.BigInteger, nullable=False),
        sa.Column("expires_ms", sa.BigInteger, nullable=False),
    )
    op.create_table(
        "topic_owners",
        sa.Column("topic", sa.String(1024), primary_key=True),
        sa.Column("broker_id", sa.String(255), nullable=False),
        sa.Column("session", sa.String(64), nullable=False),
        sa.Column("acquired_ms", sa.BigInteger, nullable=False),
        sa.Column("version", sa.Integer, nullable=False),
    )
    op.create_index("ix_topic_owners_broker", "topic_owners", ["broker_id", "session"])
    with op.batch_alter_table("cursors") as batch:
        batch.add_column(sa.Column("delivery_state", JSON, nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("cursors") as batch:
        batch.drop_column("delivery_state")
    op.drop_index("ix_topic_owners_broker", table_name="topic_owners")
    op.drop_table("topic_owners")
    op.drop_table("brokers")
