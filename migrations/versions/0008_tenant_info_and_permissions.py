"""Security: a tenant's TenantInfo and a namespace's permissions, as Pulsar keeps them.

- tenants.admin_roles: the roles that administer the tenant (JSON list; NULL for none).
- tenants.allowed_clusters: the clusters the tenant may use (JSON list; NULL for none), stored
  and shown as Pulsar's TenantInfo carries it.
- namespaces.permissions: role -> the actions granted to it on the namespace, `produce` and
  `consume` (JSON object; NULL for none).

Revision ID: 0008
Revises: 0007
Create Date: 2026-12-02
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision: str = "0008"
down_revision: str | None = "0007"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

JSON = sa.JSON().with_variant(postgresql.JSONB(), "postgresql")


def upgrade() -> None:
    op.add_column("tenants", sa.Column("admin_roles", JSON, nullable=True))
    op.add_column("tenants", sa.Column("allowed_clusters", JSON, nullable=True))
    op.add_column("namespaces", sa.Column("permissions", JSON, nullable=True))


def downgrade() -> None:
    # Plain ALTER TABLE ... DROP COLUMN (SQLite 3.35 and later), not a batch copy of the table:
    # namespaces refers to tenants, so SQLite would refuse to drop and re-create tenants.
    op.drop_column("namespaces", "permissions")
    op.drop_column("tenants", "allowed_clusters")
    op.drop_column("tenants", "admin_roles")
