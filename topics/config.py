"""The topics layer's settings: a small frozen object app/wiring.py builds from `Settings`."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal


@dataclass(frozen=True, slots=True)
class TopicsConfig:
    """The broker's settings as topics sees them; the limits here are the only copy of them.

    Produce limits are checked once, in `DataPlane.produce` (see its `_check_batch` for what a
    message's size counts); a message or batch over them raises MessageTooLargeError or
    BatchTooLargeError. `max_wait_ms` and `max_messages_per_read` cap each read and receive;
    asking for more raises WaitTooLongError or TooManyMessagesRequestedError rather than being
    shortened without a word.
    """

    # --- limits (errors name them) ------------------------------------------------------------
    allow_auto_topic_creation: bool = True
    max_message_size_bytes: int = 5 * 1024**2
    max_batch_size_bytes: int = 5 * 1024**2
    max_batch_messages: int = 10_000
    max_wait_ms: int = 30_000
    max_messages_per_read: int = 10_000
    max_partitions: int = 1_024
    # --- subscriptions ------------------------------------------------------------------------
    default_ack_timeout_ms: int = 30_000
    # Pulsar's maxUnackedMessagesPerSubscription: past it only redeliveries are handed out.
    max_unacked_messages_per_subscription: int = 200_000
    # An exclusive subscription's consumer that has not polled for this long loses it.
    exclusive_consumer_idle_ms: int = 60_000
    # --- policy defaults (the settings level of topic > namespace > settings) ------------------
    retention_time_minutes: int = 0
    retention_size_mb: int = 0
    compaction_threshold_bytes: int = 0
    deduplication_enabled: bool = False
    max_entries_per_ledger: int = 50_000
    max_size_per_ledger_bytes: int = 2 * 1024**3
    min_rollover_time_ms: int = 10 * 60_000
    max_rollover_time_ms: int = 240 * 60_000
    keyless_compaction_policy: Literal["drop", "keep"] = "drop"
    # compactionPolicy's other fields (topics.api.CompactionPolicy); 0 = off
    compaction_delete_retention_ms: int = 0
    compaction_max_lag_ms: int = 0
    compaction_min_cleanable_dirty_ratio: float = 0.0
    message_ttl_seconds: int = 0  # Pulsar's message TTL: unacked messages older than it are acked
    # --- managed ledger placement (not policies) ----------------------------------------------
    ensemble_size: int = 1
    write_quorum: int = 1
    ack_quorum: int = 1
    cursor_flush_interval_ms: int = 1_000
    # --- background work ----------------------------------------------------------------------
    compaction_check_interval_ms: int = 5_000
    message_ttl_check_interval_ms: int = 5_000
    # How often the counters of open topics become rates (msgRateIn and the like; topics.meters).
    stats_interval_ms: int = 5_000
    # Backlog quotas (topics.backlog_quota): how long a produce held by producer_request_hold
    # waits for the backlog to shrink (then 429), and how often quotas are checked without a
    # produce (eviction; a held produce is re-checked at least this often too).
    backlog_quota_hold_timeout_ms: int = 5_000
    backlog_quota_check_interval_ms: int = 5_000
    # Idle topic unload (topics.idle; Pulsar's inactive-topic handling, but an unload, never a
    # delete): a topic nobody asked for this long is closed and dropped from memory, keeping its
    # ownership, and opened again by its next request. 0: never (the broker's settings turn it on).
    idle_topic_unload_ms: int = 0
    # How long a requested compaction may wait for a compactor to take it before it is ERROR.
    compaction_lease_ms: int = 30_000
