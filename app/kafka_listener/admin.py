"""Kafka admin APIs over Quire's topics: CreateTopics, DeleteTopics, DeleteRecords (Quire's
truncate-before) and DescribeConfigs (Quire's policies in Kafka's words).

Topic configs a Kafka client may set at creation, and what each becomes:

    cleanup.policy=compact      compaction on: compactionPolicy.minCleanableDirtyRatio 0.5
                                (Kafka's default ratio) unless the request sets the ratio
    cleanup.policy=delete       nothing (retention deletes, Quire's default)
    retention.ms / retention.bytes      the retention policy (-1: unlimited), rounded up to
                                        whole minutes / megabytes; the one not given is Kafka's
                                        default (7 days, or -1 bytes: unlimited)
    min.cleanable.dirty.ratio, delete.retention.ms, max.compaction.lag.ms
                                compactionPolicy's minCleanableDirtyRatio, deleteRetentionMs,
                                maxLagMs

Any other config is refused with INVALID_CONFIG and the topic is not created. A Kafka topic
with one partition is a non-partitioned Quire topic; more partitions make a partitioned one.
"""

from __future__ import annotations

import datetime
from typing import Any

from app.auth.policy import Need
from app.kafka_listener.common import KafkaConfig, build, error_code, module, quire_topic
from app.kafka_listener.errors import ErrorCode
from app.kafka_listener.security import Access
from app.kafka_listener.server import Handler, RequestContext
from app.kafka_listener.versions import ApiKey
from topics.api import PolicyName, TopicPolicies, TopicsApi
from topics.errors import TopicsError

MB = 1024 * 1024
# Kafka's retention.ms (log.retention.hours=168) and retention.bytes (-1) defaults, in Quire's terms.
KAFKA_DEFAULT_RETENTION = {"retentionTimeInMinutes": 7 * 24 * 60, "retentionSizeInMB": -1}
_ZERO = datetime.timedelta(0)
_TOPIC_RESOURCE = 2


class ConfigError(ValueError):
    pass


def policies_from_configs(configs: dict[str, str | None]) -> dict[PolicyName, Any]:
    """Quire policies (name -> value) for Kafka topic configs; ConfigError for the others."""
    out: dict[PolicyName, Any] = {}
    compaction: dict[str, Any] = {}
    retention: dict[str, int] = {}
    try:
        for name, value in configs.items():
            if value is None:
                continue
            if name == "cleanup.policy":
                if value not in ("compact", "delete", "compact,delete", "delete,compact"):
                    raise ConfigError(f"cleanup.policy {value!r} is not compact or delete")
                if "compact" in value:
                    compaction.setdefault("minCleanableDirtyRatio", 0.5)
            elif name == "retention.ms":
                ms = int(value)
                retention["retentionTimeInMinutes"] = -1 if ms < 0 else -(-ms // 60_000)
            elif name == "retention.bytes":
                size = int(value)
                retention["retentionSizeInMB"] = -1 if size < 0 else -(-size // MB)
            elif name == "min.cleanable.dirty.ratio":
                compaction["minCleanableDirtyRatio"] = float(value)
            elif name == "delete.retention.ms":
                compaction["deleteRetentionMs"] = int(value)
            elif name == "max.compaction.lag.ms":
                compaction["maxLagMs"] = int(value)
            else:
                raise ConfigError(f"topic config {name} is not one Quire maps (docs/kafka.md)")
    except ValueError as exc:
        raise ConfigError(str(exc)) from exc
    if retention:
        # Quire deletes a ledger past either limit, so the one not given must not be Quire's 0
        # (which deletes at once): it is Kafka's topic default, as a Kafka client expects.
        out["retention"] = {**KAFKA_DEFAULT_RETENTION, **retention}
    if compaction:
        out["compactionPolicy"] = compaction
    return out


def configs_from_policies(p: TopicPolicies, partitions: int) -> dict[str, str]:
    """The topic's effective policies as Kafka topic configs."""
    c = p.compaction
    minutes, size_mb = p.retention_time_minutes, p.retention_size_mb
    return {
        "cleanup.policy": "compact" if p.compaction_on else "delete",
        "retention.ms": str(-1 if minutes < 0 else minutes * 60_000),
        "retention.bytes": str(-1 if size_mb < 0 else size_mb * MB),
        "min.cleanable.dirty.ratio": str(c.min_cleanable_dirty_ratio),
        "delete.retention.ms": str(c.delete_retention_ms),
        "max.compaction.lag.ms": str(c.max_lag_ms),
        "segment.ms": str(p.max_rollover_time_ms),
        "segment.bytes": str(p.max_size_per_ledger_bytes),
        "message.timestamp.type": "CreateTime",
        "compression.type": "producer",
        "num.partitions": str(partitions),
    }


class KafkaAdmin:
    def __init__(self, topics: TopicsApi, config: KafkaConfig, access: Access | None = None) -> None:
        self._topics = topics
        self._config = config
        self._access = access or Access()

    def handlers(self) -> dict[int, Handler]:
        return {
            ApiKey.CREATE_TOPICS: self.create_topics,
            ApiKey.DELETE_TOPICS: self.delete_topics,
            ApiKey.DELETE_RECORDS: self.delete_records,
            ApiKey.DESCRIBE_CONFIGS: self.describe_configs,
        }

    async def create_topics(self, ctx: RequestContext, req: Any) -> Any:
        mod = module(ApiKey.CREATE_TOPICS, ctx.api_version)
        results = []
        for t in req.topics:
            message: str | None
            if await self._access.denied(ctx, quire_topic(self._config, t.name), Need.TENANT_ADMIN):
                code, message = ErrorCode.TOPIC_AUTHORIZATION_FAILED, "not a tenant admin"
            else:
                code, message = await self._create(t, getattr(req, "validate_only", False))
            results.append(
                build(mod.CreatableTopicResult, name=t.name, error_code=code.kio, error_message=message)
            )
        return build(mod.CreateTopicsResponse, throttle_time=_ZERO, topics=tuple(results))

    async def _create(self, t: Any, validate_only: bool) -> tuple[ErrorCode, str | None]:
        partitions = t.num_partitions if t.num_partitions > 0 else self._config.default_partitions
        if t.num_partitions == 0 or t.num_partitions < -1:
            return ErrorCode.INVALID_PARTITIONS, f"{t.num_partitions} partitions"
        if t.assignments:
            return ErrorCode.INVALID_REQUEST, "Quire places partitions itself: no replica assignments"
        try:
            changes = policies_from_configs({c.name: c.value for c in t.configs})
        except ConfigError as exc:
            return ErrorCode.INVALID_CONFIG, str(exc)
        if validate_only:
            return ErrorCode.NONE, None
        topic = quire_topic(self._config, t.name)
        try:
            await self._topics.create_topic(topic, partitions if partitions > 1 else 0)
            for name, value in changes.items():
                await self._topics.set_policy(topic, name, value)
        except TopicsError as exc:
            return error_code(exc), str(exc)
        return ErrorCode.NONE, None

    async def delete_topics(self, ctx: RequestContext, req: Any) -> Any:
        mod = module(ApiKey.DELETE_TOPICS, ctx.api_version)
        results = []
        for name in req.topic_names:
            topic = quire_topic(self._config, name)
            try:
                if await self._access.denied(ctx, topic, Need.TENANT_ADMIN):
                    code = ErrorCode.TOPIC_AUTHORIZATION_FAILED
                else:
                    await self._topics.delete_topic(topic, force=True)
                    code = ErrorCode.NONE
            except TopicsError as exc:
                code = error_code(exc)
            results.append(build(mod.DeletableTopicResult, name=name, error_code=code.kio))
        return build(mod.DeleteTopicsResponse, throttle_time=_ZERO, responses=tuple(results))

    async def delete_records(self, ctx: RequestContext, req: Any) -> Any:
        mod = module(ApiKey.DELETE_RECORDS, ctx.api_version)
        topics = []
        for t in req.topics:
            parts = []
            denied = await self._access.denied(ctx, quire_topic(self._config, t.name), Need.TENANT_ADMIN)
            for p in t.partitions:
                try:
                    if denied:
                        raise PermissionError
                    low = await self._topics.kafka_delete_records(
                        quire_topic(self._config, t.name), p.partition_index, p.offset
                    )
                    code = ErrorCode.NONE
                except TopicsError as exc:
                    low, code = -1, error_code(exc)
                except PermissionError:
                    low, code = -1, ErrorCode.TOPIC_AUTHORIZATION_FAILED
                parts.append(
                    build(
                        mod.DeleteRecordsPartitionResult,
                        partition_index=p.partition_index,
                        low_watermark=low,
                        error_code=code.kio,
                    )
                )
            topics.append(build(mod.DeleteRecordsTopicResult, name=t.name, partitions=tuple(parts)))
        return build(mod.DeleteRecordsResponse, throttle_time=_ZERO, topics=tuple(topics))

    async def describe_configs(self, ctx: RequestContext, req: Any) -> Any:
        mod = module(ApiKey.DESCRIBE_CONFIGS, ctx.api_version)
        results = [await self._describe(ctx, mod, r) for r in req.resources]
        return build(mod.DescribeConfigsResponse, throttle_time=_ZERO, results=tuple(results))

    async def _describe(self, ctx: RequestContext, mod: Any, r: Any) -> Any:
        def result(code: ErrorCode, message: str | None, configs: tuple[Any, ...] = ()) -> Any:
            return build(
                mod.DescribeConfigsResult,
                error_code=code.kio,
                error_message=message,
                resource_type=r.resource_type,
                resource_name=r.resource_name,
                configs=configs,
            )

        if r.resource_type != _TOPIC_RESOURCE:
            return result(ErrorCode.NONE, None)  # broker configs: none to show
        topic = quire_topic(self._config, r.resource_name)
        if await self._access.denied(ctx, topic, Need.LOOKUP):
            return result(ErrorCode.TOPIC_AUTHORIZATION_FAILED, "not allowed")
        try:
            partitions = await self._topics.kafka_partitions(topic)
            policies = await self._topics.kafka_policies(topic)
        except TopicsError as exc:
            return result(error_code(exc), str(exc))
        keys = r.configuration_keys
        configs = tuple(
            build(
                mod.DescribeConfigsResourceResult,
                name=name,
                value=value,
                read_only=False,
                config_source=1,  # TOPIC_CONFIG
                is_default=False,
                is_sensitive=False,
                synonyms=(),
            )
            for name, value in configs_from_policies(policies, partitions).items()
            if keys is None or name in keys
        )
        return result(ErrorCode.NONE, None, configs)
