"""Produce: one entry per batch, ids in request order, limits, auto-creation, dedup."""

from __future__ import annotations

import asyncio

import orjson
import pytest

from app.errors import domain_problem
from bookie.errors import BookieError, ErrorCode
from managed_ledger.entry_format import Message
from managed_ledger.metadata.memory import InMemoryMetadataStore
from managed_ledger.position import MessageId
from tests.topics.conftest import Env, make_env
from topics.api import ProduceResult
from topics.config import TopicsConfig
from topics.errors import (
    BatchTooLargeError,
    InvalidNameError,
    MessageTooLargeError,
    NamespaceNotFoundError,
    StorageUnavailableError,
    TopicNotFoundError,
    WriteInFlightError,
)
from topics.service import TopicService

T = "public/default/prices"


def msgs(*values: str, key: str | None = None) -> list[Message]:
    return [Message(v.encode(), key) for v in values]


async def test_batch_is_one_entry_with_ids_in_order(svc: TopicService, env: Env) -> None:
    results = await svc.produce(T, "p1", msgs("a", "b", "c"))
    ids = [r.message_id for r in results]
    assert all(i is not None for i in ids)
    assert [i.batch_index for i in ids if i is not None] == [0, 1, 2]
    assert len({(i.ledger_id, i.entry_id) for i in ids if i is not None}) == 1
    second = await svc.produce(T, "p1", msgs("d"))
    first_id, next_id = ids[0], second[0].message_id
    assert first_id is not None and next_id is not None
    assert next_id.position > first_id.position
    stored = [await svc.get_message(T, i) for i in ids if i is not None]
    assert [m.value for m in stored] == [b"a", b"b", b"c"]
    assert stored[0].producer_name == "p1" and stored[0].publish_time == env.clock.now_ms()


async def test_round_trip_of_every_field(svc: TopicService) -> None:
    m = Message(b"\x00\xffbin", "k\u00e9y", {"src": "feed"}, 1763700000000, 17)
    (r,) = await svc.produce(T, "p", [m])
    assert r.message_id is not None
    got = await svc.get_message(T, r.message_id)
    assert (got.value, got.key, dict(got.properties or {}), got.event_time, got.sequence_id) == (
        b"\x00\xffbin",
        "k\u00e9y",
        {"src": "feed"},
        1763700000000,
        17,
    )


async def test_limits_name_the_limit_and_write_nothing(env: Env) -> None:
    config = TopicsConfig(max_message_size_bytes=10, max_batch_size_bytes=25, max_batch_messages=3)
    svc = await env.restart(config)
    with pytest.raises(MessageTooLargeError) as too_big:
        await svc.produce(T, None, msgs("ok", "x" * 11))
    assert too_big.value.limit == 10 and too_big.value.index == 1
    with pytest.raises(BatchTooLargeError) as too_many:
        await svc.produce(T, None, msgs("a", "b", "c", "d"))
    assert too_many.value.limit == 3
    with pytest.raises(BatchTooLargeError) as too_long:
        await svc.produce(T, None, msgs("x" * 10, "y" * 10, "z" * 10))
    assert too_long.value.limit == 25
    # Size is bytes: the key in UTF-8 (5 characters, 10 bytes) and the properties count too.
    with pytest.raises(MessageTooLargeError) as keyed:
        await svc.produce(T, None, [Message(b"x", "\u00e9" * 5)])
    assert keyed.value.size == 11
    with pytest.raises(MessageTooLargeError) as props:
        await svc.produce(T, None, [Message(b"", None, {"name": "v" * 7})])
    assert props.value.size == 11
    # Refused before anything happened: not even the topic was auto-created.
    assert await svc.list_topics("public/default") == []


async def test_auto_creation_off_and_missing_namespace() -> None:
    env = await make_env(InMemoryMetadataStore(), TopicsConfig(allow_auto_topic_creation=False))
    try:
        with pytest.raises(TopicNotFoundError):
            await env.service.produce(T, None, msgs("a"))
        await env.service.create_topic(T)
        assert (await env.service.produce(T, None, msgs("a")))[0].message_id is not None
        with pytest.raises(NamespaceNotFoundError):
            await env.service.create_topic("nope/none/t")
    finally:
        await env.service.close()
        await env.factory.close()


async def test_missing_namespace_on_auto_create(svc: TopicService) -> None:
    with pytest.raises(NamespaceNotFoundError):
        await svc.produce("public/missing/t", None, msgs("a"))
    with pytest.raises(InvalidNameError):
        await svc.produce("public/default/bad name", None, msgs("a"))


async def test_dedup_reports_duplicates_per_message(svc: TopicService) -> None:
    await svc.create_topic(T)
    await svc.set_policy(T, "deduplicationEnabled", True)
    batch = [Message(b"a", sequence_id=1), Message(b"b", sequence_id=2)]
    first = await svc.produce(T, "prod", batch)
    assert [r.duplicate for r in first] == [False, False]
    retry = [Message(b"b", sequence_id=2), Message(b"c", sequence_id=3)]
    second = await svc.produce(T, "prod", retry)
    assert second[0] == ProduceResult(None, True)
    assert second[1].message_id is not None and second[1].message_id.batch_index == 0
    assert (await svc.get_message(T, second[1].message_id)).value == b"c"
    all_dups = await svc.produce(T, "prod", [Message(b"a", sequence_id=1)])
    assert all_dups == [ProduceResult(None, True)]
    other_producer = await svc.produce(T, "other", [Message(b"a", sequence_id=1)])
    assert not other_producer[0].duplicate


async def test_dedup_refuses_a_retry_of_an_unresolved_write_whole(svc: TopicService, env: Env) -> None:
    await svc.create_topic(T)
    await svc.set_policy(T, "deduplicationEnabled", True)
    await svc.produce(T, "prod", [Message(b"a", sequence_id=1)])
    env.client.fail_adds = BookieError(ErrorCode.UNAVAILABLE, "bookie down")
    with pytest.raises(StorageUnavailableError):
        await svc.produce(T, "prod", [Message(b"b", sequence_id=2)])
    env.client.fail_adds = None
    # No loop pass since the failure: the failed ledger is not recovered, 2's fate is unknown.
    retry = [Message(b"a", sequence_id=1), Message(b"b", sequence_id=2)]
    with pytest.raises(WriteInFlightError) as refused:
        await svc.produce(T, "prod", retry)
    response = domain_problem(refused.value)
    assert response is not None and response.status_code == 503
    assert response.media_type == "application/problem+json"
    body = orjson.loads(bytes(response.body))
    assert body["type"].endswith("/write-in-flight") and "sequence id 2" in body["detail"]
    for _ in range(500):  # the refusal started the recovery (store calls run in threads)
        try:
            results = await svc.produce(T, "prod", retry)
            break
        except WriteInFlightError:
            await asyncio.sleep(0.01)
    else:
        pytest.fail("the retry was never resolved")
    assert [r.duplicate for r in results] == [True, False]  # 2 was lost: written now, once
    page = await svc.read(T, "earliest", 100, False, 0)
    assert [m.value for m in page.messages] == [b"a", b"b"]


async def test_dedup_off_stores_repeats(svc: TopicService) -> None:
    r1 = await svc.produce(T, "prod", [Message(b"a", sequence_id=1)])
    r2 = await svc.produce(T, "prod", [Message(b"a", sequence_id=1)])
    assert not r1[0].duplicate and not r2[0].duplicate


async def test_concurrent_produces_pipeline_and_get_distinct_ordered_ids(svc: TopicService) -> None:
    await svc.produce(T, None, msgs("warm-up"))
    results = await asyncio.gather(*(svc.produce(T, None, msgs(f"m{i}")) for i in range(50)))
    ids = [r[0].message_id for r in results]
    assert all(i is not None for i in ids)
    assert len(set(ids)) == 50
    assert ids == sorted(ids, key=lambda i: (i.ledger_id, i.entry_id))  # type: ignore[union-attr]
    page = await svc.read(T, ("after", MessageId(*ids[0].position, 0)), 100, False, 0)  # type: ignore[union-attr]
    assert [m.value for m in page.messages] == [f"m{i}".encode() for i in range(1, 50)]
