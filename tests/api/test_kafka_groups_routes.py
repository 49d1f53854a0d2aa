"""Kafka consumer groups in the admin API, through the generated client against the real app (in
process, over the real topics service): offsets, the coordinator's view, 404 and 409."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest
from kio.schema.errors import ErrorCode
from quire_client import Client
from quire_client.api.admin import delete_kafka_group, get_kafka_group, list_kafka_groups
from quire_client.models import KafkaGroup, Problem
from quire_client.types import UNSET

from app.kafka_listener.cluster import SingleNode
from app.kafka_listener.group_offsets import GroupCoordinator, OffsetCommit
from app.kafka_listener.groups import GroupConfig, JoinRequest
from app.routes.kafka_groups import install_group_coordinator
from managed_ledger.metadata.api import GroupOffset
from tests.api.conftest import Served, served
from tests.kafka_listener.group_support import ME

T = "public/default/orders"


@pytest.fixture
async def s() -> AsyncIterator[Served]:
    async with served() as running:
        await running.env.service.create_topic(T, partitions=2)
        yield running


def client_of(s: Served) -> Client:
    return Client(base_url="http://quire").set_async_httpx_client(s.client)


async def test_groups_and_offsets_without_a_kafka_listener(s: Served) -> None:
    api = client_of(s)
    assert await list_kafka_groups.asyncio(client=api) == []
    await s.env.service.commit_group_offsets(
        [GroupOffset("billing", T, 1, 42, "m", 1_000), GroupOffset("billing", T, 0, 7, "", 2_000)]
    )
    assert await list_kafka_groups.asyncio(client=api) == ["billing"]
    group = await get_kafka_group.asyncio("billing", client=api)
    assert isinstance(group, KafkaGroup) and group.group == "billing"
    assert [(o.topic, o.partition, o.offset, o.metadata, o.commit_time_ms) for o in group.offsets] == [
        (f"persistent://{T}", 0, 7, "", 2_000),
        (f"persistent://{T}", 1, 42, "m", 1_000),
    ]
    assert group.state is None and group.members is None  # no coordinator here
    raw = (await s.client.get("/admin/v2/kafka/groups/billing")).json()
    assert raw["offsets"][0].keys() == {
        "topic", "partition", "offset", "metadata", "commitTimeMs", "logEndOffset", "lag"
    }  # fmt: skip
    deleted = await delete_kafka_group.asyncio_detailed("billing", client=api)
    assert deleted.status_code == 204
    for call in (get_kafka_group.asyncio_detailed, delete_kafka_group.asyncio_detailed):
        missing = await call("billing", client=api)
        assert missing.status_code == 404 and isinstance(missing.parsed, Problem)
        assert missing.parsed.title == "Group not found"


async def test_the_coordinators_view_and_a_group_with_members_is_not_deleted(s: Served) -> None:
    config = GroupConfig(initial_rebalance_delay_ms=0, min_session_timeout_ms=10)
    coordinator = GroupCoordinator(s.env.service, SingleNode(ME), config)
    install_group_coordinator(s.app, coordinator)
    api = client_of(s)
    try:
        join = JoinRequest(
            "billing",
            "",
            10_000,
            10_000,
            "consumer",
            (("range", b""),),
            "rdkafka",
            require_known_member_id=False,
        )
        joined = await asyncio.wait_for(coordinator.join(join), 2.0)
        assert joined.error == ErrorCode.none
        assert await list_kafka_groups.asyncio(client=api) == ["billing"]  # members, no offsets yet
        await coordinator.sync("billing", joined.generation, joined.member_id, {joined.member_id: b"abc"})
        commit = [OffsetCommit(T, 0, 5)]
        assert await coordinator.commit("billing", joined.generation, joined.member_id, commit) == [
            ErrorCode.none
        ]
        group = await get_kafka_group.asyncio("billing", client=api)
        assert isinstance(group, KafkaGroup)
        assert (group.state, group.generation, group.protocol, group.leader) == (
            "Stable",
            1,
            "range",
            joined.member_id,
        )
        assert group.members is not UNSET and group.members is not None
        assert [(m.member_id, m.client_id, m.assignment_bytes) for m in group.members] == [
            (joined.member_id, "rdkafka", 3)
        ]
        assert [o.offset for o in group.offsets] == [5]
        busy = await delete_kafka_group.asyncio_detailed("billing", client=api)
        assert busy.status_code == 409 and isinstance(busy.parsed, Problem)
        assert await coordinator.leave("billing", joined.member_id) == ErrorCode.none
        assert (await delete_kafka_group.asyncio_detailed("billing", client=api)).status_code == 204
        assert await list_kafka_groups.asyncio(client=api) == []
    finally:
        await coordinator.close()


async def test_a_group_id_too_long_is_422(s: Served) -> None:
    response = await s.client.get("/admin/v2/kafka/groups/" + "x" * 256)
    assert response.status_code == 422


async def test_each_committed_offset_shows_its_partitions_end_and_the_lag(s: Served) -> None:
    batch = {"messages": [{"key": f"k{i}", "value": f"v{i}"} for i in range(10)]}
    produced = await s.client.post(f"/v1/topics/{T}/messages", json=batch)
    assert produced.status_code == 200, produced.text
    await s.env.service.commit_group_offsets(
        [GroupOffset("billing", T, 0, 1, "", 1_000), GroupOffset("billing", T, 1, 10_000, "", 1_000)]
    )
    raw = (await s.client.get("/admin/v2/kafka/groups/billing")).json()
    ends = [o["logEndOffset"] for o in raw["offsets"]]
    assert sum(ends) == 10  # every message is in one of the two partitions
    assert [o["lag"] for o in raw["offsets"]] == [max(0, ends[0] - 1), 0]  # past the end: no lag
