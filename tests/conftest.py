"""Fixtures shared by every test package.

`metadata_url` runs a test once on SQLite and once on PostgreSQL. PostgreSQL is the server at
QUIRE_TEST_POSTGRES_URL (default: postgres@127.0.0.1:5432/test); without it those runs are
skipped with the reason, unless QUIRE_TEST_REQUIRE_POSTGRES=1 (CI), where they fail.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from devtools import postgres
from tests import kinds

# Brokers started by tests (and the processes they start) run without a Kafka listener unless a
# test turns one on with a free port: the default 9092 would clash between brokers of one test,
# between tests, and with a Quire the developer runs.
os.environ["QUIRE_KAFKA_PORT"] = "0"
os.environ["QUIRE_PULSAR_PORT"] = "0"  # the Pulsar listener's 6650 likewise
# Likewise the bookie port's door: the bookies tests start and the clients they build are open
# unless a test gives both sides a secret or TLS files; one set in the developer's environment
# would lock every other test's client out.
for _name in [n for n in os.environ if n == "QUIRE_BOOKIE_AUTH_SECRET" or n.startswith("QUIRE_BOOKIE_TLS_")]:
    del os.environ[_name]

POSTGRES_URL = postgres.server_url("QUIRE_TEST_POSTGRES_URL")


def _postgres_reachable() -> str | None:
    try:
        import psycopg

        dsn = POSTGRES_URL.replace("postgresql+psycopg://", "postgresql://")
        with psycopg.connect(dsn, connect_timeout=3):
            return None
    except Exception as exc:  # any failure means: not usable here
        return f"PostgreSQL at {POSTGRES_URL} not reachable: {exc}"


@pytest.fixture(scope="session")
def postgres_url() -> Iterator[str]:
    reason = _postgres_reachable()
    if reason is not None:
        if os.environ.get("QUIRE_TEST_REQUIRE_POSTGRES") == "1":
            pytest.fail(reason)
        pytest.skip(reason)
    yield POSTGRES_URL


def fresh_postgres_schema_url(base_url: str) -> tuple[str, str]:
    """A URL whose connections use a new, empty schema (search_path), and the schema name."""
    return postgres.create_schema(base_url, "t")


def drop_postgres_schema(base_url: str, schema: str) -> None:
    postgres.drop_schema(base_url, schema)


@pytest.fixture(params=["sqlite", "postgres"])
def metadata_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """A fresh, empty metadata database URL: SQLite file, or a new PostgreSQL schema."""
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'metadata.db'}"
        return
    base = request.getfixturevalue("postgres_url")
    url, schema = fresh_postgres_schema_url(base)
    try:
        yield url
    finally:
        drop_postgres_schema(base, schema)


# --- test kinds (tests/kinds.py) -------------------------------------------------------------
@pytest.hookimpl(tryfirst=True)  # before `-m` selects by the marks given here
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    try:
        kinds.assign(items, str(Path(__file__).parent))
    except kinds.KindError as exc:
        raise pytest.UsageError(str(exc)) from None


@pytest.fixture(autouse=True)
def _fast_tests_start_no_process(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> None:
    name = kinds.kind_of(request.node)
    if name in kinds.FAST:
        kinds.refuse_processes(monkeypatch, request.node.nodeid, name)
