"""Kafka topic configs as Quire policies (CreateTopics): what each config becomes, and that a
retention limit given alone does not leave the other at Quire's 0 (the trimmer deletes a ledger
past either limit, and 0 is past at once): retention.ms=-1 alone is -1 and -1, which keeps
everything (tests/kafka_clients/test_restart.py checks it across a restart)."""

from __future__ import annotations

import pytest

from app.kafka_listener.admin import ConfigError, policies_from_configs

DAY_MINUTES = 24 * 60


@pytest.mark.parametrize(
    ("configs", "retention"),
    [
        ({"retention.ms": "-1"}, {"retentionTimeInMinutes": -1, "retentionSizeInMB": -1}),
        ({"retention.ms": "90000"}, {"retentionTimeInMinutes": 2, "retentionSizeInMB": -1}),
        ({"retention.bytes": "1"}, {"retentionTimeInMinutes": 7 * DAY_MINUTES, "retentionSizeInMB": 1}),
        ({"retention.bytes": "-1"}, {"retentionTimeInMinutes": 7 * DAY_MINUTES, "retentionSizeInMB": -1}),
        (
            {"retention.ms": "0", "retention.bytes": str(3 * 1024 * 1024)},
            {"retentionTimeInMinutes": 0, "retentionSizeInMB": 3},
        ),
    ],
)
def test_a_retention_config_given_alone_keeps_kafkas_default_for_the_other(
    configs: dict[str, str | None], retention: dict[str, int]
) -> None:
    assert policies_from_configs(configs) == {"retention": retention}


def test_compaction_configs_and_refusals() -> None:
    assert policies_from_configs({"cleanup.policy": "compact"}) == {
        "compactionPolicy": {"minCleanableDirtyRatio": 0.5}
    }
    assert policies_from_configs({"cleanup.policy": "delete", "retention.ms": None}) == {}
    for bad in ({"cleanup.policy": "forever"}, {"segment.ms": "1"}, {"retention.ms": "soon"}):
        with pytest.raises(ConfigError):
            policies_from_configs(bad)
