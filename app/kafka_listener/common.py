"""What every Kafka handler shares: the listener's settings, topic names, brokers as Kafka nodes,
building kio responses for the request's version, and Quire's errors as Kafka error codes."""

from __future__ import annotations

import dataclasses
import datetime
from dataclasses import dataclass
from types import ModuleType
from typing import Any

from kio.index import load_payload_module
from kio.static.constants import EntityType

from app.kafka_listener.errors import ErrorCode
from common.errors import ErrorKind, QuireError
from topics.errors import (
    BacklogQuotaExceededError,
    BatchTooLargeError,
    InvalidNameError,
    KafkaSequenceError,
    MessageTooLargeError,
    NotOwnerError,
    OffsetOutOfRangeError,
    TopicExistsError,
    TopicNotFoundError,
    TopicTerminatedError,
    UnknownPartitionError,
    WriteInFlightError,
)


@dataclass(frozen=True, slots=True)
class KafkaConfig:
    """The listener's settings. A Kafka topic `T` is the Quire topic `tenant/namespace/T`; a name
    holding slashes (`tenant/namespace/T`, which librdkafka and kafka-python let through) is
    taken as a whole Quire name, so a client can reach any namespace."""

    host: str = "0.0.0.0"
    port: int = 9092
    # this broker's id (its advertised HTTP address): Kafka node ids derive from broker ids
    broker_id: str = "127.0.0.1:8080"
    advertised_host: str = "127.0.0.1"
    advertised_port: int = 9092
    tenant: str = "public"
    namespace: str = "default"
    # partitions of a topic a Metadata request creates (1: a non-partitioned Quire topic)
    default_partitions: int = 1
    max_fetch_wait_ms: int = 30_000
    cluster_id: str = "quire"

    @property
    def advertised(self) -> str:
        return f"{self.advertised_host}:{self.advertised_port}"


def quire_topic(config: KafkaConfig, kafka_name: str) -> str:
    if "/" in kafka_name:
        return kafka_name.removeprefix("persistent://")
    return f"{config.tenant}/{config.namespace}/{kafka_name}"


def kafka_topic(config: KafkaConfig, quire_name: str) -> str:
    prefix = f"{config.tenant}/{config.namespace}/"
    return quire_name.removeprefix(prefix) if quire_name.startswith(prefix) else quire_name


def split_url(kafka_url: str) -> tuple[str, int]:
    host, _, port = kafka_url.rpartition(":")
    return host.strip("[]"), int(port)


def module(ctx_api_key: int, version: int) -> ModuleType:
    """The kio module of this API's response at this version."""
    return load_payload_module(ctx_api_key, version, EntityType.response)


def build(cls: Any, **values: Any) -> Any:
    """A kio dataclass from the values it has fields for (older versions lack some); a
    throttle time, where the version has one, is zero (Quire does not throttle Kafka clients)."""
    names = {f.name for f in dataclasses.fields(cls)}
    if "throttle_time" in names:
        values.setdefault("throttle_time", _NO_THROTTLE)
    return cls(**{k: v for k, v in values.items() if k in names})


_NO_THROTTLE = datetime.timedelta(0)


def error_code(exc: BaseException) -> ErrorCode:
    """The Kafka error for a failure of Quire's (UNKNOWN_SERVER_ERROR for what has none)."""
    code = _BY_TYPE.get(type(exc))
    if code is not None:
        return code
    if isinstance(exc, KafkaSequenceError):
        return _SEQUENCE[exc.reason]
    if isinstance(exc, QuireError):
        return _BY_KIND.get(exc.kind, ErrorCode.UNKNOWN_SERVER_ERROR)
    return ErrorCode.UNKNOWN_SERVER_ERROR


_BY_TYPE: dict[type[BaseException], ErrorCode] = {
    TopicNotFoundError: ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
    UnknownPartitionError: ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
    InvalidNameError: ErrorCode.INVALID_TOPIC_EXCEPTION,
    NotOwnerError: ErrorCode.NOT_LEADER_OR_FOLLOWER,
    OffsetOutOfRangeError: ErrorCode.OFFSET_OUT_OF_RANGE,
    BatchTooLargeError: ErrorCode.MESSAGE_TOO_LARGE,
    MessageTooLargeError: ErrorCode.MESSAGE_TOO_LARGE,
    TopicExistsError: ErrorCode.TOPIC_ALREADY_EXISTS,
    BacklogQuotaExceededError: ErrorCode.POLICY_VIOLATION,
    TopicTerminatedError: ErrorCode.POLICY_VIOLATION,
    WriteInFlightError: ErrorCode.REQUEST_TIMED_OUT,
}
_SEQUENCE = {
    "epoch": ErrorCode.INVALID_PRODUCER_EPOCH,
    "duplicate": ErrorCode.DUPLICATE_SEQUENCE_NUMBER,
    "gap": ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER,
    "unknown": ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER,
}
_BY_KIND = {
    ErrorKind.not_found: ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
    ErrorKind.invalid: ErrorCode.INVALID_REQUEST,
    ErrorKind.too_large: ErrorCode.MESSAGE_TOO_LARGE,
    ErrorKind.throttled: ErrorCode.POLICY_VIOLATION,
    ErrorKind.unavailable: ErrorCode.NOT_ENOUGH_REPLICAS,
    ErrorKind.fenced: ErrorCode.NOT_LEADER_OR_FOLLOWER,
    ErrorKind.elsewhere: ErrorCode.NOT_LEADER_OR_FOLLOWER,
}
