"""Settings of every Quire process, from `QUIRE_*` environment variables (or an env file named by
`QUIRE_ENV_FILE`), validated by pydantic-settings. Packages below `app/` never see this object:
`app/wiring.py` turns it into their small frozen config objects."""

from __future__ import annotations

import os
import socket
import ssl
from pathlib import Path
from typing import Literal

from pydantic import Field, SecretStr, field_validator, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from app.auth.keys import Algorithm, KeyProblem, VerificationKey, read_cluster_secret, verification_key


class Settings(BaseSettings):
    model_config = SettingsConfigDict(
        env_prefix="QUIRE_", env_file=os.environ.get("QUIRE_ENV_FILE"), extra="ignore"
    )

    # --- where things live -----------------------------------------------------------------
    data_dir: Path = Path("data")
    host: str = "127.0.0.1"
    port: int = Field(8080, ge=0, le=65535)
    bookie_host: str = "127.0.0.1"
    bookie_port: int = Field(3181, ge=0, le=65535)
    bookies: list[str] = Field(default_factory=list, description="host:port of each bookie")
    database_url: str = ""  # default: SQLite file under data_dir
    # Upgrade the metadata schema to head at start; off: refuse a schema that is behind.
    auto_migrate: bool = True

    # --- bookie ------------------------------------------------------------------------------
    journal_max_size_bytes: int = Field(256 * 1024**2, gt=0)
    disk_usage_high_water: float = Field(0.95, gt=0, le=1)
    disk_usage_low_water: float = Field(0.90, gt=0, le=1)
    bookie_max_frame_bytes: int = Field(16 * 1024**2, gt=0)
    bookie_max_requests_in_flight: int = Field(10_000, gt=0)
    gc_interval_s: float = Field(60.0, gt=0)
    disk_check_interval_s: float = Field(10.0, gt=0)
    # Prometheus metrics at http://<bookie listen host>:<this>/metrics; 0 = not served, except
    # by `quire standalone`, which then serves bookie i's on 8000 + i (BookKeeper's port).
    bookie_metrics_port: int = Field(0, ge=0, le=65535)
    # Registration in the metadata store: the id clients dial (default: listen host:port), how
    # often the bookie renews its heartbeat, and how old a heartbeat may get before it is down.
    bookie_advertised_address: str = ""
    bookie_heartbeat_interval_ms: int = Field(2_000, gt=0)
    bookie_heartbeat_timeout_ms: int = Field(10_000, gt=0)
    # How often a bookie compares the ledgers it holds with the metadata store and deletes those
    # the store no longer has (bookie/ledger_gc.py): what a deletion could not delete on it
    # while it was down. 0: never (a bookie whose store is not the cluster's must not judge).
    bookie_ledger_gc_interval_s: float = Field(300.0, ge=0)
    # The scrub (bookie/scrubber.py): every this many seconds a bookie reads every entry it holds
    # and lists the copies whose checksum fails for auto-recovery to rewrite; 0: never (a read
    # that meets a rotten copy still lists it). At most this many payload bytes a second.
    bookie_scrub_interval_s: float = Field(86_400.0, ge=0)
    bookie_scrub_rate_bytes_per_s: int = Field(8 * 1024 * 1024, gt=0)
    # The broker waits this long at start for ensemble_size live bookies, then gives up.
    bookie_wait_timeout_ms: int = Field(30_000, ge=0)
    # An add a bookie has not acknowledged this long counts as that bookie's failure: the writer
    # replaces it (ensemble change). A read not answered this long is also sent to the next
    # replica of the entry (speculative read).
    add_entry_timeout_ms: int = Field(5_000, gt=0)
    speculative_read_timeout_ms: int = Field(100, gt=0)

    # --- auto-recovery (`quire autorecovery`) ------------------------------------------------
    # A bookie down this long counts as lost and its ledgers are re-replicated elsewhere.
    autorecovery_lost_bookie_grace_ms: int = Field(30_000, ge=0)
    autorecovery_audit_interval_ms: int = Field(5_000, gt=0)
    # The auditor's lease: another candidate takes over this long after the auditor stops.
    autorecovery_lease_ms: int = Field(15_000, gt=0)
    # A worker's claim on a ledger: another worker takes it over this long after it stops.
    autorecovery_claim_ms: int = Field(30_000, gt=0)
    # An OPEN ledger is left to its writer this long before it is fenced and closed for a copy.
    autorecovery_open_ledger_grace_ms: int = Field(30_000, ge=0)
    autorecovery_poll_interval_ms: int = Field(1_000, gt=0)
    # Recovery adds a worker keeps unanswered on a replacement bookie (and ledgers it copies at once).
    autorecovery_copies_in_flight: int = Field(2_048, gt=0)
    autorecovery_ledgers_in_flight: int = Field(4, gt=0)
    # The periodic ledger check: do the bookies hold the entries the metadata gives them?
    autorecovery_check_interval_ms: int = Field(60_000, gt=0)
    autorecovery_check_ledgers_per_pass: int = Field(500, gt=0)

    # --- managed ledger defaults (Pulsar's) ------------------------------------------------
    ensemble_size: int = Field(1, ge=1)
    write_quorum: int = Field(1, ge=1)
    ack_quorum: int = Field(1, ge=1)
    max_entries_per_ledger: int = Field(50_000, gt=0, le=2**31)  # a bookie holds entry ids < 2^31
    max_size_per_ledger_bytes: int = Field(2 * 1024**3, gt=0)
    max_rollover_time_ms: int = Field(240 * 60_000, gt=0)
    min_rollover_time_ms: int = Field(10 * 60_000, ge=0)
    retention_time_minutes: int = Field(0, ge=-1)
    retention_size_mb: int = Field(0, ge=-1)
    deduplication_enabled: bool = False
    cursor_flush_interval_ms: int = Field(1_000, gt=0)

    # --- broker ------------------------------------------------------------------------------
    # Several brokers: the id other brokers redirect to (host:port of this broker's HTTP
    # listener; default: host:port), how long a broker's lease on its topics runs unless
    # renewed, and how often it renews it. A broker stops serving its topics a fifth of a lease
    # before the lease ends; another may take them once it has ended.
    advertised_address: str = ""
    broker_lease_ms: int = Field(5_000, gt=0)
    broker_heartbeat_interval_ms: int = Field(1_000, gt=0)
    allow_auto_topic_creation: bool = True
    max_message_size_bytes: int = Field(5 * 1024**2, gt=0)
    max_batch_size_bytes: int = Field(5 * 1024**2, gt=0)
    max_batch_messages: int = Field(10_000, gt=0)
    max_request_body_bytes: int = Field(16 * 1024**2, gt=0)
    max_wait_ms: int = Field(30_000, ge=0)
    # The broker's managed ledger entry cache: the newest entries its topics appended, served to
    # readers at the tail without a bookie read (managed_ledger.entry_cache); 0 turns it off.
    entry_cache_bytes: int = Field(64 * 1024**2, ge=0)
    max_messages_per_read: int = Field(10_000, gt=0)
    default_ack_timeout_ms: int = Field(30_000, gt=0)
    max_partitions: int = Field(1_024, gt=0)
    max_unacked_messages_per_subscription: int = Field(200_000, gt=0)
    exclusive_consumer_idle_ms: int = Field(60_000, gt=0)
    compaction_check_interval_ms: int = Field(5_000, gt=0)
    message_ttl_seconds: int = Field(0, ge=0)
    message_ttl_check_interval_ms: int = Field(5_000, gt=0)
    # Topic stats' rates (msgRateIn, ...) are over this interval; counters are exact.
    stats_interval_ms: int = Field(5_000, ge=100, le=600_000)
    # Idle topic unload (Pulsar's inactive-topic handling, but an unload, never a delete): a
    # topic with no request for this long is closed and dropped from the broker's memory (its
    # cursors flushed, dedup state snapshotted, ledger closed; ownership kept) and opened again
    # by its next request. 0: never.
    idle_topic_unload_ms: int = Field(600_000, ge=0)
    # /metrics: topics with their own series (the rest are summed under topic="_others"), and
    # subscriptions with their own series per topic (likewise), so label cardinality is bounded.
    metrics_max_topics: int = Field(1_000, ge=0, le=100_000)
    metrics_max_subscriptions_per_topic: int = Field(100, ge=0, le=10_000)
    # A produce held by a producer_request_hold backlog quota waits at most this long (then 429).
    backlog_quota_hold_timeout_ms: int = Field(5_000, ge=0, le=60_000)
    backlog_quota_check_interval_ms: int = Field(5_000, gt=0)

    # --- Kafka listener (docs/kafka.md) -------------------------------------------------------
    # Kafka clients connect here (0: no listener). A Kafka topic T is tenant/namespace/T. The
    # advertised address is what Metadata tells clients (default: the HTTP advertised host with
    # this port); the listen address defaults to `host`.
    kafka_port: int = Field(9092, ge=0, le=65_535)
    kafka_host: str = ""
    kafka_advertised_address: str = ""
    kafka_tenant: str = "public"
    kafka_namespace: str = "default"
    kafka_default_partitions: int = Field(1, gt=0, le=1_024)
    kafka_max_fetch_wait_ms: int = Field(30_000, ge=0, le=300_000)
    # Kafka's group.initial.rebalance.delay.ms: a new group waits this long for more members.
    kafka_group_initial_rebalance_delay_ms: int = Field(3_000, ge=0, le=300_000)
    kafka_group_min_session_timeout_ms: int = Field(6_000, gt=0)
    kafka_group_max_session_timeout_ms: int = Field(1_800_000, gt=0)

    # --- Pulsar listener (docs/pulsar.md) ------------------------------------------------------
    # Pulsar clients connect here (0: no listener). The advertised address is what LOOKUP tells
    # clients (default: the HTTP advertised host with this port); the listen address defaults
    # to `host`.
    pulsar_port: int = Field(6650, ge=0, le=65_535)
    pulsar_host: str = ""
    pulsar_advertised_address: str = ""
    pulsar_max_message_bytes: int = Field(5 * 1024 * 1024, gt=0, le=100 * 1024 * 1024)
    # Pulsar's allowAutoTopicCreationType and defaultNumPartitions: what a Pulsar client's
    # PARTITIONED_METADATA creates for a topic that does not exist, when allow_auto_topic_creation
    # is on ("non-partitioned": nothing there, the producer or consumer then creates a plain
    # topic; "partitioned": a partitioned topic of that many partitions).
    allow_auto_topic_creation_type: Literal["non-partitioned", "partitioned"] = "non-partitioned"
    default_num_partitions: int = Field(1, gt=0, le=10_000)

    # --- security (docs/operations.md#security) ----------------------------------------------
    # Off by default (as Pulsar standalone), for a first run; turn it on in production.
    authentication_enabled: bool = False
    # None: on exactly when authentication is (authorization needs the role a token names).
    authorization_enabled: bool | None = None
    # HS256: base64, or file:/path to the raw bytes. RS256/ES256: PEM, or file:/path. One of the two.
    token_secret_key: SecretStr = SecretStr("")
    token_public_key: str = ""
    # Accepted algorithms; empty: the one the key is for (HS256 for a secret key, else RS256 or ES256).
    token_algorithms: list[Algorithm] = Field(default_factory=list)
    super_user_roles: list[str] = Field(default_factory=list)
    # /metrics names every tenant's topics: with this on, only super-users may read it.
    metrics_require_token: bool = False
    # Tenant admins and namespace permissions are cached this long per namespace (a change made
    # at another broker is seen within it; at this broker at once).
    authorization_cache_ms: int = Field(1_000, ge=0, le=60_000)
    # HTTPS on the broker's port: a PEM certificate (chain) and its key; with a CA file, clients
    # must present a certificate it signed (mutual TLS).
    tls_cert_file: str = ""
    tls_key_file: str = ""
    tls_ca_file: str = ""
    # The bookie port: a secret every bookie client proves it knows (never sent), text or
    # file:/path, at least 16 bytes; empty: off. Set it on every process of a cluster or on none.
    bookie_auth_secret: SecretStr = SecretStr("")
    # TLS on the bookie port: the bookie's PEM certificate and key. The CA: bookie clients speak
    # TLS and check bookies' certificates against it, and a bookie with a certificate asks its
    # clients for one the CA signed (mutual TLS): theirs is the client certificate and key.
    bookie_tls_cert_file: str = ""
    bookie_tls_key_file: str = ""
    bookie_tls_ca_file: str = ""
    bookie_tls_client_cert_file: str = ""
    bookie_tls_client_key_file: str = ""

    # --- compactor ---------------------------------------------------------------------------
    spark_master: str = "local[*]"
    compaction_threshold_bytes: int = Field(0, ge=0)
    compaction_poll_interval_ms: int = Field(1_000, gt=0)
    # A compaction run's lease: a run whose compactor stops renewing it for this long is ERROR
    # (and so is a request no compactor took within it).
    compaction_lease_ms: int = Field(30_000, gt=0)
    keyless_compaction_policy: Literal["drop", "keep"] = "drop"
    # The settings level of compactionPolicy: how long a tombstone stays in the compacted view
    # (0: dropped at once), and the time and dirty-ratio triggers (0 = off).
    compaction_delete_retention_ms: int = Field(0, ge=0)
    compaction_max_lag_ms: int = Field(0, ge=0)
    compaction_min_cleanable_dirty_ratio: float = Field(0.0, ge=0.0, le=1.0)
    # inputs (estimated bytes) up to this run as one Spark task: no shuffle stage (0 = never)
    compaction_single_task_max_bytes: int = Field(32 * 1024**2, ge=0)
    # Prometheus metrics at http://<host>:<this>/metrics; 0 = not served, except by `quire
    # standalone`, which then serves them on the port after the last bookie's metrics port.
    compactor_metrics_port: int = Field(0, ge=0, le=65535)
    # test-only hook, off by default: a run pauses this long before closing its ledger
    compactor_test_run_delay_ms: int = Field(0, ge=0)
    compactor_test_run_delay_match: str = ""

    @field_validator("bookie_auth_secret")
    @classmethod
    def _secret_readable(cls, v: SecretStr) -> SecretStr:
        try:
            read_cluster_secret(v.get_secret_value())
        except KeyProblem as exc:
            raise ValueError(str(exc)) from None
        return v

    @field_validator("disk_usage_low_water")
    @classmethod
    def _low_below_high(cls, v: float, info: object) -> float:
        high = getattr(info, "data", {}).get("disk_usage_high_water", 0.95)
        if v > high:
            raise ValueError("disk_usage_low_water must not exceed disk_usage_high_water")
        return v

    @model_validator(mode="after")
    def _quorums_and_heartbeats(self) -> Settings:
        """A ledger is written to write_quorum of its ensemble_size bookies and acknowledged by
        ack_quorum of those; any other order of the three cannot be satisfied."""
        e, qw, qa = self.ensemble_size, self.write_quorum, self.ack_quorum
        if not e >= qw >= qa >= 1:
            raise ValueError(
                f"need ensemble_size >= write_quorum >= ack_quorum >= 1, got ensemble_size={e}, "
                f"write_quorum={qw}, ack_quorum={qa}"
            )
        if self.max_request_body_bytes < self.max_batch_size_bytes:
            raise ValueError(
                f"max_request_body_bytes ({self.max_request_body_bytes}) must be at least "
                f"max_batch_size_bytes ({self.max_batch_size_bytes}): a full batch must fit in a request"
            )
        if self.autorecovery_lease_ms <= self.autorecovery_audit_interval_ms:
            # The auditor renews its lease once a pass: a shorter lease lapses between passes.
            raise ValueError(
                f"autorecovery_lease_ms ({self.autorecovery_lease_ms}) must exceed "
                f"autorecovery_audit_interval_ms ({self.autorecovery_audit_interval_ms})"
            )
        if self.broker_lease_ms < 3 * self.broker_heartbeat_interval_ms:
            # A lease must survive a late or failed renewal or two, or a busy broker drops its topics.
            raise ValueError(
                f"broker_lease_ms ({self.broker_lease_ms}) must be at least three times "
                f"broker_heartbeat_interval_ms ({self.broker_heartbeat_interval_ms})"
            )
        if self.bookie_heartbeat_timeout_ms <= self.bookie_heartbeat_interval_ms:
            raise ValueError(
                f"bookie_heartbeat_timeout_ms ({self.bookie_heartbeat_timeout_ms}) must exceed "
                f"bookie_heartbeat_interval_ms ({self.bookie_heartbeat_interval_ms})"
            )
        if self.kafka_group_min_session_timeout_ms > self.kafka_group_max_session_timeout_ms:
            raise ValueError(
                f"kafka_group_min_session_timeout_ms ({self.kafka_group_min_session_timeout_ms}) must not "
                f"exceed kafka_group_max_session_timeout_ms ({self.kafka_group_max_session_timeout_ms})"
            )
        self._security_settings_agree()
        self._tls_settings_agree()
        self._bookie_tls_settings_agree()
        return self

    def bookie_secret(self) -> bytes:
        """The bookie cluster secret's bytes (b"": off); the validator has read it once already."""
        return read_cluster_secret(self.bookie_auth_secret.get_secret_value())

    def _bookie_tls_settings_agree(self) -> None:
        from bookie.auth import ClientSecurity, ServerSecurity

        pairs = (
            ("bookie_tls_cert_file", "bookie_tls_key_file"),
            ("bookie_tls_client_cert_file", "bookie_tls_client_key_file"),
        )
        for cert, key in pairs:
            if bool(getattr(self, cert)) != bool(getattr(self, key)):
                raise ValueError(f"bookie TLS needs both {cert} and {key} (PEM files), or neither")
        if self.bookie_tls_client_cert_file and not self.bookie_tls_ca_file:
            raise ValueError(
                "bookie_tls_client_cert_file needs bookie_tls_ca_file: TLS to bookies is on with a CA"
            )
        try:
            ServerSecurity(
                b"", self.bookie_tls_cert_file, self.bookie_tls_key_file, self.bookie_tls_ca_file
            ).ssl_context()
            ClientSecurity(
                b"",
                self.bookie_tls_ca_file,
                self.bookie_tls_client_cert_file,
                self.bookie_tls_client_key_file,
            ).ssl_context()
        except (OSError, ssl.SSLError) as exc:
            raise ValueError(f"bookie TLS files cannot be used: {exc}") from None

    def _tls_settings_agree(self) -> None:
        if not (self.tls_cert_file or self.tls_key_file or self.tls_ca_file):
            return
        if not (self.tls_cert_file and self.tls_key_file):
            raise ValueError("TLS needs both tls_cert_file and tls_key_file (PEM files)")
        try:
            self.tls_context()
        except (OSError, ssl.SSLError) as exc:
            raise ValueError(f"TLS files cannot be used: {exc}") from None

    @property
    def tls_enabled(self) -> bool:
        return bool(self.tls_cert_file)

    def tls_context(self) -> ssl.SSLContext:
        """The server side of TLS from the files (raises when they cannot be read or do not match)."""
        context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        context.load_cert_chain(self.tls_cert_file, self.tls_key_file)
        if self.tls_ca_file:
            context.load_verify_locations(self.tls_ca_file)
            context.verify_mode = ssl.CERT_REQUIRED
        return context

    def _security_settings_agree(self) -> None:
        if self.authorization_enabled and not self.authentication_enabled:
            raise ValueError(
                "authorization_enabled needs authentication_enabled: a role comes from a verified token"
            )
        if not self.authentication_enabled:
            return
        try:
            self.token_verification_key()
        except KeyProblem as exc:
            raise ValueError(str(exc)) from None
        if self.effective_authorization_enabled and not self.super_user_roles:
            raise ValueError(
                "authorization is on but super_user_roles is empty: nobody could create a tenant or "
                'grant a permission; set QUIRE_SUPER_USER_ROLES, e.g. ["admin"]'
            )

    @property
    def effective_authorization_enabled(self) -> bool:
        if self.authorization_enabled is None:
            return self.authentication_enabled
        return self.authorization_enabled

    def token_verification_key(self) -> VerificationKey:
        """The key and algorithms tokens are verified with (KeyProblem when they do not fit)."""
        return verification_key(
            self.token_secret_key.get_secret_value(), self.token_public_key, self.token_algorithms
        )

    @property
    def effective_database_url(self) -> str:
        return self.database_url or f"sqlite:///{(self.data_dir / 'metadata.db').resolve()}"

    @property
    def effective_advertised_address(self) -> str:
        """Where other brokers send clients: the setting, else host:port, with a wildcard listen
        address replaced by this machine's name (as Pulsar's advertisedAddress defaults)."""
        if self.advertised_address:
            return self.advertised_address
        host = socket.getfqdn() if self.host in ("", "0.0.0.0", "::") else self.host
        return f"{host}:{self.port}"

    @property
    def effective_kafka_advertised_address(self) -> str:
        """Where Metadata sends Kafka clients: the setting, else the HTTP advertised host with
        the Kafka port."""
        if self.kafka_advertised_address:
            return self.kafka_advertised_address
        host = self.effective_advertised_address.rpartition(":")[0]
        return f"{host}:{self.kafka_port}"

    @property
    def effective_pulsar_advertised_address(self) -> str:
        """Where LOOKUP sends Pulsar clients: the setting, else the HTTP advertised host with the
        Pulsar port."""
        if self.pulsar_advertised_address:
            return self.pulsar_advertised_address
        host = self.effective_advertised_address.rpartition(":")[0]
        return f"{host}:{self.pulsar_port}"

    @property
    def effective_bookies(self) -> list[str]:
        return self.bookies or [f"{self.bookie_host}:{self.bookie_port}"]
