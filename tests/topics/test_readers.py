"""Non-durable readers: paging by `next`, start positions, long polling, get by id, last id."""

from __future__ import annotations

import asyncio

import pytest

from managed_ledger.entry_format import Message
from managed_ledger.position import MessageId
from tests.topics.conftest import Env
from topics.errors import (
    InvalidArgumentError,
    MessageNotFoundError,
    TooManyMessagesRequestedError,
    TopicNotFoundError,
    WaitTooLongError,
)
from topics.names import parse_start
from topics.service import TopicService

T = "public/default/feed"


async def produce(svc: TopicService, *values: str, topic: str = T) -> list[MessageId]:
    results = await svc.produce(topic, None, [Message(v.encode()) for v in values])
    return [r.message_id for r in results if r.message_id is not None]


async def read_all(svc: TopicService, start: str, page: int, topic: str = T) -> list[str]:
    out: list[str] = []
    position = parse_start(start)
    for _ in range(1_000):
        result = await svc.read(topic, position, page, False, 0)
        if result.next is None:
            assert result.messages == []
            return out
        out += [m.value.decode() for m in result.messages]
        position = parse_start(result.next)
    raise AssertionError("reader never reached the end")


async def test_paging_through_batches_by_next(svc: TopicService) -> None:
    await produce(svc, "a", "b", "c")
    await produce(svc, "d")
    await produce(svc, "e", "f")
    for page in (1, 2, 4, 100):
        assert await read_all(svc, "earliest", page) == ["a", "b", "c", "d", "e", "f"]


async def test_start_positions(svc: TopicService) -> None:
    ids = await produce(svc, "a", "b", "c")
    ids += await produce(svc, "d")
    assert await read_all(svc, str(ids[1]), 10) == ["b", "c", "d"]
    assert await read_all(svc, f"after:{ids[1]}", 10) == ["c", "d"]
    assert await read_all(svc, f"after:{ids[2]}", 10) == ["d"]
    assert await read_all(svc, "latest", 10) == []
    page = await svc.read(T, "earliest", 2, False, 0)
    assert page.next == f"after:{ids[1]}"


async def test_next_is_none_only_when_nothing_was_read(svc: TopicService) -> None:
    with pytest.raises(TopicNotFoundError):
        await svc.read("public/default/none", "earliest", 10, False, 0)
    ids = await produce(svc, "a")
    empty = await svc.read(T, "latest", 10, False, 0)
    assert empty.messages == [] and empty.next is None
    page = await svc.read(T, ("after", ids[0]), 10, False, 0)
    assert page.messages == [] and page.next is None


async def test_long_poll_from_latest_sees_a_message_produced_while_waiting(svc: TopicService) -> None:
    await produce(svc, "old")
    waiter = asyncio.create_task(svc.read(T, "latest", 10, False, 10_000))
    await asyncio.sleep(0.01)
    assert not waiter.done()
    await produce(svc, "new")
    page = await asyncio.wait_for(waiter, 5)
    assert [m.value for m in page.messages] == [b"new"]
    with pytest.raises(WaitTooLongError):
        await svc.read(T, "latest", 10, False, 30_001)
    with pytest.raises(TooManyMessagesRequestedError) as err:
        await svc.read(T, "earliest", 10_001, False, 0)
    assert err.value.limit == 10_000


async def test_get_message_and_last_message_id(svc: TopicService) -> None:
    await svc.create_topic(T)
    assert await svc.last_message_id(T, False) is None
    only = await produce(svc, "only")
    assert await svc.last_message_id(T, False) == only[0]
    ids = await produce(svc, "a", "b")
    assert (await svc.get_message(T, ids[1])).value == b"b"
    assert await svc.last_message_id(T, False) == ids[1]
    assert await svc.last_message_id(T, True) == ids[1]  # never compacted: the topic itself
    for missing in (MessageId(ids[1].ledger_id, ids[1].entry_id, 2), MessageId(999, 0, 0)):
        with pytest.raises(MessageNotFoundError):
            await svc.get_message(T, missing)


async def test_read_compacted_without_a_compaction_reads_the_topic(svc: TopicService) -> None:
    await produce(svc, "a", "b")
    page = await svc.read(T, "earliest", 10, True, 0)
    assert [m.value for m in page.messages] == [b"a", b"b"]


async def test_a_reader_starts_at_a_publish_time(svc: TopicService, env: Env) -> None:
    start_ms = env.clock.now_ms()
    await produce(svc, "a", "b")
    env.clock.advance(1_000)
    await produce(svc, "c")
    env.clock.advance(1_000)
    await produce(svc, "d", "e")
    assert await read_all(svc, f"time:{start_ms}", 10) == ["a", "b", "c", "d", "e"]
    assert await read_all(svc, f"time:{start_ms + 1}", 10) == ["c", "d", "e"]
    assert await read_all(svc, f"time:{start_ms + 1_000}", 2) == ["c", "d", "e"]
    assert await read_all(svc, f"time:{start_ms + 2_001}", 10) == []  # after the last: the end
    env.clock.advance(1_000)
    await produce(svc, "f")
    page = await svc.read(T, parse_start(f"time:{start_ms + 2_001}"), 10, False, 0)
    assert [m.value for m in page.messages] == [b"f"]
    for bad in ("time:", "time:-5", "time:soon", "time:1e3"):
        with pytest.raises(InvalidArgumentError):
            parse_start(bad)
