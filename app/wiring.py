"""The composition root (cosmicpython's bootstrap): builds the whole broker from `Settings`.

This is the only place that knows every concrete class: the SQL metadata store, the bookie
ledger client, the managed ledger factory and the topic service. Packages below `app/` receive
small frozen config objects built here, never the settings object. Nothing connects while it is
built; the service connects in its `start()` (run by the app's lifespan) or on first use.
"""

from __future__ import annotations

from typing import Any

from app.codec import Limits
from app.settings import Settings
from topics.api import TopicsApi


def limits_from(settings: Settings) -> Limits:
    return Limits(
        max_message_size_bytes=settings.max_message_size_bytes,
        max_batch_size_bytes=settings.max_batch_size_bytes,
        max_batch_messages=settings.max_batch_messages,
        max_wait_ms=settings.max_wait_ms,
        max_messages_per_read=settings.max_messages_per_read,
    )


def managed_ledger_config(settings: Settings) -> Any:
    from managed_ledger.api import ManagedLedgerConfig, RetentionPolicy, RolloverPolicy

    return ManagedLedgerConfig(
        rollover=RolloverPolicy(
            max_entries=settings.max_entries_per_ledger,
            max_size_bytes=settings.max_size_per_ledger_bytes,
            max_rollover_time_ms=settings.max_rollover_time_ms,
            min_rollover_time_ms=settings.min_rollover_time_ms,
        ),
        retention=RetentionPolicy(
            time_minutes=settings.retention_time_minutes, size_mb=settings.retention_size_mb
        ),
        dedup_enabled=settings.deduplication_enabled,
        ensemble_size=settings.ensemble_size,
        write_quorum=settings.write_quorum,
        ack_quorum=settings.ack_quorum,
        cursor_flush_interval_ms=settings.cursor_flush_interval_ms,
    )


def bootstrap(settings: Settings) -> TopicsApi:
    """The real TopicService over PostgreSQL/SQLite metadata and the bookies in the settings."""
    # Imported here, not at module level: importing app.wiring must stay cheap and side-effect
    # free (the OpenAPI export and the unit tests never build the real stack).
    from managed_ledger.factory import ManagedLedgerFactory
    from topics.service import TopicsConfig, TopicService

    from bookie.client import BookieClientConfig, BookieLedgerClient
    from managed_ledger.metadata.sql import SqlMetadataStore

    settings.data_dir.mkdir(parents=True, exist_ok=True)
    metadata = SqlMetadataStore(settings.effective_database_url)
    ledgers = BookieLedgerClient(BookieClientConfig(max_frame_bytes=settings.bookie_max_frame_bytes))
    factory = ManagedLedgerFactory(metadata, ledgers, bookies=settings.effective_bookies)
    config = TopicsConfig(
        managed_ledger=managed_ledger_config(settings),
        allow_auto_topic_creation=settings.allow_auto_topic_creation,
        max_message_size_bytes=settings.max_message_size_bytes,
        max_wait_ms=settings.max_wait_ms,
        default_ack_timeout_ms=settings.default_ack_timeout_ms,
        compaction_threshold_bytes=settings.compaction_threshold_bytes,
    )
    service: TopicsApi = TopicService(metadata, factory, config)
    return service
