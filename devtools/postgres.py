"""PostgreSQL schemas for local clusters: each test or benchmark run gets an empty schema of its
own on the server (reached through `search_path` in the URL), dropped with everything in it at the
end, so runs in parallel never see each other's tables."""

from __future__ import annotations

import os
import uuid

DEFAULT_URL = "postgresql+psycopg://postgres@127.0.0.1:5432/test"


def server_url(variable: str = "QUIRE_TEST_POSTGRES_URL") -> str:
    """The server's metadata URL from `variable`, else the local server."""
    return os.environ.get(variable, DEFAULT_URL)


def execute(base_url: str, sql: str) -> None:
    """One statement on the server of a metadata URL (autocommit)."""
    import psycopg

    dsn = base_url.replace("postgresql+psycopg://", "postgresql://")
    with psycopg.connect(dsn, autocommit=True, connect_timeout=10) as conn:
        conn.execute(sql)


def problem(base_url: str) -> str | None:
    """Why the server cannot be used, or None when it can."""
    try:
        execute(base_url, "SELECT 1")
    except Exception as exc:  # any failure means: not usable here
        return f"PostgreSQL at {base_url} not reachable: {exc}"
    return None


def create_schema(base_url: str, prefix: str = "t") -> tuple[str, str]:
    """A new, empty schema; the metadata URL whose connections use it, and its name."""
    schema = f"{prefix}_{uuid.uuid4().hex[:12]}"
    execute(base_url, f'CREATE SCHEMA "{schema}"')
    sep = "&" if "?" in base_url else "?"
    return f"{base_url}{sep}options=-csearch_path%3D{schema}", schema


def drop_schema(base_url: str, schema: str) -> None:
    execute(base_url, f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')
