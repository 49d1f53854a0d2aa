"""Normalising records at the store boundary, shared by the memory and SQL stores.

Both stores hand out records that are deep-immutable and made of plain types, whatever the
caller passed in: positions become plain `(int, int)` tuples (a `Position` named tuple compares
equal to them), lists become tuples, and mappings become `FrozenDict`, a `dict` that refuses to
change. `FrozenDict` stays a real dict so that `json`, `orjson`, `dataclasses.asdict`, `copy` and
`pickle` keep working on records; JSON values read back from SQL go through the same `freeze`, so
the two stores return equal records for equal writes.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import replace
from typing import Any, NoReturn

from bookie.types import normalize_history
from managed_ledger.metadata.api import (
    CompactionState,
    CompactionStatus,
    CursorMetadata,
    DedupSnapshot,
    LedgerMetadata,
    LedgerState,
    ManagedLedgerMetadata,
    NamespaceGrants,
    TenantInfo,
    TopicMetadata,
)


class FrozenDict(dict[str, Any]):
    """A dict that cannot change after construction (records share it freely between threads)."""

    def _refuse(self, *args: Any, **kwargs: Any) -> NoReturn:
        raise TypeError("metadata records are immutable: build a new mapping and dataclasses.replace")

    __setitem__ = _refuse
    __delitem__ = _refuse
    __ior__ = _refuse  # type: ignore[assignment]
    clear = _refuse
    pop = _refuse
    popitem = _refuse
    setdefault = _refuse
    update = _refuse

    def __reduce__(self) -> tuple[type[FrozenDict], tuple[dict[str, Any]]]:
        # pickle/deepcopy would otherwise rebuild an empty instance and __setitem__ into it.
        return (FrozenDict, (dict(self),))

    def __hash__(self) -> int:  # type: ignore[override]
        return hash(tuple(sorted(self.items(), key=lambda kv: kv[0])))


def freeze(value: Any) -> Any:
    """Deep-immutable copy of a JSON-like value: mappings -> FrozenDict, lists/tuples -> tuples."""
    if isinstance(value, Mapping):
        return FrozenDict({str(k): freeze(v) for k, v in value.items()})
    if isinstance(value, list | tuple):
        return tuple(freeze(v) for v in value)
    return value


def thaw(value: Any) -> Any:
    """A plain, mutable JSON-ready copy (dicts and lists) of a frozen value."""
    if isinstance(value, Mapping):
        return {k: thaw(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [thaw(v) for v in value]
    return value


def pair(value: Iterable[int]) -> tuple[int, int]:
    first, second = value
    return (int(first), int(second))


def ranges(
    value: Iterable[Iterable[Iterable[int]]],
) -> tuple[tuple[tuple[int, int], tuple[int, int]], ...]:
    out = []
    for first, last in value:
        out.append((pair(first), pair(last)))
    return tuple(out)


def ledger(rec: LedgerMetadata) -> LedgerMetadata:
    """Plain tuples, and the ensemble history always spelled out (an empty one means the first
    ensemble from entry 0), so that both stores hand out equal records."""
    ensemble = tuple(str(b) for b in rec.ensemble)
    return replace(
        rec,
        ensemble=ensemble,
        ensembles=normalize_history(ensemble, rec.ensembles),
        state=LedgerState(rec.state),
        instances=tuple(sorted((int(f), str(b), str(i)) for f, b, i in rec.instances)),
    )


def managed_ledger(rec: ManagedLedgerMetadata) -> ManagedLedgerMetadata:
    return replace(
        rec,
        ledger_ids=tuple(int(i) for i in rec.ledger_ids),
        properties=FrozenDict({str(k): str(v) for k, v in rec.properties.items()}),
    )


def cursor(rec: CursorMetadata) -> CursorMetadata:
    return replace(
        rec,
        mark_delete=pair(rec.mark_delete),
        individually_deleted=ranges(rec.individually_deleted),
        properties=freeze(rec.properties),
        delivery_state=None if rec.delivery_state is None else freeze(rec.delivery_state),
    )


def dedup(rec: DedupSnapshot) -> DedupSnapshot:
    return replace(
        rec,
        position=pair(rec.position),
        sequences=FrozenDict({str(k): int(v) for k, v in rec.sequences.items()}),
    )


def compaction(rec: CompactionState) -> CompactionState:
    horizon = None
    if rec.horizon is not None:
        ledger_id, entry_id, batch_index = rec.horizon
        horizon = (int(ledger_id), int(entry_id), int(batch_index))
    return replace(
        rec,
        horizon=horizon,
        status=CompactionStatus(rec.status),
        delta_ledger_ids=tuple(int(x) for x in rec.delta_ledger_ids or ()),
        retired_ledger_ids=tuple(int(x) for x in rec.retired_ledger_ids or ()),
    )


def topic(rec: TopicMetadata) -> TopicMetadata:
    return replace(rec, partitions=int(rec.partitions))


def merge_policies(current: dict[str, Any], changes: Mapping[str, Any]) -> dict[str, Any]:
    """`current` with `changes` applied: a None value removes its key."""
    merged = dict(current)
    for key, value in changes.items():
        if value is None:
            merged.pop(key, None)
        else:
            merged[key] = thaw(value)
    return merged


def split_namespace(namespace: str) -> tuple[str, str]:
    """`tenant/namespace` -> (tenant, namespace); ValueError on anything else."""
    parts = namespace.split("/")
    if len(parts) != 2 or not all(parts):
        raise ValueError(f"invalid namespace {namespace!r}: expected tenant/namespace")
    return parts[0], parts[1]


def namespace_of(topic_name: str) -> str:
    """`tenant/namespace/topic` -> `tenant/namespace`; ValueError on anything else."""
    parts = topic_name.split("/")
    if len(parts) != 3 or not all(parts):
        raise ValueError(f"invalid topic name {topic_name!r}: expected tenant/namespace/topic")
    return f"{parts[0]}/{parts[1]}"


def partition_prefix(topic_name: str) -> str:
    """Managed ledgers / compaction states of a partitioned topic are `{topic}-partition-{i}`."""
    return f"{topic_name}-partition-"


def tenant(info: TenantInfo) -> TenantInfo:
    """Roles and clusters as sorted tuples without repeats: equal sets make equal records."""
    return TenantInfo(
        name=info.name,
        admin_roles=tuple(sorted(set(info.admin_roles))),
        allowed_clusters=tuple(sorted(set(info.allowed_clusters))),
    )


def grants(
    admin_roles: Iterable[str] | None, permissions: Mapping[str, Iterable[str]] | None
) -> NamespaceGrants:
    return NamespaceGrants(
        admin_roles=frozenset(admin_roles or ()),
        permissions=FrozenDict({role: frozenset(actions) for role, actions in (permissions or {}).items()}),
    )
