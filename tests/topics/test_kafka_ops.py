"""The topics side of the Kafka listener (topics.kafka_ops) on the in-memory seams: produce and
fetch by offset, idempotent producers, offsets by time, DeleteRecords, the compacted view with
its offsets, and what a restart keeps."""

from __future__ import annotations

import pytest

from common.kafka_records import KafkaRecord, decode_records, encode_batch
from managed_ledger.entry_format import KIND_KAFKA, Message, decode_batch, kafka_batch
from managed_ledger.position import MessageId
from tests.topics.conftest import Env
from tests.topics.test_read_compacted import compact
from topics.errors import KafkaSequenceError, OffsetOutOfRangeError, UnknownPartitionError
from topics.kafka_ops import KafkaBatch, KafkaFetched
from topics.service import TopicService

T = "public/default/k"


def kbatch(n: int, tag: str = "v", *, pid: int = -1, epoch: int = 0, seq: int = -1) -> KafkaBatch:
    records = [
        KafkaRecord(i, 1_000 + i, f"key{i}".encode(), f"{tag}{i}".encode(), [("h", b"x")]) for i in range(n)
    ]
    data = encode_batch(0, records, producer_id=pid, producer_epoch=epoch, base_sequence=seq)
    return KafkaBatch(data, n, pid, epoch, seq)


def values(fetched: KafkaFetched) -> list[tuple[int, bytes | None]]:
    """(offset, value) of every message a fetch found, as a Kafka consumer would see them."""
    out: list[tuple[int, bytes | None]] = [(m.offset or -1, m.value) for m in fetched.compacted]
    for base, payload in fetched.entries:
        if payload[2] == KIND_KAFKA:
            out += [(base + r.offset_delta, r.value) for r in decode_records(bytes(kafka_batch(payload)))]
        else:
            out += [(base + i, m.value) for i, m in enumerate(decode_batch(0, 0, payload))]
    return out


async def test_produce_and_fetch_by_offset_with_rest_messages_between(svc: TopicService) -> None:
    await svc.create_topic(T)
    assert await svc.kafka_produce(T, 0, kbatch(3)) == 0
    await svc.produce(T, "rest", [Message(b"r0"), Message(b"r1")])
    assert await svc.kafka_produce(T, 0, kbatch(2, "w")) == 5
    got = await svc.kafka_fetch(T, 0, 0, 1 << 20)
    assert got.high_watermark == 7 and got.log_start_offset == 0
    assert values(got) == [(0, b"v0"), (1, b"v1"), (2, b"v2"), (3, b"r0"), (4, b"r1"), (5, b"w0"), (6, b"w1")]
    mid = await svc.kafka_fetch(T, 0, 4, 1 << 20)  # inside the REST entry: it comes whole
    assert [o for o, _ in values(mid)][:2] == [3, 4]
    assert (await svc.kafka_fetch(T, 0, 7, 1 << 20)).entries == []  # at the end: empty
    with pytest.raises(OffsetOutOfRangeError):
        await svc.kafka_fetch(T, 0, 8, 1 << 20)
    with pytest.raises(UnknownPartitionError):
        await svc.kafka_fetch(T, 1, 0, 1 << 20)


async def test_fetch_honours_max_bytes_but_returns_one_entry_at_least(svc: TopicService) -> None:
    await svc.create_topic(T)
    for _ in range(5):
        await svc.kafka_produce(T, 0, kbatch(10))
    one = await svc.kafka_fetch(T, 0, 0, 1)
    assert len(one.entries) == 1
    size = len(one.entries[0][1])
    two = await svc.kafka_fetch(T, 0, 10, size + 1)
    assert [base for base, _ in two.entries] == [10, 20]


async def test_idempotent_producer_rules(svc: TopicService) -> None:
    await svc.create_topic(T)
    assert await svc.kafka_produce(T, 0, kbatch(3, pid=7, seq=0)) == 0
    assert await svc.kafka_produce(T, 0, kbatch(2, pid=7, seq=3)) == 3
    # the same batch again: its offset, nothing written
    assert await svc.kafka_produce(T, 0, kbatch(3, pid=7, seq=0)) == 0
    assert (await svc.kafka_fetch(T, 0, 0, 1 << 20)).high_watermark == 5
    with pytest.raises(KafkaSequenceError) as gap:
        await svc.kafka_produce(T, 0, kbatch(1, pid=7, seq=9))
    assert gap.value.reason == "gap"
    with pytest.raises(KafkaSequenceError) as dup:
        await svc.kafka_produce(T, 0, kbatch(1, pid=7, seq=1))
    assert dup.value.reason == "duplicate"
    assert await svc.kafka_produce(T, 0, kbatch(1, pid=7, epoch=1, seq=0)) == 5  # a new epoch
    with pytest.raises(KafkaSequenceError) as old:
        await svc.kafka_produce(T, 0, kbatch(1, pid=7, epoch=0, seq=5))
    assert old.value.reason == "epoch"
    assert (await svc.kafka_fetch(T, 0, 0, 1 << 20)).high_watermark == 6


async def test_a_retry_after_a_restart_is_a_duplicate_with_dedup_on(env: Env) -> None:
    svc = env.service
    await svc.create_topic(T)
    await svc.set_policy(T, "deduplicationEnabled", True)
    await svc.kafka_produce(T, 0, kbatch(3, pid=9, seq=0))
    svc = await env.restart()
    with pytest.raises(KafkaSequenceError) as dup:
        await svc.kafka_produce(T, 0, kbatch(3, pid=9, seq=0))
    assert dup.value.reason == "duplicate"
    assert await svc.kafka_produce(T, 0, kbatch(1, pid=9, seq=3)) == 3
    assert (await svc.kafka_fetch(T, 0, 0, 1 << 20)).high_watermark == 4


async def reason_or_offset(svc: TopicService, batch: KafkaBatch) -> str | int:
    try:
        return await svc.kafka_produce(T, 0, batch)
    except KafkaSequenceError as exc:
        return exc.reason


async def test_after_an_owner_change_a_later_batch_first_is_a_gap_with_dedup_on(env: Env) -> None:
    """B (3..4) and C (5) were in flight when the owner changed; C arriving first must not start
    the producer's state, or B, never stored, is answered "duplicate" (success to a client)."""
    svc = env.service
    await svc.create_topic(T)
    await svc.set_policy(T, "deduplicationEnabled", True)
    assert await svc.kafka_produce(T, 0, kbatch(3, "a", pid=7, seq=0)) == 0
    svc = await env.restart()
    assert await reason_or_offset(svc, kbatch(1, "c", pid=7, seq=5)) == "gap"  # the client resends B
    assert await reason_or_offset(svc, kbatch(2, "b", pid=7, seq=3)) == 3
    assert await reason_or_offset(svc, kbatch(1, "c", pid=7, seq=5)) == 5
    assert await reason_or_offset(svc, kbatch(3, "a", pid=7, seq=0)) == "duplicate"  # it was stored
    stored = [v for _, v in values(await svc.kafka_fetch(T, 0, 0, 1 << 20))]
    assert stored == [b"a0", b"a1", b"a2", b"b0", b"b1", b"c0"]


async def test_after_an_owner_change_a_new_epochs_later_batch_first_is_a_gap_with_dedup_on(env: Env) -> None:
    """Found by the chaos campaign (seed 65342284): a producer bumped its epoch; the new epoch's
    first batch A (0..3) failed while B (4..6) waited behind it, and the topic moved before B
    was handled. Nothing of the new epoch was stored, so B arriving first must be a gap (a new
    epoch starts at sequence 0): stored, it left A out while librdkafka, seeing B succeed,
    counted A acknowledged."""
    svc = env.service
    await svc.create_topic(T)
    await svc.set_policy(T, "deduplicationEnabled", True)
    assert await svc.kafka_produce(T, 0, kbatch(2, "z", pid=7, epoch=0, seq=0)) == 0
    svc = await env.restart()
    assert await reason_or_offset(svc, kbatch(3, "b", pid=7, epoch=1, seq=4)) == "gap"
    assert await reason_or_offset(svc, kbatch(4, "a", pid=7, epoch=1, seq=0)) == 2  # the client resends A
    assert await reason_or_offset(svc, kbatch(3, "b", pid=7, epoch=1, seq=4)) == 6
    stored = [v for _, v in values(await svc.kafka_fetch(T, 0, 0, 1 << 20))]
    assert stored == [b"z0", b"z1", b"a0", b"a1", b"a2", b"a3", b"b0", b"b1", b"b2"]


async def test_with_dedup_a_new_producers_first_batch_past_zero_is_a_gap(svc: TopicService) -> None:
    """The same on one owner: a producer id (or epoch) the partition never stored starts at 0."""
    await svc.create_topic(T)
    await svc.set_policy(T, "deduplicationEnabled", True)
    assert await reason_or_offset(svc, kbatch(1, "b", pid=8, seq=3)) == "gap"
    assert await reason_or_offset(svc, kbatch(3, "a", pid=8, seq=0)) == 0
    assert await reason_or_offset(svc, kbatch(1, "b", pid=8, seq=3)) == 3


async def test_without_dedup_a_batch_before_the_first_seen_is_not_called_a_duplicate(env: Env) -> None:
    """With nothing stored known, the first batch to arrive starts the producer (Kafka's rule for
    an unknown producer); an earlier one is out of order, not a duplicate: the client fails it
    rather than taking a lost batch as stored."""
    svc = env.service
    await svc.create_topic(T)
    assert await svc.kafka_produce(T, 0, kbatch(3, "a", pid=7, seq=0)) == 0
    svc = await env.restart()
    assert await reason_or_offset(svc, kbatch(1, "c", pid=7, seq=5)) == 3
    assert await reason_or_offset(svc, kbatch(2, "b", pid=7, seq=3)) == "unknown"
    assert await reason_or_offset(svc, kbatch(1, "d", pid=7, seq=6)) == 4  # the next one goes on


async def test_list_offsets_by_time_latest_earliest(env: Env) -> None:
    svc = env.service
    await svc.create_topic(T)
    await svc.kafka_produce(T, 0, kbatch(2))
    env.clock.advance(1_000)
    mark = env.clock.now_ms()
    env.clock.advance(500)
    await svc.kafka_produce(T, 0, kbatch(2))
    assert await svc.kafka_list_offset(T, 0, -1) == (4, -1)
    assert await svc.kafka_list_offset(T, 0, -2) == (0, -1)
    # the offset found and that entry's publish time (Kafka's answer), not the time asked for
    assert await svc.kafka_list_offset(T, 0, mark) == (2, mark + 500)
    assert await svc.kafka_list_offset(T, 0, mark + 10_000) == (-1, -1)


async def test_delete_records_moves_the_log_start(svc: TopicService) -> None:
    await svc.create_topic(T)
    for _ in range(3):
        await svc.kafka_produce(T, 0, kbatch(4))
    assert await svc.kafka_delete_records(T, 0, 6) == 6
    got = await svc.kafka_fetch(T, 0, 6, 1 << 20)
    assert got.log_start_offset == 6
    with pytest.raises(OffsetOutOfRangeError):
        await svc.kafka_fetch(T, 0, 2, 1 << 20)
    page = await svc.read(T, "earliest", 100, False, 0)  # REST readers start there too
    assert [m.offset for m in page.messages] == list(range(6, 12))
    assert await svc.kafka_delete_records(T, 0, 3) == 6  # never back
    assert await svc.kafka_delete_records(T, 0, -1) == 12
    assert (await svc.kafka_fetch(T, 0, 12, 1 << 20)).log_start_offset == 12
    with pytest.raises(OffsetOutOfRangeError):
        await svc.kafka_delete_records(T, 0, 13)


async def test_compacted_view_then_tail_keep_offsets(env: Env) -> None:
    svc = env.service
    await svc.create_topic(T)
    await svc.set_policy(T, "compactionThreshold", 1 << 30)  # compaction on
    await svc.produce(T, "p", [Message(b"a1", key="a"), Message(b"b1", key="b")])  # offsets 0, 1
    await svc.produce(T, "p", [Message(b"a2", key="a")])  # offset 2
    await svc.produce(T, "p", [Message(b"c1", key="c")])  # offset 3, after the horizon
    first = (await svc.read(T, "earliest", 10, False, 0)).messages
    horizon = first[2].message_id
    await compact(env, T, horizon, [first[1].message_id, first[2].message_id])
    got = await svc.kafka_fetch(T, 0, 0, 1 << 20)
    assert got.log_start_offset == 0
    assert values(got) == [(1, b"b1"), (2, b"a2"), (3, b"c1")]
    assert values(await svc.kafka_fetch(T, 0, 2, 1 << 20)) == [(2, b"a2"), (3, b"c1")]
    assert values(await svc.kafka_fetch(T, 0, 3, 1 << 20)) == [(3, b"c1")]
    assert MessageId(horizon.ledger_id, horizon.entry_id, 0) == horizon


async def test_delete_records_hides_the_compacted_rows_before_it(env: Env) -> None:
    svc = env.service
    await svc.create_topic(T)
    await svc.set_policy(T, "compactionThreshold", 1 << 30)  # compaction on
    await svc.produce(T, "p", [Message(b"a1", key="a"), Message(b"b1", key="b")])  # offsets 0, 1
    await svc.produce(T, "p", [Message(b"c1", key="c"), Message(b"d1", key="d")])  # offsets 2, 3
    first = (await svc.read(T, "earliest", 10, False, 0)).messages
    await compact(env, T, first[3].message_id, [m.message_id for m in first])
    assert await svc.kafka_delete_records(T, 0, 2) == 2
    got = await svc.kafka_fetch(T, 0, 2, 1 << 20)
    assert got.log_start_offset == 2 and values(got) == [(2, b"c1"), (3, b"d1")]
    with pytest.raises(OffsetOutOfRangeError):  # gone for Kafka readers too, as for REST ones
        await svc.kafka_fetch(T, 0, 0, 1 << 20)
    assert [m.value for m in (await svc.read(T, "earliest", 10, True, 0)).messages] == [b"c1", b"d1"]
