"""Topic policies: validation, resolution (topic > namespace > settings) and the managed ledger
config they turn into.

Stored in the metadata store per scope (`t/n/x` topic, `t/n` namespace) as one dict whose keys
are the admin API's policy names and whose values are the API's bodies:

    {"retention": {"retentionTimeInMinutes": int, "retentionSizeInMB": int},
     "compactionThreshold": int,
     "deduplicationEnabled": bool,
     "rolloverPolicy": {"maxEntriesPerLedger": int, "maxSizePerLedgerBytes": int,
                        "minRolloverTimeMs": int, "maxRolloverTimeMs": int},
     "compactionPolicy": {"keylessPolicy": "drop" | "keep", "deleteRetentionMs": int,
                          "maxLagMs": int, "minCleanableDirtyRatio": float in [0, 1]},
     "messageTTL": int seconds (0 = off),
     "backlogQuota": {"destination_storage" | "message_age": {"limitSize": int, "limitTime": int,
                      "policy": str}}}  (topics.backlog_quota; each type resolved on its own)

A dict value may hold only some fields; the others fall back to the next level.

`compactionPolicy.keylessPolicy` is the one source of the key-less policy, for the broker and
the compactor alike (both resolve it here). It replaced the `keylessCompactionPolicy` policy,
which no route ever set: a scope that still has one stored is read as that scope's
`keylessPolicy` (when its compactionPolicy has none), and the scope's next write or delete of
compactionPolicy folds it in and removes it (`scope_changes`, `removal`).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import replace
from typing import Any, TypeGuard

from managed_ledger.api import ManagedLedgerConfig, RetentionPolicy, RolloverPolicy
from topics import backlog_quota
from topics.api import CompactionPolicy, TopicPolicies
from topics.config import TopicsConfig
from topics.errors import InvalidPolicyError

POLICY_NAMES = (
    "retention",
    "compactionThreshold",
    "deduplicationEnabled",
    "rolloverPolicy",
    "compactionPolicy",
    "messageTTL",
    "backlogQuota",
)

# field in the API body -> (TopicPolicies attribute, smallest allowed value)
_RETENTION_FIELDS = {
    "retentionTimeInMinutes": ("retention_time_minutes", -1),
    "retentionSizeInMB": ("retention_size_mb", -1),
}
_ROLLOVER_FIELDS = {
    "maxEntriesPerLedger": ("max_entries_per_ledger", 1),
    "maxSizePerLedgerBytes": ("max_size_per_ledger_bytes", 1),
    "minRolloverTimeMs": ("min_rollover_time_ms", 0),
    "maxRolloverTimeMs": ("max_rollover_time_ms", 1),
}

COMPACTION_POLICY = "compactionPolicy"
LEGACY_KEYLESS = "keylessCompactionPolicy"  # read only: see the module's docstring
KEYLESS_POLICIES = ("drop", "keep")
_MAX_MS = 2**63 - 1
# field in the API body -> CompactionPolicy attribute
_COMPACTION_FIELDS = {
    "keylessPolicy": "keyless_policy",
    "deleteRetentionMs": "delete_retention_ms",
    "maxLagMs": "max_lag_ms",
    "minCleanableDirtyRatio": "min_cleanable_dirty_ratio",
}


def defaults(config: TopicsConfig) -> TopicPolicies:
    """The settings level."""
    return TopicPolicies(
        retention_time_minutes=config.retention_time_minutes,
        retention_size_mb=config.retention_size_mb,
        compaction_threshold_bytes=config.compaction_threshold_bytes,
        deduplication_enabled=config.deduplication_enabled,
        max_entries_per_ledger=config.max_entries_per_ledger,
        max_size_per_ledger_bytes=config.max_size_per_ledger_bytes,
        min_rollover_time_ms=config.min_rollover_time_ms,
        max_rollover_time_ms=config.max_rollover_time_ms,
        compaction=CompactionPolicy(
            keyless_policy=config.keyless_compaction_policy,
            delete_retention_ms=config.compaction_delete_retention_ms,
            max_lag_ms=config.compaction_max_lag_ms,
            min_cleanable_dirty_ratio=config.compaction_min_cleanable_dirty_ratio,
        ),
        message_ttl_seconds=config.message_ttl_seconds,
    )


def _is_int(value: object) -> TypeGuard[int]:
    return type(value) is int  # bool is an int subclass: `true` is not a size


def _validate_fields(name: str, value: Any, fields: Mapping[str, tuple[str, int]]) -> dict[str, int]:
    if not isinstance(value, Mapping):
        raise InvalidPolicyError(name, f"expected an object with {sorted(fields)}")
    unknown = sorted(set(value) - set(fields))
    if unknown:
        raise InvalidPolicyError(name, f"unknown fields {unknown}; expected {sorted(fields)}")
    if not value:
        raise InvalidPolicyError(name, f"expected at least one of {sorted(fields)}")
    for key, v in value.items():
        low = fields[key][1]
        if not _is_int(v) or v < low:
            raise InvalidPolicyError(name, f"{key} must be an integer >= {low}, got {v!r}")
    return dict(value)


def _compaction_field_error(key: str, v: Any) -> str | None:
    """What is wrong with one compactionPolicy field's value (None: nothing)."""
    if key == "keylessPolicy":
        return None if v in KEYLESS_POLICIES else f"keylessPolicy must be 'drop' or 'keep', got {v!r}"
    if key == "minCleanableDirtyRatio":
        number = (_is_int(v) or type(v) is float) and math.isfinite(v)
        if not number or not 0 <= v <= 1:
            return f"minCleanableDirtyRatio must be a number from 0 to 1, got {v!r}"
        return None
    if not _is_int(v) or not 0 <= v <= _MAX_MS:
        return f"{key} must be an integer number of milliseconds >= 0, got {v!r}"
    return None


def _validate_compaction(value: Any) -> dict[str, Any]:
    name, fields = COMPACTION_POLICY, sorted(_COMPACTION_FIELDS)
    if not isinstance(value, Mapping):
        raise InvalidPolicyError(name, f"expected an object with {fields}")
    unknown = sorted(set(value) - set(fields))
    if unknown:
        raise InvalidPolicyError(name, f"unknown fields {unknown}; expected {fields}")
    if not value:
        raise InvalidPolicyError(name, f"expected at least one of {fields}")
    for key, v in value.items():
        problem = _compaction_field_error(key, v)
        if problem is not None:
            raise InvalidPolicyError(name, problem)
    out = dict(value)
    if "minCleanableDirtyRatio" in out:
        out["minCleanableDirtyRatio"] = float(out["minCleanableDirtyRatio"])
    return out


def validate(name: str, value: Any) -> Any:
    """The stored form of a policy value, or InvalidPolicyError saying what is wrong."""
    if name == "retention":
        return _validate_fields(name, value, _RETENTION_FIELDS)
    if name == "rolloverPolicy":
        out = _validate_fields(name, value, _ROLLOVER_FIELDS)
        low, high = out.get("minRolloverTimeMs"), out.get("maxRolloverTimeMs")
        if low is not None and high is not None and low > high:
            raise InvalidPolicyError(name, "minRolloverTimeMs must not exceed maxRolloverTimeMs")
        return out
    if name == "compactionThreshold":
        if not _is_int(value) or value < 0:
            raise InvalidPolicyError(name, f"expected an integer number of bytes >= 0, got {value!r}")
        return value
    if name == "deduplicationEnabled":
        if type(value) is not bool:
            raise InvalidPolicyError(name, f"expected true or false, got {value!r}")
        return value
    if name == "messageTTL":
        if not _is_int(value) or value < 0:
            raise InvalidPolicyError(name, f"expected an integer number of seconds >= 0, got {value!r}")
        return value
    if name == COMPACTION_POLICY:
        return _validate_compaction(value)
    if name == backlog_quota.POLICY:
        return backlog_quota.validate_map(value)
    raise InvalidPolicyError(name, f"unknown policy; known: {list(POLICY_NAMES)}")


def _apply(base: TopicPolicies, stored: Mapping[str, Any]) -> TopicPolicies:
    """One level's stored policies over `base`. Bad stored values are ignored, never fatal."""
    changes: dict[str, Any] = {}
    for name, fields in (("retention", _RETENTION_FIELDS), ("rolloverPolicy", _ROLLOVER_FIELDS)):
        value = stored.get(name)
        if isinstance(value, Mapping):
            for key, (attr, low) in fields.items():
                v = value.get(key)
                if _is_int(v) and v >= low:
                    changes[attr] = v
    threshold = stored.get("compactionThreshold")
    if _is_int(threshold) and threshold >= 0:
        changes["compaction_threshold_bytes"] = threshold
    dedup = stored.get("deduplicationEnabled")
    if type(dedup) is bool:
        changes["deduplication_enabled"] = dedup
    compaction = _apply_compaction(base.compaction, stored)
    if compaction != base.compaction:
        changes["compaction"] = compaction
    ttl = stored.get("messageTTL")
    if _is_int(ttl) and ttl >= 0:
        changes["message_ttl_seconds"] = ttl
    quotas = backlog_quota.parse(stored.get(backlog_quota.POLICY))
    if quotas:
        changes["backlog_quotas"] = {**base.backlog_quotas, **quotas}
    return replace(base, **changes) if changes else base


def _apply_compaction(base: CompactionPolicy, stored: Mapping[str, Any]) -> CompactionPolicy:
    """One level's stored compactionPolicy over `base`, field by field (bad values ignored)."""
    value = stored.get(COMPACTION_POLICY)
    own = dict(value) if isinstance(value, Mapping) else {}
    if "keylessPolicy" not in own and LEGACY_KEYLESS in stored:
        own["keylessPolicy"] = stored[LEGACY_KEYLESS]
    changes: dict[str, Any] = {
        _COMPACTION_FIELDS[key]: float(v) if key == "minCleanableDirtyRatio" else v
        for key, v in own.items()
        if key in _COMPACTION_FIELDS and _compaction_field_error(key, v) is None
    }
    return replace(base, **changes) if changes else base


def resolve(base: TopicPolicies, namespace: Mapping[str, Any], topic: Mapping[str, Any]) -> TopicPolicies:
    """Effective policies: the topic's over the namespace's over the settings'."""
    return _apply(_apply(base, namespace), topic)


def resolve_compaction(
    base: CompactionPolicy, namespace: Mapping[str, Any], topic: Mapping[str, Any]
) -> CompactionPolicy:
    """The effective compactionPolicy alone, by the same rules (what the compactor reads)."""
    return _apply_compaction(_apply_compaction(base, namespace), topic)


def scope_changes(
    name: str, stored_value: Any, own: Mapping[str, Any], effective: TopicPolicies
) -> dict[str, Any]:
    """What to merge into a scope's stored policies to set `name` to `stored_value` (validated).

    An object policy given in part keeps the scope's own other fields (the fields it never set
    keep falling back to the next level); cross-field rules (min rollover time <= max) are
    checked against what the scope will have. compactionPolicy folds in the scope's legacy
    `keylessCompactionPolicy` and removes it. `own`: the scope's stored policies; `effective`:
    its policies as resolved now."""
    if not isinstance(stored_value, dict) or name == backlog_quota.POLICY:
        return {name: stored_value}
    mine = own.get(name)
    merged = {**mine, **stored_value} if isinstance(mine, Mapping) else dict(stored_value)
    validate(name, {**api_value(effective, name), **merged})
    if name != COMPACTION_POLICY:
        return {name: merged}
    legacy = own.get(LEGACY_KEYLESS)
    if "keylessPolicy" not in merged and legacy in KEYLESS_POLICIES:
        merged["keylessPolicy"] = legacy
    return {name: merged, LEGACY_KEYLESS: None}


def removal(name: str) -> dict[str, Any]:
    """What to merge into a scope's stored policies to remove `name` (and its legacy form)."""
    if name == COMPACTION_POLICY:
        return {name: None, LEGACY_KEYLESS: None}
    return {name: None}


def ledger_config(policies: TopicPolicies, config: TopicsConfig) -> ManagedLedgerConfig:
    return ManagedLedgerConfig(
        rollover=RolloverPolicy(
            max_entries=policies.max_entries_per_ledger,
            max_size_bytes=policies.max_size_per_ledger_bytes,
            max_rollover_time_ms=policies.max_rollover_time_ms,
            min_rollover_time_ms=policies.min_rollover_time_ms,
        ),
        retention=RetentionPolicy(
            time_minutes=policies.retention_time_minutes, size_mb=policies.retention_size_mb
        ),
        dedup_enabled=policies.deduplication_enabled,
        retain_uncompacted=policies.compaction_on,
        ensemble_size=config.ensemble_size,
        write_quorum=config.write_quorum,
        ack_quorum=config.ack_quorum,
        cursor_flush_interval_ms=config.cursor_flush_interval_ms,
    )


def api_value(policies: TopicPolicies, name: str) -> Any:
    """A policy's effective value in the admin API's shape (what GET returns)."""
    if name == "retention":
        return {
            "retentionTimeInMinutes": policies.retention_time_minutes,
            "retentionSizeInMB": policies.retention_size_mb,
        }
    if name == "rolloverPolicy":
        return {key: getattr(policies, attr) for key, (attr, _) in _ROLLOVER_FIELDS.items()}
    if name == "compactionThreshold":
        return policies.compaction_threshold_bytes
    if name == "deduplicationEnabled":
        return policies.deduplication_enabled
    if name == COMPACTION_POLICY:
        c = policies.compaction
        return {key: getattr(c, attr) for key, attr in _COMPACTION_FIELDS.items()}
    if name == "messageTTL":
        return policies.message_ttl_seconds
    if name == backlog_quota.POLICY:
        return backlog_quota.api_map(policies.backlog_quotas)
    raise InvalidPolicyError(name, f"unknown policy; known: {list(POLICY_NAMES)}")
