"""Names, start tokens and policy resolution (pure functions)."""

from __future__ import annotations

import pytest

from managed_ledger.position import MessageId
from topics import names, policies
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
    with pytest.raises(InvalidPolicyError):
        policies.validate("keylessCompactionPolicy", "maybe")
    assert policies.validate("keylessCompactionPolicy", "keep") == "keep"
