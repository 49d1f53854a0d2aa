"""A broker's Pulsar listener in its registration, so that another broker's LOOKUP can send a
Pulsar client to the topic's owner (as `kafka_url` does for Kafka's Metadata).

- brokers.pulsar_url: "pulsar://host:port", or "" when the broker has no Pulsar listener (rows
  written before: "").

Revision ID: 0012
Revises: 0011
Create Date: 2026-11-29
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0012"
down_revision: str | None = "0011"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("brokers") as batch:
        batch.add_column(sa.Column("pulsar_url", sa.String(1024), nullable=False, server_default=""))


def downgrade() -> None:
    with op.batch_alter_table("brokers") as batch:
        batch.drop_column("pulsar_url")
