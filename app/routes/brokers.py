"""Several brokers: Pulsar's topic lookup and the list of live brokers, and Prometheus metrics of
this broker's ownership (owned topics, lease renewals).

Any broker answers a request about any topic; one owned elsewhere gets `307` to the owner (see
app.errors), so these two routes are for clients that want to go to the owner directly.
"""

from __future__ import annotations

from collections.abc import Iterator

from fastapi import APIRouter, Request
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.registry import Collector
from pydantic import BaseModel, ConfigDict, Field

from app.routes.common import Namespace, Tenant, Topic, full_name, problems
from topics.api import TopicsApi


class LookupResult(BaseModel):
    model_config = ConfigDict(populate_by_name=True)

    broker_url: str = Field(
        alias="brokerUrl",
        title="Broker URL",
        examples=["http://127.0.0.1:8080"],
        description="the owner's service URL (its HTTP URL: Quire's clients speak HTTP)",
    )
    http_url: str = Field(alias="httpUrl", title="HTTP URL", examples=["http://127.0.0.1:8080"])
    kafka_url: str | None = Field(
        alias="kafkaUrl",
        title="Kafka URL",
        examples=[None],
        description="the owner's Kafka listener, null when it has none",
    )
    native_url: str | None = Field(
        alias="nativeUrl",
        title="Pulsar URL",
        examples=["pulsar://127.0.0.1:6650"],
        description="the owner's Pulsar listener (Pulsar's `nativeUrl`), null when it has none",
    )


class BrokerInfo(BaseModel):
    model_config = ConfigDict(populate_by_name=True)

    broker_id: str = Field(alias="brokerId", title="Broker id", examples=["127.0.0.1:8080"])
    http_url: str = Field(alias="httpUrl", title="HTTP URL", examples=["http://127.0.0.1:8080"])
    owned_topics: int = Field(alias="ownedTopics", title="Owned topics", examples=[3])
    lease_expires_ms: int = Field(
        alias="leaseExpiresMs",
        title="Lease expires (ms)",
        examples=[1_764_000_000_000],
        description="when the broker's lease ends unless it renews it (epoch ms)",
    )


def brokers_router(topics: TopicsApi) -> APIRouter:
    router = APIRouter(tags=["admin"])

    @router.get(
        "/lookup/v2/topic/persistent/{tenant}/{namespace}/{topic}",
        operation_id="lookupTopic",
        summary="The broker that owns a topic (one is assigned if none does)",
        response_model=LookupResult,
        response_model_by_alias=True,
        responses=problems(404, 422),
    )
    async def lookup(request: Request, tenant: Tenant, namespace: Namespace, topic: Topic) -> LookupResult:
        owner = await topics.lookup(full_name(tenant, namespace, topic))
        if owner is None:  # the only broker: this one, as the client reached it
            url = str(request.base_url).rstrip("/")
            native = getattr(request.app.state, "pulsar_url", None)
            return LookupResult(broker_url=url, http_url=url, kafka_url=None, native_url=native)
        return LookupResult(
            broker_url=owner.http_url,
            http_url=owner.http_url,
            kafka_url=owner.kafka_url or None,
            native_url=owner.pulsar_url or None,
        )

    @router.get(
        "/admin/v2/brokers",
        operation_id="listBrokers",
        summary="The live brokers of the cluster",
        response_model=list[BrokerInfo],
        response_model_by_alias=True,
        responses=problems(),
    )
    async def list_brokers() -> list[BrokerInfo]:
        return [
            BrokerInfo(
                broker_id=b.broker_id,
                http_url=b.http_url,
                owned_topics=b.owned_topics,
                lease_expires_ms=b.expires_ms,
            )
            for b in await topics.brokers()
        ]

    return router


class OwnershipCollector(Collector):
    """This broker's owned topics and lease renewals, read at scrape time."""

    def __init__(self, topics: TopicsApi) -> None:
        self._topics = topics

    def describe(self) -> Iterator[GaugeMetricFamily | CounterMetricFamily]:
        """The metric names, without asking the service (the registry asks at registration)."""
        return self._families(
            {"owned_topics": 0, "lease_renewals": 0, "lease_renewal_failures": 0, "sessions_lost": 0}
        )

    def collect(self) -> Iterator[GaugeMetricFamily | CounterMetricFamily]:
        return self._families(self._topics.ownership_stats())

    @staticmethod
    def _families(stats: dict[str, int]) -> Iterator[GaugeMetricFamily | CounterMetricFamily]:
        yield GaugeMetricFamily("quire_owned_topics", "Topics this broker owns", value=stats["owned_topics"])
        yield CounterMetricFamily(
            "quire_ownership_lease_renewals", "Renewals of this broker's lease", value=stats["lease_renewals"]
        )
        yield CounterMetricFamily(
            "quire_ownership_lease_renewal_failures",
            "Renewals of this broker's lease that failed",
            value=stats["lease_renewal_failures"],
        )
        yield CounterMetricFamily(
            "quire_ownership_sessions_lost",
            "Times this broker's lease lapsed or was replaced and it dropped every topic",
            value=stats["sessions_lost"],
        )
