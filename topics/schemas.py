"""Topics' schemas (Pulsar's schema registry): versions per topic in the metadata store, checked
against the namespace's `schemaCompatibilityStrategy` (`topics.schema_compat`).

A topic's schema is a list of versions from 0 up. Declaring a schema (a Pulsar producer or
consumer, or `POST .../schema`) that equals a live version (same type, definition and
properties) answers that version; else it is checked against the live versions and stored as the
next one. Deleting a topic's schema stores a deletion mark as the next version: the versions
before it are no longer live, and the next schema starts a new line (checked against nothing).
A partitioned topic has one schema for its partitions (callers pass the partitioned topic).

The strategy is a namespace policy (`schemaCompatibilityStrategy` in the namespace's stored
policies, which the topic policies ignore), FULL when unset, as Pulsar's broker default.
Concurrent declarations race on the version's primary key; the loser reads again and decides
again (at most a few times).
"""

from __future__ import annotations

from collections.abc import Mapping

from bookie.metadata_calls import call_store
from managed_ledger.metadata.api import AlreadyExistsError, SchemaVersion
from topics import names, schema_compat
from topics.errors import (
    IncompatibleSchemaError,
    InvalidArgumentError,
    InvalidSchemaError,
    SchemaNotFoundError,
)
from topics.registry import TopicRegistry

STRATEGY_POLICY = "schemaCompatibilityStrategy"
# Pulsar's SchemaType names (the REST `type`); the protocol's enum maps onto these in the door.
SCHEMA_TYPES = (
    "NONE",
    "STRING",
    "JSON",
    "PROTOBUF",
    "AVRO",
    "BOOLEAN",
    "INT8",
    "INT16",
    "INT32",
    "INT64",
    "FLOAT",
    "DOUBLE",
    "DATE",
    "TIME",
    "TIMESTAMP",
    "KEY_VALUE",
    "INSTANT",
    "LOCAL_DATE",
    "LOCAL_TIME",
    "LOCAL_DATE_TIME",
    "PROTOBUF_NATIVE",
    "BYTES",
)
MAX_SCHEMA_BYTES = 1024 * 1024
RACE_ATTEMPTS = 5


def live(versions: list[SchemaVersion]) -> list[SchemaVersion]:
    """The versions after the last deletion mark."""
    marks = [i for i, v in enumerate(versions) if v.deleted]
    return versions[marks[-1] + 1 :] if marks else versions


class Schemas:
    def __init__(self, registry: TopicRegistry) -> None:
        self._r = registry

    async def _versions(self, topic: str) -> list[SchemaVersion]:
        topic = names.validate_topic(topic)
        await self._r.check_namespace(names.namespace_of(topic))
        return await call_store(self._r.store.get_schema_versions, topic)

    async def get_schema(self, topic: str, version: int | None = None) -> SchemaVersion:
        """The latest live version, or `version` (a live one)."""
        found = live(await self._versions(topic))
        if version is not None:
            found = [v for v in found if v.version == version]
        if not found:
            raise SchemaNotFoundError(names.validate_topic(topic), version)
        return found[-1]

    async def schema_versions(self, topic: str) -> list[SchemaVersion]:
        """The live versions, oldest first ([] for none)."""
        return live(await self._versions(topic))

    async def put_schema(
        self, topic: str, schema_type: str, data: bytes, properties: Mapping[str, str]
    ) -> int:
        """The version of this schema: an equal live one's, or a new one if the strategy lets
        it in (IncompatibleSchemaError when not)."""
        topic = names.validate_topic(topic)
        _check_definition(schema_type, data, properties)
        strategy = await self.get_compatibility(names.namespace_of(topic))
        for _ in range(RACE_ATTEMPTS):
            versions = await self._versions(topic)
            current = live(versions)
            for v in current:
                if (v.schema_type, v.data, dict(v.properties)) == (schema_type, data, dict(properties)):
                    return v.version
            why = schema_compat.incompatibility(
                strategy, (schema_type, data), [(v.schema_type, v.data) for v in current]
            )
            if why is not None:
                raise IncompatibleSchemaError(topic, strategy, why)
            version = versions[-1].version + 1 if versions else 0
            record = SchemaVersion(
                topic, version, schema_type, data, dict(properties), self._r.clock.now_ms()
            )
            try:
                await call_store(self._r.store.add_schema_version, record)
            except AlreadyExistsError:
                continue  # another writer took this version: look again
            return version
        raise IncompatibleSchemaError(topic, strategy, "too many concurrent schema changes; try again")

    async def check_schema(self, topic: str, schema_type: str, data: bytes) -> None:
        """IncompatibleSchemaError when a consumer's schema could not be stored (Pulsar checks a
        consumer's schema without storing it once the topic has one)."""
        topic = names.validate_topic(topic)
        _check_definition(schema_type, data, {})
        strategy = await self.get_compatibility(names.namespace_of(topic))
        current = live(await self._versions(topic))
        if any((v.schema_type, v.data) == (schema_type, data) for v in current):
            return
        why = schema_compat.incompatibility(
            strategy, (schema_type, data), [(v.schema_type, v.data) for v in current]
        )
        if why is not None:
            raise IncompatibleSchemaError(topic, strategy, why)

    async def delete_schema(self, topic: str) -> int:
        """Mark the schema deleted; the mark's version (SchemaNotFoundError: none to delete)."""
        topic = names.validate_topic(topic)
        for _ in range(RACE_ATTEMPTS):
            versions = await self._versions(topic)
            if not live(versions):
                raise SchemaNotFoundError(topic)
            mark = SchemaVersion(
                topic, versions[-1].version + 1, "NONE", b"", {}, self._r.clock.now_ms(), deleted=True
            )
            try:
                await call_store(self._r.store.add_schema_version, mark)
            except AlreadyExistsError:
                continue
            return mark.version
        raise InvalidArgumentError(f"{topic}: too many concurrent schema changes; try again")

    async def get_compatibility(self, namespace: str) -> str:
        names.validate_namespace(namespace)
        await self._r.check_namespace(namespace)
        stored = await call_store(self._r.store.get_policies, namespace)
        value = stored.get(STRATEGY_POLICY)
        return value if value in schema_compat.STRATEGIES else schema_compat.DEFAULT_STRATEGY

    async def set_compatibility(self, namespace: str, strategy: str) -> None:
        names.validate_namespace(namespace)
        if strategy not in schema_compat.STRATEGIES:
            raise InvalidArgumentError(
                f"unknown schema compatibility strategy {strategy!r}; known: {list(schema_compat.STRATEGIES)}"
            )
        await self._r.check_namespace(namespace)
        await call_store(self._r.store.update_policies, namespace, {STRATEGY_POLICY: strategy})


def _check_definition(schema_type: str, data: bytes, properties: Mapping[str, str]) -> None:
    if schema_type not in SCHEMA_TYPES:
        raise InvalidSchemaError(f"unknown schema type {schema_type!r}; known: {list(SCHEMA_TYPES)}")
    if len(data) > MAX_SCHEMA_BYTES:
        raise InvalidSchemaError(f"the schema definition is over {MAX_SCHEMA_BYTES} bytes")
    if not all(isinstance(k, str) and isinstance(v, str) for k, v in properties.items()):
        raise InvalidSchemaError("schema properties must map strings to strings")
    try:
        schema_compat.parse(schema_type, data)
    except schema_compat.SchemaDefinitionError as exc:
        raise InvalidSchemaError(str(exc)) from exc
