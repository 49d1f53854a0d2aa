"""`SqlMetadataStore`: the metadata store on SQLAlchemy (SQLite by default, PostgreSQL in production).

Every method is one short transaction on one shared Engine (thread-safe; async callers come
through the seam's threads, `bookie.metadata_calls`). Every update is compare-and-set in the
database itself:
`UPDATE ... SET ..., version = v + 1 WHERE key = k AND version = v`; a rowcount of 0 means the row
moved on (BadVersionError) or is gone (NotFoundError), told apart by one SELECT on that failure
path only. Creating an existing key is AlreadyExistsError (the primary key decides, so two
racing creators cannot both win). Records cross the boundary as the frozen dataclasses of
`managed_ledger.metadata.api` (records.py); nothing above sees a row or a session.

`statement_count` counts the SQL statements sent (a `before_cursor_execute` hook; SQLite's
explicit BEGIN is left out so both backends count alike): benchmarks report it per 10,000 appends
and acks.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import replace
from typing import Any

from sqlalchemy import Connection, Table, delete, event, exists, insert, select, update
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.exc import DBAPIError, IntegrityError, OperationalError
from sqlalchemy.sql.elements import ColumnElement

from bookie.ledger_metadata import SegmentInstance
from bookie.metadata_calls import metadata_calls
from managed_ledger.metadata import records, rows, schema
from managed_ledger.metadata.api import (
    AlreadyExistsError,
    BadVersionError,
    CompactionState,
    CursorMetadata,
    DedupSnapshot,
    LedgerMetadata,
    LedgerState,
    ManagedLedgerMetadata,
    MetadataError,
    NamespaceGrants,
    NotEmptyError,
    NotFoundError,
    TenantInfo,
    TopicMetadata,
)
from managed_ledger.metadata.bookies import SqlBookieMethods
from managed_ledger.metadata.engine import WRITE_OPTION, make_engine
from managed_ledger.metadata.kafka_groups import GROUP_OFFSETS, SqlGroupOffsetMethods
from managed_ledger.metadata.opening import SqlOpeningMethods
from managed_ledger.metadata.ownership import SqlOwnershipMethods
from managed_ledger.metadata.recovery import SqlRecoveryMethods
from managed_ledger.metadata.rows import (
    COMPACTIONS,
    CURSORS,
    DEDUP,
    LEDGERS,
    MANAGED_LEDGERS,
    NAMESPACES,
    POLICIES,
    TENANTS,
    TOPICS,
)
from managed_ledger.metadata.sql_errors import unavailable, unavailable_error
from managed_ledger.metadata.topic_schemas import SqlSchemaMethods

POLICY_UPDATE_ATTEMPTS = 20


class _PolicyRace(BadVersionError):
    """Two first writers of a scope's policies raced on the insert; the loser retries."""


class SqlMetadataStore(
    SqlBookieMethods,
    SqlRecoveryMethods,
    SqlOwnershipMethods,
    SqlGroupOffsetMethods,
    SqlSchemaMethods,
    SqlOpeningMethods,
):
    def __init__(self, url: str, auto_upgrade: bool = True) -> None:
        """Open the store; upgrade the schema to head first, or refuse one that is behind."""
        # The async seam may not know SQLAlchemy: teach it this store's unreachable database.
        metadata_calls.translate_with(unavailable)
        self.url = url
        self._engine = make_engine(url)
        self._count_lock = threading.Lock()
        self.statement_count = 0
        try:
            if auto_upgrade:
                schema.upgrade_to_head(self._engine)
            else:
                schema.check_schema(self._engine)
        except BaseException:
            self._engine.dispose()
            raise
        event.listen(self._engine, "before_cursor_execute", self._count_statement)

    def _count_statement(self, _conn: Any, _cursor: Any, statement: str, *_args: Any) -> None:
        if not statement.startswith("BEGIN"):
            with self._count_lock:
                self.statement_count += 1

    # --- transactions ----------------------------------------------------------------------
    @contextmanager
    def _tx(self, write: bool, conflict: MetadataError | None = None) -> Iterator[Connection]:
        """One transaction; database errors come out as MetadataErrors (`conflict` for integrity)."""
        try:
            with self._engine.connect() as conn:
                conn.execution_options(**{WRITE_OPTION: write})
                with conn.begin():
                    yield conn
        except IntegrityError as exc:
            if conflict is None:
                raise MetadataError(f"metadata integrity error: {exc.orig}") from exc
            raise conflict from exc
        except OperationalError as exc:
            raise unavailable_error(exc) from exc
        except DBAPIError as exc:
            raise MetadataError(f"metadata database error: {exc.orig}") from exc

    def _read(self) -> Any:
        return self._tx(write=False)

    def _write(self, conflict: MetadataError | None = None) -> Any:
        return self._tx(write=True, conflict=conflict)

    @staticmethod
    def _cas_failed(
        conn: Connection, table: Table, where: ColumnElement[bool], what: str, given: int
    ) -> None:
        """Called when a CAS UPDATE matched no row: say whether it moved on or is gone."""
        stored = conn.execute(select(table.c.version).where(where)).scalar()
        if stored is None:
            raise NotFoundError(f"{what} not found")
        raise BadVersionError(f"{what}: version {given} is stale (stored version {stored})")

    def _cas_update(
        self,
        conn: Connection,
        table: Table,
        where: ColumnElement[bool],
        what: str,
        version: int,
        values: dict[str, Any],
    ) -> None:
        stmt = update(table).where(where, table.c.version == version).values(**values, version=version + 1)
        if conn.execute(stmt).rowcount != 1:
            self._cas_failed(conn, table, where, what, version)

    # --- ledgers ---------------------------------------------------------------------------
    def create_ledger(
        self,
        ensemble: tuple[str, ...],
        write_quorum: int,
        ack_quorum: int,
        created_ms: int,
        instances: tuple[SegmentInstance, ...] = (),
    ) -> LedgerMetadata:
        draft = records.ledger(
            LedgerMetadata(
                0,
                tuple(ensemble),
                write_quorum,
                ack_quorum,
                LedgerState.OPEN,
                created_ms=created_ms,
                instances=instances,
            )
        )
        values = rows.ledger_values(draft)
        with self._write() as conn:
            result = conn.execute(insert(LEDGERS).values(**values, version=1))
            ledger_id = int(result.inserted_primary_key[0])
        return replace(draft, ledger_id=ledger_id, version=1)

    def get_ledger(self, ledger_id: int) -> LedgerMetadata:
        with self._read() as conn:
            row = conn.execute(select(LEDGERS).where(LEDGERS.c.id == ledger_id)).mappings().first()
        if row is None:
            raise NotFoundError(f"ledger {ledger_id} not found")
        return rows.ledger_from_row(row)

    def update_ledger(self, ledger: LedgerMetadata) -> LedgerMetadata:
        new = records.ledger(ledger)
        with self._write() as conn:
            where = LEDGERS.c.id == new.ledger_id
            self._cas_update(
                conn, LEDGERS, where, f"ledger {new.ledger_id}", new.version, rows.ledger_values(new)
            )
        return rows.bump(new)

    def delete_ledger(self, ledger_id: int) -> None:
        with self._write() as conn:
            if conn.execute(delete(LEDGERS).where(LEDGERS.c.id == ledger_id)).rowcount == 0:
                raise NotFoundError(f"ledger {ledger_id} not found")

    def list_ledgers(self) -> list[LedgerMetadata]:
        with self._read() as conn:
            result = conn.execute(select(LEDGERS).order_by(LEDGERS.c.id)).mappings().all()
        return [rows.ledger_from_row(r) for r in result]

    # --- managed ledgers --------------------------------------------------------------------
    def get_managed_ledger(self, name: str) -> ManagedLedgerMetadata | None:
        with self._read() as conn:
            row = (
                conn.execute(select(MANAGED_LEDGERS).where(MANAGED_LEDGERS.c.name == name)).mappings().first()
            )
        return None if row is None else rows.managed_ledger_from_row(row)

    def create_managed_ledger(self, name: str) -> ManagedLedgerMetadata:
        ml = records.managed_ledger(ManagedLedgerMetadata(name=name, version=1))
        with self._write(AlreadyExistsError(f"managed ledger {name} already exists")) as conn:
            conn.execute(
                insert(MANAGED_LEDGERS).values(name=name, **rows.managed_ledger_values(ml), version=1)
            )
        return ml

    def update_managed_ledger(self, ml: ManagedLedgerMetadata) -> ManagedLedgerMetadata:
        new = records.managed_ledger(ml)
        with self._write() as conn:
            where = MANAGED_LEDGERS.c.name == new.name
            values = rows.managed_ledger_values(new)
            self._cas_update(conn, MANAGED_LEDGERS, where, f"managed ledger {new.name}", new.version, values)
        return rows.bump(new)

    def delete_managed_ledger(self, name: str) -> None:
        # Cursors and the dedup snapshot go with it: ON DELETE CASCADE.
        with self._write() as conn:
            if conn.execute(delete(MANAGED_LEDGERS).where(MANAGED_LEDGERS.c.name == name)).rowcount == 0:
                raise NotFoundError(f"managed ledger {name} not found")

    def _require_managed_ledger(self, conn: Connection, name: str) -> None:
        if not conn.execute(select(exists().where(MANAGED_LEDGERS.c.name == name))).scalar():
            raise NotFoundError(f"managed ledger {name} not found")

    # --- cursors ----------------------------------------------------------------------------
    def list_cursors(self, managed_ledger: str) -> list[CursorMetadata]:
        stmt = select(CURSORS).where(CURSORS.c.managed_ledger == managed_ledger).order_by(CURSORS.c.name)
        with self._read() as conn:
            result = conn.execute(stmt).mappings().all()
        return [rows.cursor_from_row(r) for r in result]

    def create_cursor(self, cursor: CursorMetadata) -> CursorMetadata:
        new = records.cursor(cursor)
        conflict = AlreadyExistsError(f"cursor {new.name} of {new.managed_ledger} already exists")
        with self._write(conflict) as conn:
            self._require_managed_ledger(conn, new.managed_ledger)
            key = {"managed_ledger": new.managed_ledger, "name": new.name}
            conn.execute(insert(CURSORS).values(**key, **rows.cursor_values(new), version=1))
        return rows.with_version(new, 1)

    def update_cursor(self, cursor: CursorMetadata) -> CursorMetadata:
        return self.update_cursors([cursor])[0]

    def update_cursors(self, cursors: list[CursorMetadata]) -> list[CursorMetadata]:
        """All in one transaction and one executemany; any stale cursor fails the whole batch."""
        if not cursors:
            return []
        # Refused before anything else, whatever else is wrong with the batch (the in-memory
        # store checks in the same order: the differential test holds them to it).
        if len({(c.managed_ledger, c.name) for c in cursors}) != len(cursors):
            raise BadVersionError("the same cursor appears twice in one batch")
        batch = [records.cursor(c) for c in cursors]
        params = [rows.cursor_batch_params(c) for c in batch]
        with self._write() as conn:
            if conn.execute(rows.CURSOR_BATCH_UPDATE, params).rowcount != len(batch):
                self._find_stale_cursor(conn, batch)
        return [rows.bump(c) for c in batch]

    def _find_stale_cursor(self, conn: Connection, batch: list[CursorMetadata]) -> None:
        for c in batch:
            where = (CURSORS.c.managed_ledger == c.managed_ledger) & (CURSORS.c.name == c.name)
            stored = conn.execute(select(CURSORS.c.version).where(where)).scalar()
            if stored != c.version + 1:  # the batch's own UPDATE already moved a matching one on
                self._cas_failed(conn, CURSORS, where, f"cursor {c.managed_ledger}/{c.name}", c.version)
        # A cursor another writer moved from v to exactly v + 1 looks updated above; still stale.
        raise BadVersionError("a cursor in the batch was changed by another writer")

    def delete_cursor(self, managed_ledger: str, name: str) -> None:
        where = (CURSORS.c.managed_ledger == managed_ledger) & (CURSORS.c.name == name)
        with self._write() as conn:
            if conn.execute(delete(CURSORS).where(where)).rowcount == 0:
                raise NotFoundError(f"cursor {name} of {managed_ledger} not found")

    # --- dedup ------------------------------------------------------------------------------
    def get_dedup_snapshot(self, managed_ledger: str) -> DedupSnapshot | None:
        with self._read() as conn:
            row = (
                conn.execute(select(DEDUP).where(DEDUP.c.managed_ledger == managed_ledger)).mappings().first()
            )
        return None if row is None else rows.dedup_from_row(row)

    def put_dedup_snapshot(self, snapshot: DedupSnapshot) -> DedupSnapshot:
        new = records.dedup(snapshot)
        what = f"dedup snapshot of {new.managed_ledger}"
        values = rows.dedup_values(new)
        with self._write(BadVersionError(f"{what}: version 0 is stale (one exists)")) as conn:
            if new.version == 0:
                self._require_managed_ledger(conn, new.managed_ledger)
                conn.execute(insert(DEDUP).values(managed_ledger=new.managed_ledger, **values, version=1))
            else:
                where = DEDUP.c.managed_ledger == new.managed_ledger
                self._cas_update(conn, DEDUP, where, what, new.version, values)
        return rows.bump(new)

    # --- tenants and namespaces -------------------------------------------------------------
    def list_tenants(self) -> list[str]:
        with self._read() as conn:
            return list(conn.execute(select(TENANTS.c.name).order_by(TENANTS.c.name)).scalars())

    def create_tenant(self, tenant: str, info: TenantInfo | None = None) -> None:
        info = records.tenant(info or TenantInfo(tenant))
        assert info.name == tenant, "a tenant's info names that tenant"
        with self._write(AlreadyExistsError(f"tenant {tenant} already exists")) as conn:
            conn.execute(insert(TENANTS).values(name=tenant, version=1, **_tenant_values(info)))

    def get_tenant(self, tenant: str) -> TenantInfo | None:
        stmt = select(TENANTS.c.admin_roles, TENANTS.c.allowed_clusters).where(TENANTS.c.name == tenant)
        with self._read() as conn:
            row = conn.execute(stmt).first()
        if row is None:
            return None
        return TenantInfo(tenant, tuple(row[0] or ()), tuple(row[1] or ()))

    def update_tenant(self, info: TenantInfo) -> None:
        info = records.tenant(info)
        stmt = (
            update(TENANTS)
            .where(TENANTS.c.name == info.name)
            .values(version=TENANTS.c.version + 1, **_tenant_values(info))
        )
        with self._write() as conn:
            if conn.execute(stmt).rowcount == 0:
                raise NotFoundError(f"tenant {info.name} not found")

    def delete_tenant(self, tenant: str) -> None:
        with self._write(NotEmptyError(f"tenant {tenant} still has namespaces")) as conn:
            if conn.execute(select(exists().where(NAMESPACES.c.tenant == tenant))).scalar():
                raise NotEmptyError(f"tenant {tenant} still has namespaces")
            if conn.execute(delete(TENANTS).where(TENANTS.c.name == tenant)).rowcount == 0:
                raise NotFoundError(f"tenant {tenant} not found")

    def list_namespaces(self, tenant: str) -> list[str]:
        stmt = select(NAMESPACES.c.name).where(NAMESPACES.c.tenant == tenant).order_by(NAMESPACES.c.name)
        with self._read() as conn:
            return list(conn.execute(stmt).scalars())

    def create_namespace(self, namespace: str) -> None:
        tenant, _ = records.split_namespace(namespace)
        with self._write(AlreadyExistsError(f"namespace {namespace} already exists")) as conn:
            if not conn.execute(select(exists().where(TENANTS.c.name == tenant))).scalar():
                raise NotFoundError(f"tenant {tenant} not found")
            conn.execute(insert(NAMESPACES).values(name=namespace, tenant=tenant, version=1))

    def delete_namespace(self, namespace: str) -> None:
        with self._write(NotEmptyError(f"namespace {namespace} still has topics")) as conn:
            if conn.execute(select(exists().where(TOPICS.c.namespace == namespace))).scalar():
                raise NotEmptyError(f"namespace {namespace} still has topics")
            if conn.execute(delete(NAMESPACES).where(NAMESPACES.c.name == namespace)).rowcount == 0:
                raise NotFoundError(f"namespace {namespace} not found")
            conn.execute(delete(POLICIES).where(POLICIES.c.scope == namespace))

    def get_permissions(self, namespace: str) -> dict[str, tuple[str, ...]]:
        stmt = select(NAMESPACES.c.permissions).where(NAMESPACES.c.name == namespace)
        with self._read() as conn:
            row = conn.execute(stmt).first()
        if row is None:
            raise NotFoundError(f"namespace {namespace} not found")
        return {role: tuple(actions) for role, actions in sorted((row[0] or {}).items())}

    def set_permission(self, namespace: str, role: str, actions: tuple[str, ...] | None) -> None:
        where = NAMESPACES.c.name == namespace
        with self._write() as conn:
            # FOR UPDATE on PostgreSQL; SQLite's write transaction holds the database lock already.
            row = conn.execute(select(NAMESPACES.c.permissions).where(where).with_for_update()).first()
            if row is None:
                raise NotFoundError(f"namespace {namespace} not found")
            granted = dict(row[0] or {})
            if actions:
                granted[role] = sorted(set(actions))
            else:
                granted.pop(role, None)
            values = {"permissions": granted or None, "version": NAMESPACES.c.version + 1}
            conn.execute(update(NAMESPACES).where(where).values(**values))

    def get_grants(self, tenant: str, namespace: str | None) -> NamespaceGrants:
        with self._read() as conn:
            admins = conn.execute(select(TENANTS.c.admin_roles).where(TENANTS.c.name == tenant)).scalar()
            granted = None
            if namespace is not None:
                stmt = select(NAMESPACES.c.permissions).where(NAMESPACES.c.name == namespace)
                granted = conn.execute(stmt).scalar()
        return records.grants(admins, granted)

    # --- topics -----------------------------------------------------------------------------
    def list_topics(self, namespace: str) -> list[TopicMetadata]:
        stmt = select(TOPICS).where(TOPICS.c.namespace == namespace).order_by(TOPICS.c.name)
        with self._read() as conn:
            result = conn.execute(stmt).mappings().all()
        return [rows.topic_from_row(r) for r in result]

    def get_topic(self, name: str) -> TopicMetadata | None:
        with self._read() as conn:
            row = conn.execute(select(TOPICS).where(TOPICS.c.name == name)).mappings().first()
        return None if row is None else rows.topic_from_row(row)

    def create_topic(self, topic: TopicMetadata) -> TopicMetadata:
        new = records.topic(topic)
        namespace = records.namespace_of(new.name)
        with self._write(AlreadyExistsError(f"topic {new.name} already exists")) as conn:
            if not conn.execute(select(exists().where(NAMESPACES.c.name == namespace))).scalar():
                raise NotFoundError(f"namespace {namespace} not found")
            values = {"name": new.name, "namespace": namespace, **rows.topic_values(new)}
            conn.execute(insert(TOPICS).values(**values, version=1))
        return rows.with_version(new, 1)

    def update_topic(self, topic: TopicMetadata) -> TopicMetadata:
        new = records.topic(topic)
        with self._write() as conn:
            where = TOPICS.c.name == new.name
            self._cas_update(conn, TOPICS, where, f"topic {new.name}", new.version, rows.topic_values(new))
        return rows.bump(new)

    def delete_topic(self, name: str) -> None:
        """The topic row, its policies, its (and its partitions') compaction states and every
        Kafka group's offsets of it."""
        prefix = records.partition_prefix(name)
        with self._write() as conn:
            if conn.execute(delete(TOPICS).where(TOPICS.c.name == name)).rowcount == 0:
                raise NotFoundError(f"topic {name} not found")
            conn.execute(delete(POLICIES).where(POLICIES.c.scope == name))
            conn.execute(delete(GROUP_OFFSETS).where(GROUP_OFFSETS.c.topic == name))
            topic = COMPACTIONS.c.topic
            conn.execute(
                delete(COMPACTIONS).where((topic == name) | topic.startswith(prefix, autoescape=True))
            )

    # --- policies ---------------------------------------------------------------------------
    def get_policies(self, scope: str) -> dict[str, Any]:
        with self._read() as conn:
            value = conn.execute(select(POLICIES.c.policies).where(POLICIES.c.scope == scope)).scalar()
        return {} if value is None else dict(value)

    def set_policies(self, scope: str, policies: dict[str, Any]) -> None:
        """Replace the scope's policies (an upsert: one statement, the version moves on)."""
        value = records.thaw(policies)
        dialect_insert: Callable[..., Any] = (
            postgresql.insert if self._engine.dialect.name == "postgresql" else sqlite.insert
        )
        stmt = dialect_insert(POLICIES).values(scope=scope, policies=value, version=1)
        stmt = stmt.on_conflict_do_update(
            index_elements=[POLICIES.c.scope],
            set_={"policies": stmt.excluded.policies, "version": POLICIES.c.version + 1},
        )
        with self._write() as conn:
            conn.execute(stmt)

    def update_policies(self, scope: str, changes: Mapping[str, Any]) -> dict[str, Any]:
        """Read (row locked on PostgreSQL; SQLite serializes writers), merge, write. The retry
        covers only two writers racing to create the row: the loser finds it next time."""
        for _ in range(POLICY_UPDATE_ATTEMPTS):
            try:
                merged = self._try_update_policies(scope, changes)
            except _PolicyRace:
                continue
            if merged is not None:
                return merged
        raise BadVersionError(f"policies of {scope}: still contended after {POLICY_UPDATE_ATTEMPTS} attempts")

    def _try_update_policies(self, scope: str, changes: Mapping[str, Any]) -> dict[str, Any] | None:
        """One attempt; None when another writer moved the version on since our read."""
        with self._write(_PolicyRace()) as conn:
            where = POLICIES.c.scope == scope
            query = select(POLICIES.c.policies, POLICIES.c.version).where(where).with_for_update()
            row = conn.execute(query).first()
            merged = records.merge_policies(dict(row[0]) if row else {}, changes)
            if row is None:
                conn.execute(insert(POLICIES).values(scope=scope, policies=merged, version=1))
                return merged
            stmt = update(POLICIES).where(where, POLICIES.c.version == row[1])
            if conn.execute(stmt.values(policies=merged, version=row[1] + 1)).rowcount == 1:
                return merged
        return None

    # --- compaction -------------------------------------------------------------------------
    def get_compaction(self, topic: str) -> CompactionState:
        with self._read() as conn:
            row = conn.execute(select(COMPACTIONS).where(COMPACTIONS.c.topic == topic)).mappings().first()
        return CompactionState(topic=topic) if row is None else rows.compaction_from_row(row)

    def put_compaction(self, state: CompactionState) -> CompactionState:
        new = records.compaction(state)
        what = f"compaction state of {new.topic}"
        values = rows.compaction_values(new)
        with self._write(BadVersionError(f"{what}: version 0 is stale (one exists)")) as conn:
            if new.version == 0:
                conn.execute(insert(COMPACTIONS).values(topic=new.topic, **values, version=1))
            else:
                where = COMPACTIONS.c.topic == new.topic
                self._cas_update(conn, COMPACTIONS, where, what, new.version, values)
        return rows.bump(new)

    def list_compactions(self) -> list[CompactionState]:
        with self._read() as conn:
            result = conn.execute(select(COMPACTIONS).order_by(COMPACTIONS.c.topic)).mappings().all()
        return [rows.compaction_from_row(r) for r in result]

    def close(self) -> None:
        self._engine.dispose()


def _tenant_values(info: TenantInfo) -> dict[str, Any]:
    """A tenant's JSON columns: a list, or NULL for none."""
    return {
        "admin_roles": list(info.admin_roles) or None,
        "allowed_clusters": list(info.allowed_clusters) or None,
    }
