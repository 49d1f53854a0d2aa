"""Topic policies: validation, resolution (topic > namespace > settings) and the managed ledger
config they turn into.

Stored in the metadata store per scope (`t/n/x` topic, `t/n` namespace) as one dict whose keys
are the admin API's policy names and whose values are the API's bodies:

    {"retention": {"retentionTimeInMinutes": int, "retentionSizeInMB": int},
     "compactionThreshold": int,
     "deduplicationEnabled": bool,
     "rolloverPolicy": {"maxEntriesPerLedger": int, "maxSizePerLedgerBytes": int,
                        "minRolloverTimeMs": int, "maxRolloverTimeMs": int},
     "keylessCompactionPolicy": "drop" | "keep",
     "messageTTL": int seconds (0 = off),
     "backlogQuota": {"destination_storage" | "message_age": {"limitSize": int, "limitTime": int,
                      "policy": str}}}  (topics.backlog_quota; each type resolved on its own)

A dict value may hold only some fields; the others fall back to the next level.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import Any, TypeGuard

from managed_ledger.api import ManagedLedgerConfig, RetentionPolicy, RolloverPolicy
from topics import backlog_quota
from topics.api import TopicPolicies
from topics.config import TopicsConfig
from topics.errors import InvalidPolicyError

POLICY_NAMES = (
    "retention",
    "compactionThreshold",
    "deduplicationEnabled",
    "rolloverPolicy",
    "keylessCompactionPolicy",
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
        keyless_compaction_policy=config.keyless_compaction_policy,
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
    if name == "keylessCompactionPolicy":
        if value not in ("drop", "keep"):
            raise InvalidPolicyError(name, f"expected 'drop' or 'keep', got {value!r}")
        return value
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
    keyless = stored.get("keylessCompactionPolicy")
    if keyless in ("drop", "keep"):
        changes["keyless_compaction_policy"] = keyless
    ttl = stored.get("messageTTL")
    if _is_int(ttl) and ttl >= 0:
        changes["message_ttl_seconds"] = ttl
    quotas = backlog_quota.parse(stored.get(backlog_quota.POLICY))
    if quotas:
        changes["backlog_quotas"] = {**base.backlog_quotas, **quotas}
    return replace(base, **changes) if changes else base


def resolve(base: TopicPolicies, namespace: Mapping[str, Any], topic: Mapping[str, Any]) -> TopicPolicies:
    """Effective policies: the topic's over the namespace's over the settings'."""
    return _apply(_apply(base, namespace), topic)


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
    if name == "keylessCompactionPolicy":
        return policies.keyless_compaction_policy
    if name == "messageTTL":
        return policies.message_ttl_seconds
    if name == backlog_quota.POLICY:
        return backlog_quota.api_map(policies.backlog_quotas)
    raise InvalidPolicyError(name, f"unknown policy; known: {list(POLICY_NAMES)}")
