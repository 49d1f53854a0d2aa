"""An in-memory `MetadataStore` for fast unit tests of the layers above.

It keeps the same rules as the SQL store (module docstring of `managed_ledger.metadata.api`) and
passes the same contract tests: compare-and-set on version, ledger ids from a counter, `public`
and `public/default` present from the start, deep-immutable records. One lock makes every method
atomic, as one SQL transaction is; nothing survives the process.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

from bookie.ledger_metadata import SegmentInstance
from managed_ledger.metadata import records
from managed_ledger.metadata.api import (
    AlreadyExistsError,
    BadVersionError,
    CompactionState,
    CursorMetadata,
    DedupSnapshot,
    LedgerMetadata,
    LedgerState,
    ManagedLedgerMetadata,
    ManagedLedgerOpening,
    NamespaceGrants,
    NotEmptyError,
    NotFoundError,
    TenantInfo,
    TopicMetadata,
)
from managed_ledger.metadata.bookies import InMemoryBookieMethods
from managed_ledger.metadata.kafka_groups import InMemoryGroupOffsetMethods
from managed_ledger.metadata.ownership import InMemoryOwnershipMethods
from managed_ledger.metadata.recovery import InMemoryRecoveryMethods
from managed_ledger.metadata.topic_schemas import InMemorySchemaMethods


def _version(stored: Any) -> int | None:
    return None if stored is None else int(stored.version)


def _check_version(kind: str, key: object, stored_version: int | None, given: int) -> None:
    """The CAS rule for updates: the row must exist and still carry the version the caller read."""
    if stored_version is None:
        raise NotFoundError(f"{kind} {key} not found")
    if stored_version != given:
        raise BadVersionError(f"{kind} {key}: version {given} is stale (stored version {stored_version})")


def _check_put_version(what: str, stored_version: int | None, given: int) -> None:
    """The rule of the put_* methods: version 0 creates, anything else is a CAS update."""
    if stored_version is None and given != 0:
        raise NotFoundError(f"{what} not found (it was deleted)")
    if (stored_version or 0) != given:
        raise BadVersionError(f"{what}: version {given} is stale (stored version {stored_version})")


class InMemoryMetadataStore(
    InMemoryBookieMethods,
    InMemoryRecoveryMethods,
    InMemoryOwnershipMethods,
    InMemoryGroupOffsetMethods,
    InMemorySchemaMethods,
):
    def __init__(self) -> None:
        InMemoryBookieMethods.__init__(self)  # the bookie registrations and cookies
        InMemoryRecoveryMethods.__init__(self)  # leader leases, under-replicated ledgers
        InMemoryOwnershipMethods.__init__(self)  # broker sessions, topic owners
        InMemoryGroupOffsetMethods.__init__(self)  # Kafka groups' committed offsets
        InMemorySchemaMethods.__init__(self)  # topics' Pulsar schema versions
        self._lock = threading.Lock()
        self._next_ledger_id = 1
        self._ledgers: dict[int, LedgerMetadata] = {}
        self._managed_ledgers: dict[str, ManagedLedgerMetadata] = {}
        self._cursors: dict[tuple[str, str], CursorMetadata] = {}
        self._dedup: dict[str, DedupSnapshot] = {}
        self._tenants: dict[str, TenantInfo] = {"public": TenantInfo("public")}
        # namespace -> role -> actions granted on it (sorted)
        self._namespaces: dict[str, dict[str, tuple[str, ...]]] = {"public/default": {}}
        self._topics: dict[str, TopicMetadata] = {}
        self._policies: dict[str, Any] = {}
        self._compactions: dict[str, CompactionState] = {}
        # Mirrors SqlMetadataStore.statement_count so benchmarks can run on either store.
        self.statement_count = 0

    # --- ledgers ---------------------------------------------------------------------------
    def create_ledger(
        self,
        ensemble: tuple[str, ...],
        write_quorum: int,
        ack_quorum: int,
        created_ms: int,
        instances: tuple[SegmentInstance, ...] = (),
    ) -> LedgerMetadata:
        with self._lock:
            ledger = records.ledger(
                LedgerMetadata(
                    ledger_id=self._next_ledger_id,
                    ensemble=tuple(ensemble),
                    write_quorum=write_quorum,
                    ack_quorum=ack_quorum,
                    state=LedgerState.OPEN,
                    created_ms=created_ms,
                    version=1,
                    instances=instances,
                )
            )
            self._next_ledger_id += 1
            self._ledgers[ledger.ledger_id] = ledger
            return ledger

    def get_ledger(self, ledger_id: int) -> LedgerMetadata:
        with self._lock:
            try:
                return self._ledgers[ledger_id]
            except KeyError:
                raise NotFoundError(f"ledger {ledger_id} not found") from None

    def update_ledger(self, ledger: LedgerMetadata) -> LedgerMetadata:
        with self._lock:
            stored = self._ledgers.get(ledger.ledger_id)
            _check_version("ledger", ledger.ledger_id, _version(stored), ledger.version)
            new = records.ledger(replace(ledger, version=ledger.version + 1))
            self._ledgers[ledger.ledger_id] = new
            return new

    def delete_ledger(self, ledger_id: int) -> None:
        with self._lock:
            if self._ledgers.pop(ledger_id, None) is None:
                raise NotFoundError(f"ledger {ledger_id} not found")

    def list_ledgers(self) -> list[LedgerMetadata]:
        with self._lock:
            return [self._ledgers[i] for i in sorted(self._ledgers)]

    # --- managed ledgers --------------------------------------------------------------------
    def get_managed_ledger(self, name: str) -> ManagedLedgerMetadata | None:
        with self._lock:
            return self._managed_ledgers.get(name)

    def load_managed_ledger(self, name: str) -> ManagedLedgerOpening | None:
        with self._lock:
            meta = self._managed_ledgers.get(name)
            if meta is None:
                return None
            ledgers = {i: self._ledgers[i] for i in meta.ledger_ids if i in self._ledgers}
            cursors = tuple(c for (ml, _), c in sorted(self._cursors.items()) if ml == name)
            return ManagedLedgerOpening(meta, ledgers, cursors, self._dedup.get(name))

    def create_managed_ledger(self, name: str) -> ManagedLedgerMetadata:
        with self._lock:
            if name in self._managed_ledgers:
                raise AlreadyExistsError(f"managed ledger {name} already exists")
            ml = records.managed_ledger(ManagedLedgerMetadata(name=name, version=1))
            self._managed_ledgers[name] = ml
            return ml

    def update_managed_ledger(self, ml: ManagedLedgerMetadata) -> ManagedLedgerMetadata:
        with self._lock:
            stored = self._managed_ledgers.get(ml.name)
            _check_version("managed ledger", ml.name, _version(stored), ml.version)
            new = records.managed_ledger(replace(ml, version=ml.version + 1))
            self._managed_ledgers[ml.name] = new
            return new

    def delete_managed_ledger(self, name: str) -> None:
        with self._lock:
            if self._managed_ledgers.pop(name, None) is None:
                raise NotFoundError(f"managed ledger {name} not found")
            for key in [k for k in self._cursors if k[0] == name]:
                del self._cursors[key]
            self._dedup.pop(name, None)

    # --- cursors ----------------------------------------------------------------------------
    def list_cursors(self, managed_ledger: str) -> list[CursorMetadata]:
        with self._lock:
            return [c for (ml, _), c in sorted(self._cursors.items()) if ml == managed_ledger]

    def create_cursor(self, cursor: CursorMetadata) -> CursorMetadata:
        with self._lock:
            if cursor.managed_ledger not in self._managed_ledgers:
                raise NotFoundError(f"managed ledger {cursor.managed_ledger} not found")
            key = (cursor.managed_ledger, cursor.name)
            if key in self._cursors:
                raise AlreadyExistsError(f"cursor {cursor.name} of {cursor.managed_ledger} already exists")
            new = records.cursor(replace(cursor, version=1))
            self._cursors[key] = new
            return new

    def update_cursor(self, cursor: CursorMetadata) -> CursorMetadata:
        return self.update_cursors([cursor])[0]

    def update_cursors(self, cursors: list[CursorMetadata]) -> list[CursorMetadata]:
        with self._lock:
            # A batch naming a cursor twice is refused before anything else (as the SQL store).
            if len({(c.managed_ledger, c.name) for c in cursors}) != len(cursors):
                raise BadVersionError("the same cursor appears twice in one batch")
            # Check all before writing any: the batch is one transaction.
            for c in cursors:
                stored = self._cursors.get((c.managed_ledger, c.name))
                _check_version("cursor", f"{c.managed_ledger}/{c.name}", _version(stored), c.version)
            out = [records.cursor(replace(c, version=c.version + 1)) for c in cursors]
            for c in out:
                self._cursors[(c.managed_ledger, c.name)] = c
            return out

    def delete_cursor(self, managed_ledger: str, name: str) -> None:
        with self._lock:
            if self._cursors.pop((managed_ledger, name), None) is None:
                raise NotFoundError(f"cursor {name} of {managed_ledger} not found")

    # --- dedup ------------------------------------------------------------------------------
    def get_dedup_snapshot(self, managed_ledger: str) -> DedupSnapshot | None:
        with self._lock:
            return self._dedup.get(managed_ledger)

    def put_dedup_snapshot(self, snapshot: DedupSnapshot) -> DedupSnapshot:
        with self._lock:
            name = snapshot.managed_ledger
            if name not in self._managed_ledgers:
                raise NotFoundError(f"managed ledger {name} not found")
            stored = self._dedup.get(name)
            _check_put_version(f"dedup snapshot of {name}", _version(stored), snapshot.version)
            new = records.dedup(replace(snapshot, version=snapshot.version + 1))
            self._dedup[name] = new
            return new

    # --- tenants and namespaces -------------------------------------------------------------
    def list_tenants(self) -> list[str]:
        with self._lock:
            return sorted(self._tenants)

    def create_tenant(self, tenant: str, info: TenantInfo | None = None) -> None:
        info = records.tenant(info or TenantInfo(tenant))
        assert info.name == tenant, "a tenant's info names that tenant"
        with self._lock:
            if tenant in self._tenants:
                raise AlreadyExistsError(f"tenant {tenant} already exists")
            self._tenants[tenant] = info

    def get_tenant(self, tenant: str) -> TenantInfo | None:
        with self._lock:
            return self._tenants.get(tenant)

    def update_tenant(self, info: TenantInfo) -> None:
        with self._lock:
            if info.name not in self._tenants:
                raise NotFoundError(f"tenant {info.name} not found")
            self._tenants[info.name] = records.tenant(info)

    def delete_tenant(self, tenant: str) -> None:
        with self._lock:
            if tenant not in self._tenants:
                raise NotFoundError(f"tenant {tenant} not found")
            if any(ns.split("/")[0] == tenant for ns in self._namespaces):
                raise NotEmptyError(f"tenant {tenant} still has namespaces")
            del self._tenants[tenant]

    def list_namespaces(self, tenant: str) -> list[str]:
        with self._lock:
            return sorted(ns for ns in self._namespaces if ns.split("/")[0] == tenant)

    def create_namespace(self, namespace: str) -> None:
        tenant, _ = records.split_namespace(namespace)
        with self._lock:
            if tenant not in self._tenants:
                raise NotFoundError(f"tenant {tenant} not found")
            if namespace in self._namespaces:
                raise AlreadyExistsError(f"namespace {namespace} already exists")
            self._namespaces[namespace] = {}

    def delete_namespace(self, namespace: str) -> None:
        with self._lock:
            if namespace not in self._namespaces:
                raise NotFoundError(f"namespace {namespace} not found")
            if any(records.namespace_of(t) == namespace for t in self._topics):
                raise NotEmptyError(f"namespace {namespace} still has topics")
            del self._namespaces[namespace]
            self._policies.pop(namespace, None)

    def get_permissions(self, namespace: str) -> dict[str, tuple[str, ...]]:
        with self._lock:
            if namespace not in self._namespaces:
                raise NotFoundError(f"namespace {namespace} not found")
            return dict(sorted(self._namespaces[namespace].items()))

    def set_permission(self, namespace: str, role: str, actions: tuple[str, ...] | None) -> None:
        with self._lock:
            granted = self._namespaces.get(namespace)
            if granted is None:
                raise NotFoundError(f"namespace {namespace} not found")
            if actions:
                granted[role] = tuple(sorted(set(actions)))
            else:
                granted.pop(role, None)

    def get_grants(self, tenant: str, namespace: str | None) -> NamespaceGrants:
        with self._lock:
            info = self._tenants.get(tenant)
            granted = self._namespaces.get(namespace, {}) if namespace is not None else {}
            return records.grants(info.admin_roles if info else (), granted)

    # --- topics -----------------------------------------------------------------------------
    def list_topics(self, namespace: str) -> list[TopicMetadata]:
        with self._lock:
            return [t for name, t in sorted(self._topics.items()) if records.namespace_of(name) == namespace]

    def get_topic(self, name: str) -> TopicMetadata | None:
        with self._lock:
            return self._topics.get(name)

    def create_topic(self, topic: TopicMetadata) -> TopicMetadata:
        namespace = records.namespace_of(topic.name)
        with self._lock:
            if namespace not in self._namespaces:
                raise NotFoundError(f"namespace {namespace} not found")
            if topic.name in self._topics:
                raise AlreadyExistsError(f"topic {topic.name} already exists")
            new = records.topic(replace(topic, version=1))
            self._topics[topic.name] = new
            return new

    def update_topic(self, topic: TopicMetadata) -> TopicMetadata:
        with self._lock:
            stored = self._topics.get(topic.name)
            _check_version("topic", topic.name, _version(stored), topic.version)
            new = records.topic(replace(topic, version=topic.version + 1))
            self._topics[topic.name] = new
            return new

    def delete_topic(self, name: str) -> None:
        with self._lock:
            if self._topics.pop(name, None) is None:
                raise NotFoundError(f"topic {name} not found")
            self._policies.pop(name, None)
            prefix = records.partition_prefix(name)
            for key in [k for k in self._compactions if k == name or k.startswith(prefix)]:
                del self._compactions[key]
            self._delete_topic_group_offsets(name)

    # --- policies ---------------------------------------------------------------------------
    def get_policies(self, scope: str) -> dict[str, Any]:
        with self._lock:
            stored = self._policies.get(scope)
            return records.thaw(stored) if stored is not None else {}  # type: ignore[no-any-return]

    def get_policies_of(self, scopes: Sequence[str]) -> dict[str, dict[str, Any]]:
        with self._lock:
            stored = {scope: self._policies.get(scope) for scope in scopes}
        return {scope: records.thaw(p) if p is not None else {} for scope, p in stored.items()}

    def set_policies(self, scope: str, policies: dict[str, Any]) -> None:
        with self._lock:
            self._policies[scope] = records.freeze(records.thaw(policies))

    def update_policies(self, scope: str, changes: Mapping[str, Any]) -> dict[str, Any]:
        with self._lock:
            merged = records.merge_policies(records.thaw(self._policies.get(scope, {})), changes)
            self._policies[scope] = records.freeze(merged)
            return records.thaw(merged)  # type: ignore[no-any-return]

    # --- compaction -------------------------------------------------------------------------
    def get_compaction(self, topic: str) -> CompactionState:
        with self._lock:
            return self._compactions.get(topic) or CompactionState(topic=topic)

    def put_compaction(self, state: CompactionState) -> CompactionState:
        with self._lock:
            stored = self._compactions.get(state.topic)
            _check_put_version(f"compaction state of {state.topic}", _version(stored), state.version)
            new = records.compaction(replace(state, version=state.version + 1))
            self._compactions[state.topic] = new
            return new

    def list_compactions(self) -> list[CompactionState]:
        with self._lock:
            return [self._compactions[t] for t in sorted(self._compactions)]

    def close(self) -> None:
        pass
