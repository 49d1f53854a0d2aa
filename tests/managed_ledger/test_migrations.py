"""Alembic migrations on SQLite and PostgreSQL: from empty to head, from every earlier revision to
head with data in place, the schema at head matching the models, downgrade, concurrent starters,
and a store refusing a schema that is behind."""

from __future__ import annotations

import subprocess
import sys
import threading
from dataclasses import replace
from pathlib import Path

import pytest
from alembic import command
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext
from sqlalchemy import inspect, text

from bookie.recovery_store import LeaderLease, UnderReplicatedLedger
from bookie.registry import BookieRecord, BookieState
from managed_ledger.metadata import schema
from managed_ledger.metadata.api import (
    CompactionStatus,
    GroupOffset,
    LedgerState,
    MetadataError,
    SchemaBehindError,
)
from managed_ledger.metadata.engine import make_engine
from managed_ledger.metadata.models import Base
from managed_ledger.metadata.sql import SqlMetadataStore
from tests.support import REPO

TABLES = {
    "ledgers",
    "managed_ledgers",
    "cursors",
    "dedup_snapshots",
    "tenants",
    "namespaces",
    "topics",
    "policies",
    "compaction_states",
    "bookies",
    "bookie_cookies",
    "leader_leases",
    "underreplicated_ledgers",
    "brokers",
    "topic_owners",
    "kafka_group_offsets",
    "topic_schemas",
}
RECOVERY_TABLES = {"leader_leases", "underreplicated_ledgers"}
BROKER_TABLES = {"brokers", "topic_owners"}
KAFKA_TABLES = {"kafka_group_offsets"}
SCHEMA_TABLES = {"topic_schemas"}  # revision 0015
EARLIER = schema.revisions()[:-1]


def _tables(url: str) -> set[str]:
    engine = make_engine(url)
    try:
        return set(inspect(engine).get_table_names()) - {"alembic_version", "sqlite_sequence"}
    finally:
        engine.dispose()


def _execute(url: str, sql: str) -> None:
    engine = make_engine(url)
    try:
        with engine.begin() as conn:
            conn.execute(text(sql))
    finally:
        engine.dispose()


def _downgrade(url: str, target: str) -> None:
    """`alembic downgrade target` on the database at `url`, through the project's config."""
    engine = make_engine(url)
    try:
        with engine.begin() as conn:
            cfg = schema.alembic_config()
            cfg.attributes["connection"] = conn
            command.downgrade(cfg, target)
    finally:
        engine.dispose()


def test_revisions_form_one_line_ending_at_head() -> None:
    revs = schema.revisions()
    assert revs[0] == "0001" and revs[-1] == schema.head_revision() and len(revs) >= 2
    assert len(set(revs)) == len(revs)


def test_empty_database_to_head(metadata_url: str) -> None:
    assert schema.current_revision(metadata_url) is None
    schema.upgrade_to_head(metadata_url)
    assert schema.current_revision(metadata_url) == schema.head_revision()
    assert _tables(metadata_url) == TABLES
    schema.check_schema(metadata_url)
    schema.upgrade_to_head(metadata_url)  # a second start finds nothing to do
    store = SqlMetadataStore(metadata_url, auto_upgrade=False)
    try:
        assert store.list_namespaces("public") == ["public/default"]
    finally:
        store.close()


def test_schema_at_head_matches_the_models(metadata_url: str) -> None:
    schema.upgrade_to_head(metadata_url)
    engine = make_engine(metadata_url)
    try:
        with engine.connect() as conn:
            ctx = MigrationContext.configure(conn, opts={"compare_type": True})
            diff = compare_metadata(ctx, Base.metadata)
    finally:
        engine.dispose()
    assert diff == []


@pytest.mark.parametrize("start", EARLIER)
def test_each_earlier_revision_to_head_keeps_data(metadata_url: str, start: str) -> None:
    schema.upgrade_to_head(metadata_url, start)
    assert schema.current_revision(metadata_url) == start
    # Rows every revision has, written as that revision's schema allows (raw SQL, not the models).
    _execute(
        metadata_url,
        "INSERT INTO ledgers (ensemble, write_quorum, ack_quorum, state, last_entry_id, length_bytes,"
        " created_ms, closed_ms, version) VALUES ('[\"b:1\"]', 1, 1, 'CLOSED', 9, 100, 5, 6, 3)",
    )
    _execute(
        metadata_url,
        "INSERT INTO compaction_states (topic, compacted_ledger_id, horizon_ledger_id, horizon_entry_id,"
        " horizon_batch_index, status, last_error, requested, messages_in, messages_out, compacted_entries,"
        " compacted_size_bytes, version) VALUES ('public/default/t', 7, 1, 2, 3, 'SUCCESS', '', false,"
        " 10, 2, 2, 50, 4)",
    )
    schema.upgrade_to_head(metadata_url)
    assert schema.current_revision(metadata_url) == schema.head_revision()
    store = SqlMetadataStore(metadata_url, auto_upgrade=False)
    try:
        [ledger] = store.list_ledgers()
        assert (ledger.ensemble, ledger.state, ledger.last_entry_id, ledger.version) == (
            ("b:1",),
            LedgerState.CLOSED,
            9,
            3,
        )
        assert ledger.ensembles == ((0, ("b:1",)),)  # no history stored: the first ensemble
        state = store.get_compaction("public/default/t")
        assert (state.status, state.horizon, state.compacted_ledger_id, state.version) == (
            CompactionStatus.SUCCESS,
            (1, 2, 3),
            7,
            4,
        )
        assert (state.run_ledger_id, state.lease_holder, state.lease_expires_ms) == (None, "", None)
        assert store.list_bookies() == [] and store.get_bookie_cookie("b:1") is None
        assert store.list_underreplicated() == [] and store.get_lease("auditor") is None
        # The id sequence carries on after rows written before the upgrade.
        assert store.create_ledger(("b:1",), 1, 1, 0).ledger_id > ledger.ledger_id
    finally:
        store.close()


@pytest.mark.parametrize("start", [None, *EARLIER])
def test_store_refuses_schema_behind_naming_both_revisions(metadata_url: str, start: str | None) -> None:
    if start is not None:
        schema.upgrade_to_head(metadata_url, start)
    with pytest.raises(SchemaBehindError) as info:
        SqlMetadataStore(metadata_url, auto_upgrade=False)
    message = str(info.value)
    assert f"this Quire needs {schema.head_revision()}" in message
    assert f"at revision {start}" in message if start else "empty database" in message
    assert "python -m migrations upgrade" in message and "auto-migrate" in message
    assert schema.current_revision(metadata_url) == start  # refusing changes nothing


def test_store_auto_upgrades_schema_behind(metadata_url: str) -> None:
    schema.upgrade_to_head(metadata_url, EARLIER[0])
    store = SqlMetadataStore(metadata_url)  # auto_upgrade defaults to on
    store.close()
    assert schema.current_revision(metadata_url) == schema.head_revision()


def test_unknown_newer_revision_is_refused_clearly(metadata_url: str) -> None:
    schema.upgrade_to_head(metadata_url)
    _execute(metadata_url, "UPDATE alembic_version SET version_num = '9999'")
    for auto_upgrade in (True, False):
        with pytest.raises(MetadataError, match="revision 9999, which this Quire does not know"):
            SqlMetadataStore(metadata_url, auto_upgrade=auto_upgrade)


def test_downgrade_to_base_and_up_again(metadata_url: str) -> None:
    schema.upgrade_to_head(metadata_url)
    _downgrade(metadata_url, "base")
    assert _tables(metadata_url) == set() and schema.current_revision(metadata_url) is None
    schema.upgrade_to_head(metadata_url)
    assert _tables(metadata_url) == TABLES


def test_bookie_registry_revision_downgrades_to_the_one_before(metadata_url: str) -> None:
    schema.upgrade_to_head(metadata_url)
    store = SqlMetadataStore(metadata_url)
    try:
        store.put_bookie(BookieRecord("b:1", "i", BookieState.WRITABLE, heartbeat_ms=1))
        store.create_ledger(("b:1",), 1, 1, 0)
    finally:
        store.close()
    before = schema.revisions()[schema.revisions().index("0004") - 1]
    _downgrade(metadata_url, before)
    assert (
        _tables(metadata_url)
        == TABLES
        - {"bookies", "bookie_cookies"}
        - RECOVERY_TABLES
        - BROKER_TABLES
        - KAFKA_TABLES
        - SCHEMA_TABLES
    )
    schema.upgrade_to_head(metadata_url)
    store = SqlMetadataStore(metadata_url)
    try:
        assert store.list_bookies() == [] and len(store.list_ledgers()) == 1
    finally:
        store.close()


def test_autorecovery_revision_downgrades_to_the_one_before(metadata_url: str) -> None:
    schema.upgrade_to_head(metadata_url)
    store = SqlMetadataStore(metadata_url)
    try:
        store.put_lease(LeaderLease("auditor", "a", 5))
        store.put_underreplicated(UnderReplicatedLedger(1, ("b:1",)))
        store.create_ledger(("b:1",), 1, 1, 0)
    finally:
        store.close()
    before = schema.revisions()[schema.revisions().index("0006") - 1]
    _downgrade(metadata_url, before)
    assert _tables(metadata_url) == TABLES - RECOVERY_TABLES - BROKER_TABLES - KAFKA_TABLES - SCHEMA_TABLES
    schema.upgrade_to_head(metadata_url)
    store = SqlMetadataStore(metadata_url)
    try:
        assert store.list_underreplicated() == [] and len(store.list_ledgers()) == 1
    finally:
        store.close()


def test_concurrent_starters_both_succeed(metadata_url: str) -> None:
    errors: list[BaseException] = []
    barrier = threading.Barrier(3)

    def start() -> None:
        barrier.wait(timeout=10)
        try:
            SqlMetadataStore(metadata_url).close()
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=start) for _ in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    assert errors == []
    assert schema.current_revision(metadata_url) == schema.head_revision()


@pytest.mark.process
def test_command_line_upgrade(metadata_url: str, tmp_path: Path) -> None:
    def run(*args: str) -> str:
        done = subprocess.run(
            [sys.executable, "-m", "migrations", *args, "--database-url", metadata_url],
            cwd=tmp_path,  # not the checkout: the package's own files must be found
            env={"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin"},
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert done.returncode == 0, done.stderr
        return done.stdout.strip()

    assert run("current") == "(empty database)"
    assert run("upgrade") == f"metadata schema at revision {schema.head_revision()}"
    assert run("current") == schema.head_revision()


@pytest.mark.process
def test_alembic_command_with_ini(metadata_url: str) -> None:
    alembic = Path(sys.executable).with_name("alembic")
    done = subprocess.run(
        [str(alembic), "-c", "migrations/alembic.ini", "-x", f"url={metadata_url}", "upgrade", "head"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert schema.current_revision(metadata_url) == schema.head_revision()


def test_ledger_ensembles_revision_downgrades_to_the_one_before(metadata_url: str) -> None:
    schema.upgrade_to_head(metadata_url)
    store = SqlMetadataStore(metadata_url)
    try:
        ledger = store.create_ledger(("b:1", "b:2"), 2, 2, 0)
        history = ((0, ("b:1", "b:2")), (5, ("b:1", "b:3")))
        store.update_ledger(replace(ledger, ensembles=history))
    finally:
        store.close()
    before = schema.revisions()[schema.revisions().index("0005") - 1]
    _downgrade(metadata_url, before)
    engine = make_engine(metadata_url)
    try:
        assert "ensembles" not in {c["name"] for c in inspect(engine).get_columns("ledgers")}
    finally:
        engine.dispose()
    schema.upgrade_to_head(metadata_url)
    store = SqlMetadataStore(metadata_url)
    try:
        [kept] = store.list_ledgers()
        assert kept.ensemble == ("b:1", "b:2") and kept.ensembles == ((0, ("b:1", "b:2")),)
        assert store.create_ledger(("b:1",), 1, 1, 0).ledger_id > kept.ledger_id
    finally:
        store.close()


def test_kafka_group_offsets_revision_downgrades_to_the_one_before(metadata_url: str) -> None:
    schema.upgrade_to_head(metadata_url)
    store = SqlMetadataStore(metadata_url)
    try:
        store.commit_group_offsets([GroupOffset("g", "public/default/t", 0, 5)])
        store.create_ledger(("b:1",), 1, 1, 0)
    finally:
        store.close()
    _downgrade(metadata_url, "0008")
    assert _tables(metadata_url) == TABLES - KAFKA_TABLES - SCHEMA_TABLES
    schema.upgrade_to_head(metadata_url)
    store = SqlMetadataStore(metadata_url)
    try:
        assert store.list_groups() == [] and len(store.list_ledgers()) == 1
    finally:
        store.close()
