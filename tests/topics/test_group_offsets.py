"""The topics service's pass-through of Kafka groups' committed offsets: names checked (a
`persistent://` prefix dropped), and a deleted topic taking its offsets along."""

from __future__ import annotations

import pytest

from managed_ledger.metadata.api import GroupOffset
from tests.topics.conftest import Env
from topics.errors import InvalidArgumentError, InvalidNameError
from topics.service import TopicService

T = "public/default/orders"


async def test_commit_read_list_delete(svc: TopicService) -> None:
    await svc.commit_group_offsets(
        [GroupOffset("g", f"persistent://{T}", 1, 9, "m", 5), GroupOffset("g", T, 0, 3, "", 5)]
    )
    both = [GroupOffset("g", T, 0, 3, "", 5), GroupOffset("g", T, 1, 9, "m", 5)]
    assert await svc.group_offsets("g") == both
    assert await svc.group_offsets("g", [f"persistent://{T}"]) == await svc.group_offsets("g")
    assert await svc.group_offsets("g", ["public/default/other"]) == []
    assert await svc.list_groups() == ["g"]
    assert await svc.delete_group_offsets("g") == 2
    assert await svc.list_groups() == []


async def test_bad_names_are_refused(svc: TopicService) -> None:
    with pytest.raises(InvalidNameError):
        await svc.commit_group_offsets([GroupOffset("g", "orders", 0, 1)])
    for group in ("", "x" * 256, "tab\there"):
        with pytest.raises(InvalidArgumentError):
            await svc.commit_group_offsets([GroupOffset(group, T, 0, 1)])
        with pytest.raises(InvalidArgumentError):
            await svc.group_offsets(group)
    with pytest.raises(InvalidArgumentError):
        await svc.commit_group_offsets([GroupOffset("g", T, -1, 1)])
    assert await svc.list_groups() == []


async def test_deleting_a_topic_deletes_its_offsets(env: Env) -> None:
    await env.service.create_topic(T, partitions=2)
    await env.service.commit_group_offsets([GroupOffset("g", T, 0, 1), GroupOffset("g", T, 1, 2)])
    await env.service.delete_topic(T)
    assert await env.service.group_offsets("g") == []
