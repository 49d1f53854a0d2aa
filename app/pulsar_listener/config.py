"""The listener's settings, built by app.wiring from Quire's settings."""

from __future__ import annotations

from dataclasses import dataclass

from .frames import DEFAULT_MAX_MESSAGE_BYTES


@dataclass(frozen=True, slots=True)
class PulsarConfig:
    host: str = "0.0.0.0"
    port: int = 6650
    # What LOOKUP answers: this broker's Pulsar address as clients reach it.
    advertised_host: str = "127.0.0.1"
    advertised_port: int = 6650
    # Names the broker gives producers that bring none: `<broker_name>-<counter>`.
    broker_name: str = "quire"
    # The largest message (or batch) taken, sent to clients in CONNECTED.max_message_size.
    max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES
    # Before CONNECTED: frames at most this big, and CONNECT within this time, else closed.
    pre_connect_max_frame_bytes: int = 64 * 1024
    connect_timeout_s: float = 10.0
    # A consumer's long poll on its subscription while it has permits (bounded by max_wait_ms).
    receive_wait_ms: int = 5_000
    # Pulsar brokers have no ack timeout (the client has one): subscriptions this listener
    # creates get a long one, so a message a consumer holds is not handed to another meanwhile.
    subscription_ack_timeout_ms: int = 3_600_000
    # A topic that does not exist, asked for by PARTITIONED_METADATA, is created partitioned
    # with this many partitions (Pulsar's allowAutoTopicCreationType=partitioned); 0: it is not
    # created there (the producer or consumer creates a plain topic, Pulsar's default).
    auto_topic_partitions: int = 0

    @property
    def service_url(self) -> str:
        return f"pulsar://{self.advertised_host}:{self.advertised_port}"
