"""The metadata schema's revision: upgrade to head at start, or refuse a schema that is behind.

Alembic is driven in code with a Config built here (script_location = the installed `migrations`
package), so it works from a wheel as from a checkout; `migrations/alembic.ini` is only for the
`alembic` command. Concurrent starters are serialised: PostgreSQL takes a transaction-scoped
advisory lock, SQLite's BEGIN IMMEDIATE (engine.py) holds the write lock; either way the second
process reads the revision only after the first committed, and finds nothing to do.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from importlib.resources import files

from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from alembic.util.exc import CommandError
from sqlalchemy import Engine, text
from sqlalchemy.exc import DBAPIError, OperationalError

from managed_ledger.metadata.api import MetadataError, SchemaBehindError
from managed_ledger.metadata.engine import make_engine
from managed_ledger.metadata.sql_errors import unavailable_error

# Any fixed 64-bit key; it only has to be the same in every Quire process ("QUIRE" in ASCII).
MIGRATION_LOCK_KEY = 0x5155495245
UPGRADE_HINT = (
    "run `python -m migrations upgrade --database-url URL` (or `alembic -c migrations/alembic.ini "
    "-x url=URL upgrade head`), or start with auto-migrate on (QUIRE_AUTO_MIGRATE=true)"
)


def alembic_config() -> Config:
    cfg = Config()
    cfg.set_main_option("script_location", str(files("migrations")))
    return cfg


def _scripts() -> ScriptDirectory:
    return ScriptDirectory.from_config(alembic_config())


def head_revision() -> str:
    head = _scripts().get_current_head()
    assert head is not None, "the migrations package has no revisions"
    return head


def revisions() -> list[str]:
    """Every revision, oldest first."""
    return [rev.revision for rev in reversed(list(_scripts().walk_revisions()))]


@contextmanager
def _engine(url_or_engine: str | Engine) -> Iterator[Engine]:
    if isinstance(url_or_engine, Engine):
        yield url_or_engine
        return
    engine = make_engine(url_or_engine)
    try:
        yield engine
    finally:
        engine.dispose()


def current_revision(url_or_engine: str | Engine) -> str | None:
    """The database's revision; None for a database Quire has never migrated."""
    try:
        with _engine(url_or_engine) as engine, engine.connect() as conn:
            return MigrationContext.configure(conn).get_current_revision()
    except OperationalError as exc:
        raise unavailable_error(exc) from exc
    except DBAPIError as exc:
        raise MetadataError(f"metadata database error: {exc.orig}") from exc


def _check_known(current: str | None) -> None:
    if current is not None and current not in revisions():
        raise MetadataError(
            f"metadata schema at revision {current}, which this Quire does not know (its newest is "
            f"{head_revision()}): the database was migrated by a newer Quire; upgrade Quire"
        )


def upgrade_to_head(url_or_engine: str | Engine, revision: str = "head") -> None:
    """Upgrade the schema to `revision` (head by default) in one transaction, under a lock."""
    cfg = alembic_config()
    try:
        with _engine(url_or_engine) as engine, engine.begin() as conn:
            if conn.dialect.name == "postgresql":
                conn.execute(text("SELECT pg_advisory_xact_lock(:key)"), {"key": MIGRATION_LOCK_KEY})
            _check_known(MigrationContext.configure(conn).get_current_revision())
            cfg.attributes["connection"] = conn
            command.upgrade(cfg, revision)
    except CommandError as exc:
        raise MetadataError(f"metadata schema upgrade to {revision} failed: {exc}") from exc
    except OperationalError as exc:
        raise unavailable_error(exc) from exc
    except DBAPIError as exc:
        raise MetadataError(f"metadata schema upgrade to {revision} failed: {exc.orig}") from exc


def check_schema(url_or_engine: str | Engine) -> None:
    """Raise SchemaBehindError unless the database is at this Quire's head revision."""
    current = current_revision(url_or_engine)
    head = head_revision()
    if current == head:
        return
    _check_known(current)
    shown = current if current is not None else "none (empty database)"
    raise SchemaBehindError(f"metadata schema at revision {shown}, this Quire needs {head}: {UPGRADE_HINT}")
