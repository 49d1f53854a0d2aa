"""A Metadata request creates an unknown topic only when automatic topic creation is on (the
same QUIRE_ALLOW_AUTO_TOPIC_CREATION that REST produce and lookups honour), whatever the
request's own allow_auto_topic_creation says. The data plane's handler over the topics service
with the in-memory store and ledger client."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
from kio.schema.metadata.v5.request import MetadataRequest, MetadataRequestTopic

from app.kafka_listener.common import KafkaConfig
from app.kafka_listener.data import DataPlane
from app.kafka_listener.errors import ErrorCode
from app.kafka_listener.server import RequestContext
from app.kafka_listener.versions import ApiKey
from managed_ledger.metadata.memory import InMemoryMetadataStore
from tests.topics.conftest import Env, make_env
from topics.config import TopicsConfig


@pytest.fixture(params=[True, False], ids=["auto-create-on", "auto-create-off"])
async def env(request: pytest.FixtureRequest) -> AsyncIterator[Env]:
    e = await make_env(InMemoryMetadataStore(), TopicsConfig(allow_auto_topic_creation=request.param))
    yield e
    await e.service.close()
    await e.factory.close()


async def test_metadata_creates_an_unknown_topic_only_when_the_setting_allows(env: Env) -> None:
    plane = DataPlane(env.service, KafkaConfig())
    ctx = RequestContext(ApiKey.METADATA, 5, 1, "test", "peer", {})
    request = MetadataRequest(topics=(MetadataRequestTopic(name="fresh"),), allow_auto_topic_creation=True)
    (topic,) = (await plane.metadata(ctx, request)).topics
    allowed = env.service._config.allow_auto_topic_creation
    if allowed:
        assert (topic.error_code, len(topic.partitions)) == (ErrorCode.NONE, 1)
    else:
        assert (topic.error_code, topic.partitions) == (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, ())
    assert (env.store.get_topic("public/default/fresh") is not None) == allowed
