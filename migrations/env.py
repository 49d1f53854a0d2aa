"""Alembic environment of Quire's metadata store.

Run in code by `managed_ledger.metadata.schema.upgrade_to_head`, which hands over an open
connection (already holding the migration lock) in `config.attributes["connection"]`; or by the
`alembic` command with `-c migrations/alembic.ini`, which names the database with `-x url=...`,
`sqlalchemy.url` or QUIRE_DATABASE_URL. The whole upgrade runs in one transaction (PostgreSQL
and, with the engine's explicit BEGIN, SQLite too), so a crash leaves the previous revision.
"""

from __future__ import annotations

import os

from alembic import context
from sqlalchemy.engine import Connection

from managed_ledger.metadata.engine import make_engine
from managed_ledger.metadata.models import Base

config = context.config
target_metadata = Base.metadata


def _url() -> str:
    url = context.get_x_argument(as_dictionary=True).get("url") or config.get_main_option("sqlalchemy.url")
    url = url or os.environ.get("QUIRE_DATABASE_URL", "")
    if not url:
        raise SystemExit("no database URL: pass -x url=..., set sqlalchemy.url or QUIRE_DATABASE_URL")
    return url


def _run(connection: Connection) -> None:
    context.configure(
        connection=connection,
        target_metadata=target_metadata,
        compare_type=True,
        # Our SQLite engine sends an explicit BEGIN (engine.py), so its DDL is transactional too.
        transactional_ddl=True,
        render_as_batch=connection.dialect.name == "sqlite",  # SQLite cannot ALTER most things
    )
    with context.begin_transaction():
        context.run_migrations()


def run_offline() -> None:
    context.configure(url=_url(), target_metadata=target_metadata, literal_binds=True)
    with context.begin_transaction():
        context.run_migrations()


def run_online() -> None:
    connection = config.attributes.get("connection")
    if connection is not None:
        _run(connection)
        return
    engine = make_engine(_url())
    try:
        with engine.connect() as conn:
            _run(conn)
            conn.commit()
    finally:
        engine.dispose()


if context.is_offline_mode():
    run_offline()
else:
    run_online()
