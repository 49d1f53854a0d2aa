"""Pulsar schemas: each topic's schema versions (the Pulsar door's schema registry).

- topic_schemas: one row per (topic, version), versions from 0 up: the schema's type (Pulsar's
  name: "AVRO", "JSON", "STRING", ...), its definition (schema_data, bytes as the client gave
  them), its properties (JSON object), when it was stored (epoch ms) and whether the row is a
  deletion mark (`deleted`: the topic's schema was deleted at this version; later versions
  start again without a predecessor).

Revision ID: 0015
Revises: 0014
Create Date: 2026-11-29
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0015"
down_revision: str | None = "0014"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "topic_schemas",
        sa.Column("topic", sa.String(1024), primary_key=True),
        sa.Column("version", sa.BigInteger, primary_key=True, autoincrement=False),
        sa.Column("schema_type", sa.String(64), nullable=False),
        sa.Column("schema_data", sa.LargeBinary, nullable=False),
        sa.Column("properties", sa.Text, nullable=False),
        sa.Column("created_ms", sa.BigInteger, nullable=False),
        sa.Column("deleted", sa.Boolean, nullable=False),
    )


def downgrade() -> None:
    op.drop_table("topic_schemas")
