"""Names, start tokens and policy resolution (pure functions)."""

from __future__ import annotations

import pytest

from managed_ledger.position import MessageId
from topics import names, policies
from topics.api import CompactionPolicy
from topics.config import TopicsConfig
from topics.errors import InvalidMessageIdError, InvalidNameError, InvalidPolicyError


@pytest.mark.parametrize(
    "name",
    ["public/default/t", "persistent://public/default/t", "a-b/c_d/e.f=g", "t/n/" + "x" * 128],
)
def test_valid_topic_names(name: str) -> None:
    assert names.validate_topic(name) == name.removeprefix("persistent://")


@pytest.mark.parametrize(
    "name",
    [
        "",
        "public/default",
        "public/default/",
        "/default/t",
        "public//t",
        "a/b/c/d",
        "p/d/bad name",
        "p/d/ü",
        "p/d/..",
        "p/d/" + "x" * 129,
        "p/d/a?b",
    ],
)
def test_invalid_topic_names(name: str) -> None:
    with pytest.raises(InvalidNameError):
        names.validate_topic(name)


def test_partition_names() -> None:
    assert names.ledger_names("t/n/x", 0) == ["t/n/x"]
    assert names.ledger_names("t/n/x", 2) == ["t/n/x-partition-0", "t/n/x-partition-1"]
    assert names.partition_index("t/n/x-partition-12") == ("t/n/x", 12)
    assert names.partition_index("t/n/x-partition-") is None


def test_start_tokens_round_trip() -> None:
    a, b = MessageId(3, 4, 5), MessageId(7, 0, 0)
    assert names.parse_start("earliest") == "earliest"
    assert names.parse_start("3:4:5") == a
    assert names.parse_start("after:3:4:5") == ("after", a)
    assert names.format_next([a]) == "after:3:4:5"
    token = names.format_next([a, None, b])
    assert token == "after:3:4:5,,7:0:0"
    assert names.parse_start(token) == ("after", (a, None, b))
    for bad in ("after:", "x", "1:2:3:4", "after:1:-2:0", "after:1:2,zz"):
        with pytest.raises(InvalidMessageIdError):
            names.parse_start(bad)


def test_resolution_topic_over_namespace_over_settings() -> None:
    base = policies.defaults(TopicsConfig(retention_time_minutes=5, deduplication_enabled=False))
    namespace = {
        "retention": {"retentionTimeInMinutes": 60, "retentionSizeInMB": 10},
        "deduplicationEnabled": True,
    }
    topic = {"retention": {"retentionSizeInMB": -1}, "compactionThreshold": 1024}
    eff = policies.resolve(base, namespace, topic)
    assert (eff.retention_time_minutes, eff.retention_size_mb) == (60, -1)
    assert eff.deduplication_enabled is True and eff.compaction_threshold_bytes == 1024
    assert policies.resolve(base, {}, {}) == base
    # A stored value that is not valid (an older version's, a hand edit) is ignored, not fatal.
    assert policies.resolve(base, {"compactionThreshold": "big"}, {}).compaction_threshold_bytes == 0
    config = policies.ledger_config(eff, TopicsConfig())
    assert config.dedup_enabled and config.retention.size_mb == -1
    assert policies.api_value(eff, "retention") == {"retentionTimeInMinutes": 60, "retentionSizeInMB": -1}


def test_validation_errors_name_the_problem() -> None:
    with pytest.raises(InvalidPolicyError, match="maxEntriesPerLedger"):
        policies.validate("rolloverPolicy", {"maxEntriesPerLedger": 0})
    with pytest.raises(InvalidPolicyError, match="unknown policy"):
        policies.validate("nope", 1)
    # the old key-less policy is no policy any more: compactionPolicy.keylessPolicy replaced it
    with pytest.raises(InvalidPolicyError, match="unknown policy"):
        policies.validate("keylessCompactionPolicy", "keep")


COMPACTION = "compactionPolicy"
BAD_COMPACTION: list[object] = [
    {"keylessPolicy": "maybe"},
    {"deleteRetentionMs": -1},
    {"maxLagMs": -5},
    {"maxLagMs": 1.5},
    {"maxLagMs": "10"},
    {"deleteRetentionMs": True},
    {"minCleanableDirtyRatio": -0.1},
    {"minCleanableDirtyRatio": 1.01},
    {"minCleanableDirtyRatio": float("nan")},
    {"minCleanableDirtyRatio": "0.5"},
    {"minCleanableDirtyRatio": False},
    {"deleteRetentionMs": None},
    {"maxLag": 5},
    {},
    "keep",
    5,
]


@pytest.mark.parametrize("value", BAD_COMPACTION)
def test_bad_compaction_policies_are_refused(value: object) -> None:
    with pytest.raises(InvalidPolicyError, match=COMPACTION):
        policies.validate(COMPACTION, value)


def test_compaction_policy_resolves_field_by_field() -> None:
    base = policies.defaults(TopicsConfig(keyless_compaction_policy="keep", compaction_max_lag_ms=7))
    assert base.compaction == CompactionPolicy("keep", 0, 7, 0.0)
    assert base.compaction_on  # the time trigger alone turns compaction on
    assert policies.validate(COMPACTION, {"minCleanableDirtyRatio": 1}) == {"minCleanableDirtyRatio": 1.0}
    namespace = {COMPACTION: {"deleteRetentionMs": 1000, "maxLagMs": 0}}
    topic = {COMPACTION: {"keylessPolicy": "drop", "minCleanableDirtyRatio": 0.5, "maxLagMs": "bad"}}
    eff = policies.resolve(base, namespace, topic)
    assert eff.compaction == CompactionPolicy("drop", 1000, 0, 0.5)
    assert eff.compaction_on and policies.ledger_config(eff, TopicsConfig()).retain_uncompacted
    assert policies.resolve_compaction(base.compaction, namespace, topic) == eff.compaction
    assert policies.api_value(eff, COMPACTION) == {
        "keylessPolicy": "drop",
        "deleteRetentionMs": 1000,
        "maxLagMs": 0,
        "minCleanableDirtyRatio": 0.5,
    }


def test_compaction_on_is_any_trigger() -> None:
    base = policies.defaults(TopicsConfig())
    assert not base.compaction_on
    assert not policies.ledger_config(base, TopicsConfig()).retain_uncompacted
    on = [
        {"compactionThreshold": 1},
        {COMPACTION: {"maxLagMs": 1}},
        {COMPACTION: {"minCleanableDirtyRatio": 0.1}},
    ]
    for stored in on:
        assert policies.resolve(base, {}, stored).compaction_on, stored
    # tombstone retention and the key-less policy shape runs, they request none
    off = {COMPACTION: {"deleteRetentionMs": 5, "keylessPolicy": "keep"}}
    assert not policies.resolve(base, {}, off).compaction_on


def test_legacy_keyless_policy_is_read_then_folded_in() -> None:
    base = policies.defaults(TopicsConfig())
    legacy = {"keylessCompactionPolicy": "keep"}
    assert policies.resolve(base, legacy, {}).compaction.keyless_policy == "keep"
    # the scope's own compactionPolicy.keylessPolicy wins over its legacy value
    both = {**legacy, COMPACTION: {"keylessPolicy": "drop"}}
    assert policies.resolve(base, both, {}).compaction.keyless_policy == "drop"
    changes = policies.scope_changes(COMPACTION, {"maxLagMs": 9}, legacy, base)
    assert changes == {COMPACTION: {"maxLagMs": 9, "keylessPolicy": "keep"}, "keylessCompactionPolicy": None}
    assert policies.removal(COMPACTION) == {COMPACTION: None, "keylessCompactionPolicy": None}


def test_a_partial_object_policy_keeps_the_scope_own_other_fields() -> None:
    base = policies.defaults(TopicsConfig())
    own = {COMPACTION: {"deleteRetentionMs": 5, "maxLagMs": 6}}
    changes = policies.scope_changes(COMPACTION, {"maxLagMs": 7}, own, base)
    assert changes == {COMPACTION: {"deleteRetentionMs": 5, "maxLagMs": 7}, "keylessCompactionPolicy": None}
    # the cross-field rule of rolloverPolicy holds for what the scope will have
    with pytest.raises(InvalidPolicyError, match="minRolloverTimeMs"):
        policies.scope_changes("rolloverPolicy", {"minRolloverTimeMs": 10**12}, {}, base)
