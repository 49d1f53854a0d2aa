"""SQLAlchemy 2 declarative models of the metadata store (schema at Alembic revision head).

The migrations in `migrations/versions/` create this schema; they are written out by hand, not
imported from here, so that an old revision keeps meaning what it meant. A test compares the
migrated database against these models.

Tables (every table a caller updates has `version`, the compare-and-set token):
- ledgers: id from a sequence (PostgreSQL SEQUENCE `ledger_id_seq`, SQLite AUTOINCREMENT, so
  an id is never handed out twice, even after a delete), ensemble JSON list (the first one),
  ensembles JSON list of [first_entry_id, [bookie, ...]] (the history; NULL in rows older than
  revision 0005 means the first ensemble from entry 0), instances JSON list of [first_entry_id,
  bookie, instance_id] (each bookie's cookie instance when it entered that segment; NULL in rows
  older than revision 0011: none known), quorums, state, last_entry_id, length_bytes,
  created/closed ms.
- managed_ledgers: name, ordered ledger id list (JSON), properties (JSON).
- cursors: (managed_ledger, name), mark-delete position, individually deleted ranges (JSON list of
  [[l, e], [l, e]]), properties (JSON); dedup_snapshots: managed_ledger, position, sequences
  (JSON). Both cascade on deleting their managed ledger.
- tenants, namespaces (`tenant/ns`, FK tenant), topics (`tenant/ns/topic`, FK namespace). A
  tenant's admin roles and allowed clusters (JSON lists) and a namespace's permissions (JSON
  object role -> actions) are NULL when there are none.
- policies: scope (`t/n` or `t/n/x`) -> JSON object.
- compaction_states: one row per topic (or partition): compacted ledger, horizon
  (ledger, entry, batch_index), last run's status, error, times and counters, and the run
  lease (holder, expiry) of a RUNNING run.
- bookies: one row per registered bookie (id `host:port`): instance id, reported state, last
  heartbeat (ms), free bytes, ledger count. Renewed by the bookie itself, last writer wins.
- bookie_cookies: one row per bookie id: the instance id and data directory of its disk.
- leader_leases: a named role (the auditor), who holds it and until when.
- underreplicated_ledgers: one row per ledger with a copy on a lost or decommissioning bookie:
  the missing bookie ids (JSON list), when it was listed, and a recovery worker's claim; and
  the rotten copies a bookie's scrub found (JSON list of [bookie, entry_id]; NULL: none).
- brokers: one row per broker id (`host:port`): its current session, URLs, start time and lease
  expiry (renewed by heartbeats, last writer wins).
- topic_owners: one row per owned topic: the broker and session owning it (valid while that
  broker's row has that session and an unexpired lease).
- cursors.delivery_state: a subscription's delivered-unacked messages and acks inside batches
  (JSON, NULL for none).
- kafka_group_offsets: one row per (Kafka consumer group, topic, partition): the committed
  offset, the client's metadata string and the commit time; indexed by topic too, for
  deleting a topic's offsets with it.
- topic_schemas: one row per (topic, version) of a topic's Pulsar schemas: type, definition
  bytes, properties (JSON text), store time, and whether it marks a deletion (revision 0013).
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import (
    JSON,
    BigInteger,
    Boolean,
    ForeignKey,
    Index,
    Integer,
    LargeBinary,
    Sequence,
    String,
    Text,
)
from sqlalchemy.dialects.postgresql import JSONB
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column

NAME = String(1024)
# JSONB on PostgreSQL (compact, comparable), JSON text elsewhere.
JSONType = JSON().with_variant(JSONB(), "postgresql")
# A nullable JSON column whose None is SQL NULL (not the JSON value `null`).
NullableJSONType = JSON(none_as_null=True).with_variant(JSONB(none_as_null=True), "postgresql")
# SQLite only gives AUTOINCREMENT to a column typed exactly INTEGER PRIMARY KEY.
LedgerIdType = BigInteger().with_variant(Integer(), "sqlite")

LEDGER_ID_SEQUENCE = Sequence("ledger_id_seq", start=1)


class Base(DeclarativeBase):
    pass


class LedgerRow(Base):
    __tablename__ = "ledgers"
    __table_args__ = {"sqlite_autoincrement": True}

    id: Mapped[int] = mapped_column(LedgerIdType, LEDGER_ID_SEQUENCE, primary_key=True)
    ensemble: Mapped[Any] = mapped_column(JSONType, nullable=False)
    write_quorum: Mapped[int] = mapped_column(Integer, nullable=False)
    ack_quorum: Mapped[int] = mapped_column(Integer, nullable=False)
    state: Mapped[str] = mapped_column(String(16), nullable=False)
    last_entry_id: Mapped[int] = mapped_column(BigInteger, nullable=False)
    length_bytes: Mapped[int] = mapped_column(BigInteger, nullable=False)
    created_ms: Mapped[int] = mapped_column(BigInteger, nullable=False)
    closed_ms: Mapped[int | None] = mapped_column(BigInteger, nullable=True)
    version: Mapped[int] = mapped_column(Integer, nullable=False)
    ensembles: Mapped[Any] = mapped_column(JSONType, nullable=True)
    instances: Mapped[Any] = mapped_column(JSONType, nullable=True)


class ManagedLedgerRow(Base):
    __tablename__ = "managed_ledgers"

    name: Mapped[str] = mapped_column(NAME, primary_key=True)
    ledger_ids: Mapped[Any] = mapped_column(JSONType, nullable=False)
    properties: Mapped[Any] = mapped_column(JSONType, nullable=False)
    version: Mapped[int] = mapped_column(Integer, nullable=False)


class CursorRow(Base):
    __tablename__ = "cursors"

    managed_ledger: Mapped[str] = mapped_column(
        NAME, ForeignKey("managed_ledgers.name", ondelete="CASCADE"), primary_key=True
    )
    name: Mapped[str] = mapped_column(NAME, primary_key=True)
    mark_delete_ledger_id: Mapped[int] = mapped_column(BigInteger, nullable=False)
    mark_delete_entry_id: Mapped[int] = mapped_column(BigInteger, nullable=False)
    individually_deleted: Mapped[Any] = mapped_column(JSONType, nullable=False)
    properties: Mapped[Any] = mapped_column(JSONType, nullable=False)
    delivery_state: Mapped[Any] = mapped_column(NullableJSONType, nullable=True)
    version: Mapped[int] = mapped_column(Integer, nullable=False)


class DedupSnapshotRow(Base):
    __tablename__ = "dedup_snapshots"

    managed_ledger: Mapped[str] = mapped_column(
        NAME, ForeignKey("managed_ledgers.name", ondelete="CASCADE"), primary_key=True
    )
    position_ledger_id: Mapped[int] = mapped_column(BigInteger, nullable=False)
    position_entry_id: Mapped[int] = mapped_column(BigInteger, nullable=False)
    sequences: Mapped[Any] = mapped_column(JSONType, nullable=False)
    version: Mapped[int] = mapped_column(Integer, nullable=False)


class TenantRow(Base):
    __tablename__ = "tenants"

    name: Mapped[str] = mapped_column(NAME, primary_key=True)
    version: Mapped[int] = mapped_column(Integer, nullable=False)
    admin_roles: Mapped[Any] = mapped_column(NullableJSONType, nullable=True)  # revision 0008
    allowed_clusters: Mapped[Any] = mapped_column(NullableJSONType, nullable=True)  # revision 0008


class NamespaceRow(Base):
    __tablename__ = "namespaces"
    __table_args__ = (Index("ix_namespaces_tenant", "tenant"),)  # revision 0002

    name: Mapped[str] = mapped_column(NAME, primary_key=True)
    tenant: Mapped[str] = mapped_column(NAME, ForeignKey("tenants.name"), nullable=False)
    version: Mapped[int] = mapped_column(Integer, nullable=False)
    permissions: Mapped[Any] = mapped_column(NullableJSONType, nullable=True)  # revision 0008


class TopicRow(Base):
    __tablename__ = "topics"
    __table_args__ = (Index("ix_topics_namespace", "namespace"),)  # revision 0002

    name: Mapped[str] = mapped_column(NAME, primary_key=True)
    namespace: Mapped[str] = mapped_column(NAME, ForeignKey("namespaces.name"), nullable=False)
    partitions: Mapped[int] = mapped_column(Integer, nullable=False)
    created_ms: Mapped[int] = mapped_column(BigInteger, nullable=False)
    version: Mapped[int] = mapped_column(Integer, nullable=False)


class PolicyRow(Base):
    __tablename__ = "policies"

    scope: Mapped[str] = mapped_column(NAME, primary_key=True)
    policies: Mapped[Any] = mapped_column(JSONType, nullable=False)
    version: Mapped[int] = mapped_column(Integer, nullable=False)


class CompactionStateRow(Base):
    __tablename__ = "compaction_states"

    topic: Mapped[str] = mapped_column(NAME, primary_key=True)
    compacted_ledger_id: Mapped[int | None] = mapped_column(BigInteger, nullable=True)
    horizon_ledger_id: Mapped[int | None] = mapped_column(BigInteger, nullable=True)
    horizon_entry_id: Mapped[int | None] = mapped_column(BigInteger, nullable=True)
    horizon_batch_index: Mapped[int | None] = mapped_column(BigInteger, nullable=True)
    status: Mapped[str] = mapped_column(String(16), nullable=False)
    last_error: Mapped[str] = mapped_column(Text, nullable=False)
    requested: Mapped[bool] = mapped_column(nullable=False)
    started_ms: Mapped[int | None] = mapped_column(BigInteger, nullable=True)
    ended_ms: Mapped[int | None] = mapped_column(BigInteger, nullable=True)
    messages_in: Mapped[int] = mapped_column(BigInteger, nullable=False)
    messages_out: Mapped[int] = mapped_column(BigInteger, nullable=False)
    compacted_entries: Mapped[int] = mapped_column(BigInteger, nullable=False)
    compacted_size_bytes: Mapped[int] = mapped_column(BigInteger, nullable=False)
    last_succeeded_ms: Mapped[int | None] = mapped_column(BigInteger, nullable=True)
    last_failed_ms: Mapped[int | None] = mapped_column(BigInteger, nullable=True)
    run_ledger_id: Mapped[int | None] = mapped_column(BigInteger, nullable=True)
    lease_holder: Mapped[str] = mapped_column(String(256), nullable=False, server_default="")
    lease_expires_ms: Mapped[int | None] = mapped_column(BigInteger, nullable=True)
    delta_ledger_ids: Mapped[Any] = mapped_column(NullableJSONType, nullable=True)
    delta_size_bytes: Mapped[int] = mapped_column(BigInteger, nullable=False, server_default="0")
    view_rules: Mapped[str] = mapped_column(String(64), nullable=False, server_default="")
    retired_ledger_ids: Mapped[Any] = mapped_column(NullableJSONType, nullable=True)
    version: Mapped[int] = mapped_column(Integer, nullable=False)


class BookieRow(Base):
    __tablename__ = "bookies"

    bookie_id: Mapped[str] = mapped_column(String(255), primary_key=True)
    instance_id: Mapped[str] = mapped_column(String(64), nullable=False)
    state: Mapped[str] = mapped_column(String(16), nullable=False)
    heartbeat_ms: Mapped[int] = mapped_column(BigInteger, nullable=False)
    free_bytes: Mapped[int] = mapped_column(BigInteger, nullable=False)
    ledgers: Mapped[int] = mapped_column(BigInteger, nullable=False)
    process_id: Mapped[str] = mapped_column(String(64), nullable=False, server_default="")


class BookieCookieRow(Base):
    __tablename__ = "bookie_cookies"

    bookie_id: Mapped[str] = mapped_column(String(255), primary_key=True)
    instance_id: Mapped[str] = mapped_column(String(64), nullable=False)
    data_dir: Mapped[str] = mapped_column(Text, nullable=False)
    created_ms: Mapped[int] = mapped_column(BigInteger, nullable=False)
    version: Mapped[int] = mapped_column(Integer, nullable=False)


class LeaderLeaseRow(Base):
    __tablename__ = "leader_leases"

    name: Mapped[str] = mapped_column(String(255), primary_key=True)
    holder: Mapped[str] = mapped_column(String(255), nullable=False)
    expires_ms: Mapped[int] = mapped_column(BigInteger, nullable=False)
    version: Mapped[int] = mapped_column(Integer, nullable=False)


class UnderReplicatedRow(Base):
    __tablename__ = "underreplicated_ledgers"

    ledger_id: Mapped[int] = mapped_column(BigInteger, primary_key=True, autoincrement=False)
    missing: Mapped[Any] = mapped_column(JSONType, nullable=False)
    marked_ms: Mapped[int] = mapped_column(BigInteger, nullable=False)
    claimed_by: Mapped[str] = mapped_column(String(255), nullable=False)
    claim_expires_ms: Mapped[int] = mapped_column(BigInteger, nullable=False)
    version: Mapped[int] = mapped_column(Integer, nullable=False)
    rotten: Mapped[Any] = mapped_column(JSONType, nullable=True)


class BrokerRow(Base):
    __tablename__ = "brokers"

    broker_id: Mapped[str] = mapped_column(String(255), primary_key=True)
    session: Mapped[str] = mapped_column(String(64), nullable=False)
    http_url: Mapped[str] = mapped_column(String(1024), nullable=False)
    kafka_url: Mapped[str] = mapped_column(String(1024), nullable=False)
    pulsar_url: Mapped[str] = mapped_column(String(1024), nullable=False, server_default="")
    started_ms: Mapped[int] = mapped_column(BigInteger, nullable=False)
    expires_ms: Mapped[int] = mapped_column(BigInteger, nullable=False)


class TopicOwnerRow(Base):
    __tablename__ = "topic_owners"
    __table_args__ = (Index("ix_topic_owners_broker", "broker_id", "session"),)

    topic: Mapped[str] = mapped_column(NAME, primary_key=True)
    broker_id: Mapped[str] = mapped_column(String(255), nullable=False)
    session: Mapped[str] = mapped_column(String(64), nullable=False)
    acquired_ms: Mapped[int] = mapped_column(BigInteger, nullable=False)
    version: Mapped[int] = mapped_column(Integer, nullable=False)


class KafkaGroupOffsetRow(Base):
    __tablename__ = "kafka_group_offsets"
    __table_args__ = (Index("ix_kafka_group_offsets_topic", "topic"),)  # revision 0009

    group_id: Mapped[str] = mapped_column(String(255), primary_key=True)
    topic: Mapped[str] = mapped_column(NAME, primary_key=True)
    partition: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=False)
    committed_offset: Mapped[int] = mapped_column(BigInteger, nullable=False)
    committed_metadata: Mapped[str] = mapped_column(Text, nullable=False)
    commit_time_ms: Mapped[int] = mapped_column(BigInteger, nullable=False)


class TopicSchemaRow(Base):
    __tablename__ = "topic_schemas"  # revision 0013

    topic: Mapped[str] = mapped_column(NAME, primary_key=True)
    version: Mapped[int] = mapped_column(BigInteger, primary_key=True, autoincrement=False)
    schema_type: Mapped[str] = mapped_column(String(64), nullable=False)
    schema_data: Mapped[bytes] = mapped_column(LargeBinary, nullable=False)
    properties: Mapped[str] = mapped_column(Text, nullable=False)
    created_ms: Mapped[int] = mapped_column(BigInteger, nullable=False)
    deleted: Mapped[bool] = mapped_column(Boolean, nullable=False)
