"""Idempotent Kafka producers when a write fails or is cut short: nothing acknowledged as a
duplicate is missing. A failed batch's retry is taken and the batch after it waits for it (a
gap) instead of being written first; with dedup on, a retry refused while the failed write is
unresolved does not move the producer's sequence; a retry of a batch whose write is still going
is told to try again, not that it is a duplicate; a produce cancelled mid-write (its connection
closed) still finishes the write's bookkeeping, so its entry is visible and its retry answered
with its offset; sequences wrap to 0 after 2**31 - 1 and go on; a DeleteRecords at the high
watermark keeps a batch produced while it runs. Over the topics service with the in-memory
store and ledger client."""

from __future__ import annotations

import asyncio
import time

import pytest

from bookie.errors import BookieError, ErrorCode
from tests.topics.conftest import Env
from tests.topics.test_kafka_ops import T, kbatch, values
from topics.errors import KafkaSequenceError, StorageUnavailableError, WriteInFlightError
from topics.kafka_ops import KafkaBatch
from topics.service import TopicService


async def produce_until_taken(svc: TopicService, batch: KafkaBatch) -> int:
    """Retry while the outcome of an earlier write is unresolved (bounded), as clients do."""
    for _ in range(500):
        try:
            return await svc.kafka_produce(T, 0, batch)
        except WriteInFlightError:
            await asyncio.sleep(0.01)
    pytest.fail("the retry was never resolved")


async def fail_one(svc: TopicService, env: Env, batch: KafkaBatch) -> None:
    env.client.fail_adds = BookieError(ErrorCode.UNAVAILABLE, "bookie down")
    with pytest.raises(StorageUnavailableError):
        await svc.kafka_produce(T, 0, batch)
    env.client.fail_adds = None


@pytest.mark.parametrize("dedup", [False, True])
async def test_after_a_failed_batch_the_next_one_waits_for_its_retry(
    svc: TopicService, env: Env, dedup: bool
) -> None:
    await svc.create_topic(T)
    await svc.set_policy(T, "deduplicationEnabled", dedup)
    first, second = kbatch(3, "a", pid=7, seq=0), kbatch(1, "b", pid=7, seq=3)
    await fail_one(svc, env, first)
    with pytest.raises(KafkaSequenceError) as gap:  # read after the failure: not before its retry
        await svc.kafka_produce(T, 0, second)
    assert gap.value.reason == "gap"
    assert await produce_until_taken(svc, first) == 0
    assert await svc.kafka_produce(T, 0, second) == 3
    fetched = await svc.kafka_fetch(T, 0, 0, 1 << 20)
    assert values(fetched) == [(0, b"a0"), (1, b"a1"), (2, b"a2"), (3, b"b0")]


async def until_on_the_bookie(env: Env, writing: asyncio.Task[int]) -> None:
    """Until the entry is on the (in-memory) bookie and its write has not yet returned. Bounded
    by time, not by turns of the loop: on a loaded machine the write's store calls (in threads)
    take longer than a thousand turns, and acting before the entry is written tests nothing."""
    deadline = time.monotonic() + 10
    while not any(ledger.entries for ledger in env.client.ledgers.values()):
        assert time.monotonic() < deadline, "the entry never reached the bookie"
        await asyncio.sleep(0)
    assert not writing.done(), "the write returned before the test could act within it"


async def test_a_retry_while_the_first_try_is_writing_is_not_a_duplicate(svc: TopicService, env: Env) -> None:
    await svc.create_topic(T)
    batch = kbatch(2, pid=8, seq=0)
    writing = asyncio.create_task(svc.kafka_produce(T, 0, batch))
    await until_on_the_bookie(env, writing)
    with pytest.raises(WriteInFlightError):  # retriable: not "duplicate", which means stored
        await svc.kafka_produce(T, 0, batch)
    assert await writing == 0
    assert await svc.kafka_produce(T, 0, batch) == 0  # now known: its offset, nothing written
    assert (await svc.kafka_fetch(T, 0, 0, 1 << 20)).high_watermark == 2


async def test_a_produce_cancelled_mid_write_still_finishes_it(svc: TopicService, env: Env) -> None:
    await svc.create_topic(T)
    batch = kbatch(3, pid=9, seq=0)
    writing = asyncio.create_task(svc.kafka_produce(T, 0, batch))
    await until_on_the_bookie(env, writing)
    writing.cancel()  # the connection closed while the entry was being written
    with pytest.raises(asyncio.CancelledError):
        await writing
    for _ in range(200):
        if (await svc.kafka_fetch(T, 0, 0, 1 << 20)).high_watermark == 3:
            break
        await asyncio.sleep(0.01)
    assert (await svc.kafka_fetch(T, 0, 0, 1 << 20)).high_watermark == 3  # visible
    assert await produce_until_taken(svc, batch) == 0  # the retry: its offset, not "duplicate"
    assert (await svc.kafka_fetch(T, 0, 0, 1 << 20)).high_watermark == 3  # and not written twice


WRAP = 2**31  # Kafka's sequence numbers wrap to 0 after 2**31 - 1


@pytest.mark.parametrize("dedup", [False, True])
async def test_a_producers_sequence_wraps_to_zero_and_goes_on(svc: TopicService, dedup: bool) -> None:
    await svc.create_topic(T)
    # A producer reaches the wrap after 2**31 sequences: it starts there with dedup off (where a
    # producer's first batch may start anywhere; with dedup on an epoch starts at 0).
    assert await svc.kafka_produce(T, 0, kbatch(3, "a", pid=5, seq=WRAP - 3)) == 0
    await svc.set_policy(T, "deduplicationEnabled", dedup)
    assert await svc.kafka_produce(T, 0, kbatch(2, "b", pid=5, seq=0)) == 3  # after the wrap
    assert await svc.kafka_produce(T, 0, kbatch(2, "b", pid=5, seq=0)) == 3  # its retry: its offset
    with pytest.raises(KafkaSequenceError) as old:
        await svc.kafka_produce(T, 0, kbatch(1, "a", pid=5, seq=WRAP - 4))  # before the first
    assert old.value.reason == "unknown"  # never stored: not a duplicate
    with pytest.raises(KafkaSequenceError) as dup:
        await svc.kafka_produce(T, 0, kbatch(1, "a", pid=5, seq=WRAP - 2))  # inside a stored batch
    assert dup.value.reason == "duplicate"
    with pytest.raises(KafkaSequenceError) as gap:
        await svc.kafka_produce(T, 0, kbatch(1, "c", pid=5, seq=3))
    assert gap.value.reason == "gap"
    assert await svc.kafka_produce(T, 0, kbatch(2, "c", pid=5, seq=2)) == 5


async def test_a_wrapped_producer_goes_on_after_a_restart_with_dedup_on(env: Env) -> None:
    svc = env.service
    await svc.create_topic(T)
    await svc.kafka_produce(T, 0, kbatch(3, "a", pid=6, seq=WRAP - 3))  # started there with dedup off
    await svc.set_policy(T, "deduplicationEnabled", True)
    await svc.kafka_produce(T, 0, kbatch(2, "b", pid=6, seq=0))
    svc = await env.restart()
    with pytest.raises(KafkaSequenceError) as dup:  # stored before the restart
        await svc.kafka_produce(T, 0, kbatch(2, "b", pid=6, seq=0))
    assert dup.value.reason == "duplicate"
    assert await svc.kafka_produce(T, 0, kbatch(1, "c", pid=6, seq=2)) == 5
    fetched = await svc.kafka_fetch(T, 0, 0, 1 << 20)
    assert [v for _, v in values(fetched)] == [b"a0", b"a1", b"a2", b"b0", b"b1", b"c0"]


async def test_delete_records_at_the_high_watermark_keeps_what_is_produced_meanwhile(
    svc: TopicService,
) -> None:
    await svc.create_topic(T)
    for _ in range(3):
        await svc.kafka_produce(T, 0, kbatch(4, "old"))
    _, ml = await svc._kafka_ml(T, 0)
    log_start = ml.log_start_offset

    async def produced_meanwhile() -> int:  # a produce lands while DeleteRecords looks around
        await svc.kafka_produce(T, 0, kbatch(2, "new"))
        return await log_start()

    ml.log_start_offset = produced_meanwhile  # type: ignore[method-assign]
    try:
        assert await svc.kafka_delete_records(T, 0, -1) == 12
    finally:
        ml.log_start_offset = log_start  # type: ignore[method-assign]
    fetched = await svc.kafka_fetch(T, 0, 12, 1 << 20)
    assert fetched.log_start_offset == 12 and values(fetched) == [(12, b"new0"), (13, b"new1")]
