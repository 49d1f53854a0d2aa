"""The composition root (cosmicpython's bootstrap): builds the whole broker from `Settings`.

This is the only place that knows every concrete class: the SQL metadata store, the bookie
ledger client, the managed ledger factory and the topic service. Packages below `app/` receive
small frozen config objects built here, never the settings object. Nothing connects while it is
built; the service connects in its `start()` (run by the app's lifespan) or on first use.
"""

from __future__ import annotations

import ssl
from typing import TYPE_CHECKING

from app.settings import Settings
from topics.api import TopicsApi
from topics.config import TopicsConfig

if TYPE_CHECKING:
    from app.auth.gate import SecurityConfig
    from app.kafka_listener.common import KafkaConfig
    from app.kafka_listener.groups import GroupConfig
    from app.pulsar_listener.config import PulsarConfig
    from bookie.auth import ClientSecurity
    from bookie.connection import BookieClientConfig


def topics_config(settings: Settings) -> TopicsConfig:
    return TopicsConfig(
        allow_auto_topic_creation=settings.allow_auto_topic_creation,
        max_message_size_bytes=settings.max_message_size_bytes,
        max_batch_size_bytes=settings.max_batch_size_bytes,
        max_batch_messages=settings.max_batch_messages,
        max_wait_ms=settings.max_wait_ms,
        max_messages_per_read=settings.max_messages_per_read,
        default_ack_timeout_ms=settings.default_ack_timeout_ms,
        retention_time_minutes=settings.retention_time_minutes,
        retention_size_mb=settings.retention_size_mb,
        compaction_threshold_bytes=settings.compaction_threshold_bytes,
        deduplication_enabled=settings.deduplication_enabled,
        max_entries_per_ledger=settings.max_entries_per_ledger,
        max_size_per_ledger_bytes=settings.max_size_per_ledger_bytes,
        min_rollover_time_ms=settings.min_rollover_time_ms,
        max_rollover_time_ms=settings.max_rollover_time_ms,
        keyless_compaction_policy=settings.keyless_compaction_policy,
        compaction_delete_retention_ms=settings.compaction_delete_retention_ms,
        compaction_max_lag_ms=settings.compaction_max_lag_ms,
        compaction_min_cleanable_dirty_ratio=settings.compaction_min_cleanable_dirty_ratio,
        ensemble_size=settings.ensemble_size,
        write_quorum=settings.write_quorum,
        ack_quorum=settings.ack_quorum,
        cursor_flush_interval_ms=settings.cursor_flush_interval_ms,
        max_partitions=settings.max_partitions,
        max_unacked_messages_per_subscription=settings.max_unacked_messages_per_subscription,
        exclusive_consumer_idle_ms=settings.exclusive_consumer_idle_ms,
        compaction_check_interval_ms=settings.compaction_check_interval_ms,
        message_ttl_seconds=settings.message_ttl_seconds,
        message_ttl_check_interval_ms=settings.message_ttl_check_interval_ms,
        stats_interval_ms=settings.stats_interval_ms,
        backlog_quota_hold_timeout_ms=settings.backlog_quota_hold_timeout_ms,
        backlog_quota_check_interval_ms=settings.backlog_quota_check_interval_ms,
        compaction_lease_ms=settings.compaction_lease_ms,
        idle_topic_unload_ms=settings.idle_topic_unload_ms,
    )


def group_config(settings: Settings) -> GroupConfig:
    """The Kafka listener's group coordinator settings."""
    from app.kafka_listener.groups import GroupConfig

    return GroupConfig(
        initial_rebalance_delay_ms=settings.kafka_group_initial_rebalance_delay_ms,
        min_session_timeout_ms=settings.kafka_group_min_session_timeout_ms,
        max_session_timeout_ms=settings.kafka_group_max_session_timeout_ms,
        max_rebalance_timeout_ms=settings.kafka_group_max_session_timeout_ms,
    )


def security_config(settings: Settings) -> SecurityConfig | None:
    """The broker's security from the settings; None with authentication off (the default)."""
    if not settings.authentication_enabled:
        return None
    from app.auth.gate import SecurityConfig
    from app.auth.tokens import TokenVerifier

    return SecurityConfig(
        verifier=TokenVerifier(settings.token_verification_key()),
        authorization=settings.effective_authorization_enabled,
        super_user_roles=frozenset(settings.super_user_roles),
        metrics_require_token=settings.metrics_require_token,
        authorization_cache_ms=settings.authorization_cache_ms,
    )


def bookie_client_security(settings: Settings) -> ClientSecurity:
    """What every bookie client (broker, compactor and its Spark tasks, autorecovery) proves
    itself with: the cluster secret and the TLS files (docs/operations.md#security)."""
    from bookie.auth import ClientSecurity

    return ClientSecurity(
        secret=settings.bookie_secret(),
        ca_file=settings.bookie_tls_ca_file,
        cert_file=settings.bookie_tls_client_cert_file,
        key_file=settings.bookie_tls_client_key_file,
    )


def bookie_client_config(settings: Settings, **overrides: object) -> BookieClientConfig:
    """The bookie client config of the broker and the compactor: frame limit, timeouts, security."""
    from bookie.connection import BookieClientConfig

    values: dict[str, object] = {
        "max_frame_bytes": settings.bookie_max_frame_bytes,
        "add_timeout_s": settings.add_entry_timeout_ms / 1000,
        "speculative_read_timeout_s": settings.speculative_read_timeout_ms / 1000,
        "security": bookie_client_security(settings),
        **overrides,
    }
    return BookieClientConfig(**values)  # type: ignore[arg-type]


def bootstrap(settings: Settings) -> TopicsApi:
    """The real TopicService over the SQL metadata store and the bookies in the settings.

    Opening the metadata store upgrades its schema to head (or, with auto_migrate off, refuses a
    schema that is behind); the bookie client connects lazily on first use.
    """
    # Imported here, not at module level: importing app.wiring must stay cheap and side-effect
    # free (the OpenAPI export and the unit tests never build the real stack).
    from app.registry import registry_config
    from bookie.client import BookieLedgerClient
    from bookie.registry import MetadataBookieRegistry
    from managed_ledger.factory import ManagedLedgerFactory
    from managed_ledger.metadata.sql import SqlMetadataStore
    from managed_ledger.metadata.store_clock import StoreClock
    from topics.ownership import Ownership, OwnershipConfig
    from topics.service import TopicService

    settings.data_dir.mkdir(parents=True, exist_ok=True)
    store = SqlMetadataStore(settings.effective_database_url, auto_upgrade=settings.auto_migrate)
    client = BookieLedgerClient(
        bookie_client_config(
            settings, bookies=tuple(settings.effective_bookies), health_min_bookies=settings.ensemble_size
        )
    )
    # New ledgers (and the bookies that replace failed ones) are chosen among the live writable
    # bookies registered in this metadata store, not from the static list in the settings.
    registry = MetadataBookieRegistry(store, registry_config(settings))
    factory = ManagedLedgerFactory(
        client, store, placement=registry, entry_cache_bytes=settings.entry_cache_bytes
    )
    # Every broker registers in the metadata store and serves the topics it owns there; the
    # others it redirects to their owners (topics.ownership).
    address = settings.effective_advertised_address
    ownership = Ownership(
        store,
        OwnershipConfig(
            broker_id=address,
            http_url=f"{'https' if settings.tls_enabled else 'http'}://{address}",
            kafka_url=settings.effective_kafka_advertised_address if settings.kafka_port else "",
            pulsar_url=f"pulsar://{settings.effective_pulsar_advertised_address}"
            if settings.pulsar_port
            else "",
            lease_ms=settings.broker_lease_ms,
            heartbeat_interval_ms=settings.broker_heartbeat_interval_ms,
        ),
    )
    # The service owns what it is handed: closing it closes the factory, client and store.
    # Compaction run leases are stamped and judged on the store's clock (docs/operations.md).
    return TopicService(
        store,
        factory,
        client,
        topics_config(settings),
        close_dependencies=True,
        ownership=ownership,
        lease_clock=StoreClock(store.store_now_ms),
    )


def kafka_config(settings: Settings) -> KafkaConfig | None:
    """The Kafka listener's settings; None when it is off (port 0)."""
    if settings.kafka_port == 0:
        return None
    from app.kafka_listener.common import KafkaConfig

    host, _, port = settings.effective_kafka_advertised_address.rpartition(":")
    return KafkaConfig(
        broker_id=settings.effective_advertised_address,
        host=settings.kafka_host or settings.host,
        port=settings.kafka_port,
        advertised_host=host,
        advertised_port=int(port),
        tenant=settings.kafka_tenant,
        namespace=settings.kafka_namespace,
        default_partitions=settings.kafka_default_partitions,
        max_fetch_wait_ms=settings.kafka_max_fetch_wait_ms,
    )


def pulsar_config(settings: Settings) -> PulsarConfig | None:
    """The Pulsar listener's settings; None when it is off (port 0)."""
    if settings.pulsar_port == 0:
        return None
    from app.pulsar_listener.config import PulsarConfig

    host, _, port = settings.effective_pulsar_advertised_address.rpartition(":")
    return PulsarConfig(
        host=settings.pulsar_host or settings.host,
        port=settings.pulsar_port,
        advertised_host=host,
        advertised_port=int(port),
        broker_name=settings.effective_advertised_address.replace(":", "-"),
        max_message_bytes=settings.pulsar_max_message_bytes,
        auto_topic_partitions=settings.default_num_partitions
        if settings.allow_auto_topic_creation and settings.allow_auto_topic_creation_type == "partitioned"
        else 0,
    )


def kafka_tls(settings: Settings) -> ssl.SSLContext | None:
    """TLS on the Kafka port with the HTTP port's certificate, key and CA (None: plain TCP)."""
    return settings.tls_context() if settings.tls_enabled else None
