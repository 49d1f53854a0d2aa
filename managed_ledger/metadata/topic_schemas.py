"""The metadata stores' schema methods (`managed_ledger.metadata.api.SchemaStore`): each topic's
Pulsar schema versions, for the SQL store and the in-memory one, mixed into each.

A version is inserted once and never changed: two writers that both decided on version n race on
the primary key, and the loser gets AlreadyExistsError (it reads again and decides again, so two
producers declaring one new schema at once end with one version, not two).
"""

from __future__ import annotations

import json
import threading
from typing import Any, cast

from sqlalchemy import Table, delete, select

from managed_ledger.metadata.api import AlreadyExistsError, SchemaVersion
from managed_ledger.metadata.engine import Transactional
from managed_ledger.metadata.models import TopicSchemaRow

TOPIC_SCHEMAS = cast(Table, TopicSchemaRow.__table__)


def _from_row(row: Any) -> SchemaVersion:
    return SchemaVersion(
        topic=row["topic"],
        version=int(row["version"]),
        schema_type=row["schema_type"],
        data=bytes(row["schema_data"]),
        properties=dict(json.loads(row["properties"])),
        created_ms=int(row["created_ms"]),
        deleted=bool(row["deleted"]),
    )


def _checked(schema: SchemaVersion) -> SchemaVersion:
    if not schema.topic or schema.version < 0 or not schema.schema_type:
        raise ValueError(f"a schema version needs a topic, a version >= 0 and a type: {schema}")
    return schema


class SqlSchemaMethods:
    """Mixed into SqlMetadataStore: uses its `_read` / `_write` transactions."""

    def get_schema_versions(self: Transactional, topic: str) -> list[SchemaVersion]:
        stmt = select(TOPIC_SCHEMAS).where(TOPIC_SCHEMAS.c.topic == topic).order_by(TOPIC_SCHEMAS.c.version)
        with self._read() as conn:
            return [_from_row(r) for r in conn.execute(stmt).mappings().all()]

    def add_schema_version(self: Transactional, schema: SchemaVersion) -> None:
        s = _checked(schema)
        taken = AlreadyExistsError(f"schema version {s.version} of {s.topic} exists")
        with self._write(conflict=taken) as conn:
            conn.execute(
                TOPIC_SCHEMAS.insert().values(
                    topic=s.topic,
                    version=s.version,
                    schema_type=s.schema_type,
                    schema_data=s.data,
                    properties=json.dumps(dict(s.properties), sort_keys=True),
                    created_ms=s.created_ms,
                    deleted=s.deleted,
                )
            )

    def delete_schema_versions(self: Transactional, topic: str) -> int:
        with self._write() as conn:
            return int(conn.execute(delete(TOPIC_SCHEMAS).where(TOPIC_SCHEMAS.c.topic == topic)).rowcount)


class InMemorySchemaMethods:
    """Mixed into InMemoryMetadataStore: its own lock and dictionary."""

    def __init__(self) -> None:
        self._schemas_lock = threading.Lock()
        self._schemas: dict[str, dict[int, SchemaVersion]] = {}

    def get_schema_versions(self, topic: str) -> list[SchemaVersion]:
        with self._schemas_lock:
            return [v for _, v in sorted(self._schemas.get(topic, {}).items())]

    def add_schema_version(self, schema: SchemaVersion) -> None:
        s = _checked(schema)
        with self._schemas_lock:
            versions = self._schemas.setdefault(s.topic, {})
            if s.version in versions:
                raise AlreadyExistsError(f"schema version {s.version} of {s.topic} exists")
            versions[s.version] = s

    def delete_schema_versions(self, topic: str) -> int:
        with self._schemas_lock:
            return len(self._schemas.pop(topic, {}))
