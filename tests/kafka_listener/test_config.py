"""The group coordinator's settings: QUIRE_KAFKA_GROUP_* into a GroupConfig, checked at start."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from app.kafka_listener.groups import GroupConfig
from app.settings import Settings
from app.wiring import group_config


def test_settings_make_the_group_config() -> None:
    assert group_config(Settings()) == GroupConfig()
    settings = Settings(
        kafka_group_initial_rebalance_delay_ms=0,
        kafka_group_min_session_timeout_ms=100,
        kafka_group_max_session_timeout_ms=60_000,
    )
    config = group_config(settings)
    assert (config.initial_rebalance_delay_ms, config.min_session_timeout_ms) == (0, 100)
    assert config.max_session_timeout_ms == config.max_rebalance_timeout_ms == 60_000


def test_a_minimum_over_the_maximum_is_refused() -> None:
    with pytest.raises(ValidationError, match="kafka_group_min_session_timeout_ms"):
        Settings(kafka_group_min_session_timeout_ms=10_000, kafka_group_max_session_timeout_ms=9_000)
