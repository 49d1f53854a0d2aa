"""The metadata store seam: plain records and the `MetadataStore` protocol.

`managed_ledger.metadata.sql.SqlMetadataStore` (SQLAlchemy; SQLite by default, PostgreSQL in
production) is the real store; `managed_ledger.metadata.memory.InMemoryMetadataStore` passes the
same contract tests for fast unit tests. Every update is compare-and-set on `version`: the caller
passes the record it read (with its version); the store writes it only if the stored version is
still that one and returns the record with version + 1, else raises `BadVersionError`. Records
are immutable; use `dataclasses.replace` to make the new one.

The ledger rows, their records and the errors above are the ledger lifecycle's and live in
`bookie.ledger_metadata` (re-exported here); this protocol extends that one.

Calls are synchronous and short; async callers run them through `bookie.metadata_calls.call_store`.

Rules both stores keep (tests/managed_ledger/test_metadata_contract.py checks them):
- A created record comes back with version 1; a CAS write of version v stores and returns v + 1.
  `put_compaction` / `put_dedup_snapshot` with version 0 create (BadVersionError if one exists;
  NotFoundError for a version > 0 when the row is gone).
- A CAS on a row that is gone raises NotFoundError; so do get_ledger and every delete of a
  missing key. Creating an existing key raises AlreadyExistsError.
- A cursor or dedup snapshot needs its managed ledger (NotFoundError), a namespace its tenant, a
  topic its namespace. delete_managed_ledger removes its cursors and dedup snapshot;
  delete_topic removes the topic's policies and the compaction states of the topic and of its
  partitions (`{topic}-partition-{i}`); delete_namespace removes its policies and permissions,
  delete_tenant its admin roles (a tenant or namespace made again starts with none). A tenant with
  namespaces or a namespace with topics is not deleted: NotEmptyError.
- Records handed out are deep-immutable (mappings are read-only dicts, lists are tuples).
- A Kafka group's committed offsets (`GroupOffset`) are upserts, last writer wins, many in one
  transaction; delete_topic removes every group's offsets of that topic.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, Protocol

from bookie.ledger_metadata import (
    AlreadyExistsError,
    BadVersionError,
    LedgerMetadata,
    LedgerMetadataStore,
    LedgerState,
    MetadataError,
    MetadataUnavailableError,
    NotFoundError,
)
from bookie.recovery_store import RecoveryStore
from bookie.registry import BookieDirectory
from common.errors import ErrorKind

__all__ = [
    "AlreadyExistsError",
    "BadVersionError",
    "BrokerRecord",
    "CompactionState",
    "CompactionStatus",
    "CursorMetadata",
    "DedupSnapshot",
    "GroupOffset",
    "GroupOffsetStore",
    "LedgerMetadata",
    "LedgerMetadataStore",
    "LedgerState",
    "ManagedLedgerMetadata",
    "ManagedLedgerOpening",
    "MetadataError",
    "MetadataStore",
    "MetadataUnavailableError",
    "NamespaceGrants",
    "NotEmptyError",
    "NotFoundError",
    "SchemaBehindError",
    "SchemaStore",
    "SchemaVersion",
    "TenantInfo",
    "TopicMetadata",
    "TopicOwner",
]


class NotEmptyError(MetadataError):
    """Deleting a tenant that still has namespaces, or a namespace that still has topics."""

    kind = ErrorKind.conflict
    title = "Not empty"


class SchemaBehindError(MetadataError):
    """The database schema is older than this code; run the migrations."""

    kind = ErrorKind.unavailable
    title = "Metadata schema behind"


@dataclass(frozen=True, slots=True)
class ManagedLedgerMetadata:
    """A managed ledger's ordered ledger list (the last one is the one being written)."""

    name: str
    ledger_ids: tuple[int, ...] = ()
    properties: Mapping[str, str] = field(default_factory=dict)
    version: int = 0


@dataclass(frozen=True, slots=True)
class CursorMetadata:
    """A durable cursor. Positions are (ledger_id, entry_id) tuples.

    `individually_deleted` holds closed ranges [first, last] of entries acked beyond the
    mark-delete position, sorted and disjoint. `delivery_state` is a JSON value the cursor's
    owner (a subscription) stores with it, opaque to the managed ledger and the store; None for
    none (SQL NULL).
    """

    managed_ledger: str
    name: str
    mark_delete: tuple[int, int]
    individually_deleted: tuple[tuple[tuple[int, int], tuple[int, int]], ...] = ()
    properties: Mapping[str, Any] = field(default_factory=dict)
    version: int = 0
    delivery_state: Mapping[str, Any] | None = None


@dataclass(frozen=True, slots=True)
class DedupSnapshot:
    """Producer name -> highest persisted sequence id, as of `position` (an entry included)."""

    managed_ledger: str
    position: tuple[int, int]
    sequences: Mapping[str, int]
    version: int = 0


class CompactionStatus(StrEnum):
    NOT_RUN = "NOT_RUN"
    RUNNING = "RUNNING"
    SUCCESS = "SUCCESS"
    ERROR = "ERROR"


@dataclass(frozen=True, slots=True)
class ManagedLedgerOpening:
    """What opening a managed ledger reads, all in one transaction (`load_managed_ledger`): its
    record, the rows of the ledgers its list names (those that still have one), its cursors by
    name and its dedup snapshot (None: none)."""

    meta: ManagedLedgerMetadata
    ledgers: Mapping[int, LedgerMetadata] = field(default_factory=dict)
    cursors: tuple[CursorMetadata, ...] = ()
    dedup: DedupSnapshot | None = None


@dataclass(frozen=True, slots=True)
class CompactionState:
    """A topic's compaction: the compacted ledger and horizon, and the last run's status.

    `horizon` is the message id (ledger, entry, batch_index) of the last message the compacted
    ledger covers; `requested` is set by an admin trigger (with status RUNNING) and cleared when a
    compactor takes the run. While RUNNING, `lease_expires_ms` bounds how long the state may stay
    so unless it is renewed: `lease_holder` is the compactor instance running it ("" while the
    run is only requested). A lapsed lease means the run is dead (see topics/compaction_lease.py).

    The view is layered (docs/semantics.md, Compaction): the BASE `compacted_ledger_id` (its
    `compacted_entries`, `compacted_size_bytes`) plus `delta_ledger_ids`, oldest first, each
    holding the newest row per key of the topic between the previous horizon and its own (its
    tombstones too: they hide the key in older layers); `delta_size_bytes` is their total.
    `view_rules` names the rules the layers were written under (a delta is only written under
    the same). `retired_ledger_ids` are layers a fold replaced, deleted after its CAS (a crash
    in between leaves them named here, and the next run or poll deletes them). `messages_in`
    and `messages_out` are the last run's: what it read and what it wrote.
    """

    topic: str
    compacted_ledger_id: int | None = None
    horizon: tuple[int, int, int] | None = None
    status: CompactionStatus = CompactionStatus.NOT_RUN
    last_error: str = ""
    requested: bool = False
    started_ms: int | None = None
    ended_ms: int | None = None
    messages_in: int = 0
    messages_out: int = 0
    compacted_entries: int = 0
    compacted_size_bytes: int = 0
    last_succeeded_ms: int | None = None
    last_failed_ms: int | None = None
    run_ledger_id: int | None = None  # the ledger a RUNNING run is writing (deleted if it dies)
    lease_holder: str = ""
    lease_expires_ms: int | None = None
    delta_ledger_ids: tuple[int, ...] = ()
    delta_size_bytes: int = 0
    view_rules: str = ""
    retired_ledger_ids: tuple[int, ...] = ()
    version: int = 0

    @property
    def layer_ledger_ids(self) -> tuple[int, ...]:
        """The view's ledgers in id order: the base, then the deltas (empty: never compacted)."""
        if self.compacted_ledger_id is None:
            return ()
        return (self.compacted_ledger_id, *self.delta_ledger_ids)

    @property
    def leftover_ledger_ids(self) -> tuple[int, ...]:
        """Ledgers no view references that are still to be deleted: the one a dead run was
        writing and the layers a fold replaced."""
        run = () if self.run_ledger_id is None else (self.run_ledger_id,)
        return (*run, *self.retired_ledger_ids)


@dataclass(frozen=True, slots=True)
class TenantInfo:
    """A tenant and Pulsar's TenantInfo: the roles that administer it, the clusters it may use."""

    name: str
    admin_roles: tuple[str, ...] = ()
    allowed_clusters: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class NamespaceGrants:
    """What authorization needs about a namespace, read in one transaction: the admin roles of
    its tenant (none when the tenant does not exist) and the actions granted to each role on the
    namespace (none when it does not exist, or when only a tenant was asked about)."""

    admin_roles: frozenset[str] = frozenset()
    permissions: Mapping[str, frozenset[str]] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class TopicMetadata:
    """A topic known to the cluster. `name` is `tenant/namespace/topic`; partitions 0 means a
    non-partitioned topic (one managed ledger named after the topic)."""

    name: str
    partitions: int = 0
    created_ms: int = 0
    version: int = 0


@dataclass(frozen=True, slots=True)
class BrokerRecord:
    """A broker's registration. `session` changes at every start and whenever the broker lost
    its lease: ownerships taken under an older session are no longer valid. `expires_ms` is the
    lease's end on the store's clock (`store_now_ms`), pushed on by heartbeats; `owned_topics`
    counts the valid ownerships of this session (filled in by `list_brokers`)."""

    broker_id: str
    session: str
    http_url: str
    kafka_url: str = ""
    pulsar_url: str = ""
    started_ms: int = 0
    expires_ms: int = 0
    owned_topics: int = 0


@dataclass(frozen=True, slots=True)
class TopicOwner:
    """Who owns a topic: valid while broker `broker_id` is registered with `session` and its
    lease has not expired (the ownership lives and dies with the owner's session, as Pulsar's
    ownership znodes are ephemeral nodes of the owner's ZooKeeper session)."""

    topic: str
    broker_id: str
    session: str
    acquired_ms: int = 0
    version: int = 0


@dataclass(frozen=True, slots=True)
class GroupOffset:
    """A Kafka consumer group's committed offset of one partition of a topic (`tenant/ns/topic`;
    partition 0 of a topic that is not partitioned): the next offset the group will consume, the
    client's metadata string, and when it was committed (epoch ms)."""

    group: str
    topic: str
    partition: int
    offset: int
    metadata: str = ""
    commit_time_ms: int = 0


@dataclass(frozen=True, slots=True)
class SchemaVersion:
    """One version of a topic's Pulsar schema (`managed_ledger/metadata/topic_schemas.py`):
    Pulsar's type name ("AVRO", "JSON", "STRING", ...), the definition as given, its
    properties, when it was stored (epoch ms); `deleted`: a mark that the schema was deleted."""

    topic: str
    version: int
    schema_type: str
    data: bytes
    properties: Mapping[str, str] = field(default_factory=dict)
    created_ms: int = 0
    deleted: bool = False


class SchemaStore(Protocol):
    """Topics' schema versions (`managed_ledger/metadata/topic_schemas.py`)."""

    def get_schema_versions(self, topic: str) -> list[SchemaVersion]:
        """Every version of the topic's schema (deletion marks too), by version; [] for none."""
        ...

    def add_schema_version(self, schema: SchemaVersion) -> None:
        """Store a new version; AlreadyExistsError when that (topic, version) is taken (another
        writer stored it first: read again and decide again)."""
        ...

    def delete_schema_versions(self, topic: str) -> int:
        """Forget every version of the topic (the topic is deleted); how many there were."""
        ...


class GroupOffsetStore(Protocol):
    """Kafka consumer groups' committed offsets (`managed_ledger/metadata/kafka_groups.py`)."""

    def commit_group_offsets(self, offsets: Sequence[GroupOffset]) -> None:
        """Store every offset (insert or replace), all in one transaction. When the same
        (group, topic, partition) appears twice, the last one wins."""
        ...

    def get_group_offsets(self, group: str, topics: Collection[str] | None = None) -> list[GroupOffset]:
        """The group's offsets, of every topic or of `topics` only, by topic and partition."""
        ...

    def list_groups(self) -> list[str]:
        """Every group with at least one committed offset, sorted."""
        ...

    def delete_group_offsets(self, group: str) -> int:
        """Delete every offset of the group; how many there were (0: none, no error)."""
        ...


class OwnershipStore(Protocol):
    """Broker sessions and topic ownership (`managed_ledger/metadata/ownership.py`)."""

    def store_now_ms(self) -> int:
        """The store's clock, which stamps and judges every lease (`metadata/store_clock.py`):
        PostgreSQL's `clock_timestamp()`; for a store inside one process, that process's clock."""
        ...

    def register_broker(self, broker: BrokerRecord, lease_ms: int | None = None) -> BrokerRecord:
        """Insert or replace the broker's row (a new session voids the old one's ownerships);
        the row as stored. With `lease_ms`, the store stamps `started_ms` with its own clock and
        `expires_ms` that plus `lease_ms` (what a broker does); without, the record's times are
        written as given (tests, tools)."""
        ...

    def renew_broker(self, broker_id: str, session: str, lease_ms: int) -> bool:
        """Push the lease of `session` on to the store's now plus `lease_ms`, only while it still
        runs by the store's clock, judged in the same statement. False when the row has another
        session, is gone, or its lease already ended: a lapsed session is never revived (another
        broker may hold its topics); the caller must drop its topics and register anew."""
        ...

    def remove_broker(self, broker_id: str, session: str) -> None:
        """Delete the broker's row and the ownerships of `session` (a graceful stop)."""
        ...

    def list_brokers(self, now_ms: int | None = None) -> list[BrokerRecord]:
        """The live brokers (lease not expired at now_ms, by default the store's now), by id,
        with their owned topic counts."""
        ...

    def get_topic_owner(self, topic: str, now_ms: int | None = None) -> TopicOwner | None:
        """The topic's valid owner at now_ms (by default the store's now), or None (unowned, or
        its owner's session is gone)."""
        ...

    def claim_topic(self, owner: TopicOwner, now_ms: int | None = None) -> TopicOwner:
        """Make `owner` the topic's owner unless a valid owner exists; return the owner that
        holds it afterwards (`owner` with its new version, or the other one). Two racing
        claims cannot both win: a primary key decides the insert, a version the update.
        NotFoundError when `owner` names a session that is not live (its broker left). Validity
        is judged at now_ms, by default the store's now inside the claim."""
        ...

    def release_topic(self, topic: str, broker_id: str, session: str) -> bool:
        """Delete the ownership if `broker_id`/`session` still hold it; False when they did not."""
        ...


class MetadataStore(
    LedgerMetadataStore,
    RecoveryStore,
    BookieDirectory,
    OwnershipStore,
    GroupOffsetStore,
    SchemaStore,
    Protocol,
):
    """The ledger rows (`bookie.ledger_metadata.LedgerMetadataStore`), auto-recovery's leases
    and under-replicated ledgers (`bookie.recovery_store.RecoveryStore`), the bookies'
    registrations and cookies (`bookie.registry.BookieDirectory`), and everything above."""

    # --- managed ledgers --------------------------------------------------------------------
    def get_managed_ledger(self, name: str) -> ManagedLedgerMetadata | None: ...

    def create_managed_ledger(self, name: str) -> ManagedLedgerMetadata: ...

    def update_managed_ledger(self, ml: ManagedLedgerMetadata) -> ManagedLedgerMetadata: ...

    def delete_managed_ledger(self, name: str) -> None:
        """Remove the managed ledger, its cursors and dedup snapshot (not its ledgers)."""
        ...

    def load_managed_ledger(self, name: str) -> ManagedLedgerOpening | None:
        """The managed ledger's record with its listed ledgers' rows, its cursors and its dedup
        snapshot, read in one transaction (what an open needs); None when there is no record."""
        ...

    # --- cursors ----------------------------------------------------------------------------
    def list_cursors(self, managed_ledger: str) -> list[CursorMetadata]: ...

    def create_cursor(self, cursor: CursorMetadata) -> CursorMetadata: ...

    def update_cursor(self, cursor: CursorMetadata) -> CursorMetadata: ...

    def update_cursors(self, cursors: list[CursorMetadata]) -> list[CursorMetadata]:
        """CAS many cursors in one transaction (a batched flush)."""
        ...

    def delete_cursor(self, managed_ledger: str, name: str) -> None: ...

    # --- dedup ------------------------------------------------------------------------------
    def get_dedup_snapshot(self, managed_ledger: str) -> DedupSnapshot | None: ...

    def put_dedup_snapshot(self, snapshot: DedupSnapshot) -> DedupSnapshot: ...

    # --- tenants, namespaces, topics, policies ----------------------------------------------
    def list_tenants(self) -> list[str]: ...

    def create_tenant(self, tenant: str, info: TenantInfo | None = None) -> None:
        """Create the tenant, with `info`'s admin roles and clusters (its name must match)."""
        ...

    def get_tenant(self, tenant: str) -> TenantInfo | None: ...

    def update_tenant(self, info: TenantInfo) -> None:
        """Replace the tenant's admin roles and clusters (last writer wins; NotFoundError)."""
        ...

    def delete_tenant(self, tenant: str) -> None: ...

    def list_namespaces(self, tenant: str) -> list[str]:
        """Namespace names `tenant/namespace`."""
        ...

    def create_namespace(self, namespace: str) -> None: ...

    def delete_namespace(self, namespace: str) -> None:
        """Remove the namespace, its policies and its permissions (NotEmptyError with topics)."""
        ...

    def get_permissions(self, namespace: str) -> dict[str, tuple[str, ...]]:
        """Role -> the actions granted on the namespace, sorted (NotFoundError)."""
        ...

    def set_permission(self, namespace: str, role: str, actions: tuple[str, ...] | None) -> None:
        """Grant `actions` to `role` on the namespace, replacing its grant; None (or no action)
        revokes it. Atomic: grants to other roles made at the same time are kept (NotFoundError)."""
        ...

    def get_grants(self, tenant: str, namespace: str | None) -> NamespaceGrants:
        """The tenant's admin roles and, for a namespace `tenant/ns`, its permissions; what does
        not exist grants nothing (never an error)."""
        ...

    def list_topics(self, namespace: str) -> list[TopicMetadata]: ...

    def get_topic(self, name: str) -> TopicMetadata | None: ...

    def create_topic(self, topic: TopicMetadata) -> TopicMetadata: ...

    def update_topic(self, topic: TopicMetadata) -> TopicMetadata: ...

    def delete_topic(self, name: str) -> None:
        """The topic row, its policies, compaction states and Kafka groups' offsets."""
        ...

    def get_policies(self, scope: str) -> dict[str, Any]:
        """Policies set on a scope: a topic `t/n/x` or a namespace `t/n`. Missing -> {}."""
        ...

    def get_policies_of(self, scopes: Sequence[str]) -> dict[str, dict[str, Any]]:
        """`get_policies` of each scope, read at once: scope -> its policies ({} when none)."""
        ...

    def set_policies(self, scope: str, policies: dict[str, Any]) -> None:
        """Replace every policy of the scope (last writer wins: prefer update_policies)."""
        ...

    def update_policies(self, scope: str, changes: Mapping[str, Any]) -> dict[str, Any]:
        """Merge `changes` into the scope's policies atomically (a value None removes that key);
        concurrent updates of different keys never lose each other. Returns the result."""
        ...

    # --- compaction -------------------------------------------------------------------------
    def get_compaction(self, topic: str) -> CompactionState:
        """The topic's compaction state; NOT_RUN (version 0, not stored) if none."""
        ...

    def put_compaction(self, state: CompactionState) -> CompactionState:
        """CAS on version (version 0 = create). One transaction."""
        ...

    def list_compactions(self) -> list[CompactionState]: ...

    def close(self) -> None: ...
