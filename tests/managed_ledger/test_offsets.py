"""Kafka offsets over a managed ledger: continuous across batches, rollovers, failed writes,
restarts, retention and truncation, and found by offset without a scan (managed_ledger.offsets)."""

from __future__ import annotations

import pytest

from bookie.errors import BookieError, ErrorCode
from bookie.memory import InMemoryLedgerClient
from managed_ledger.entry_format import Message, decode_batch, encode_batch, entry_offsets
from managed_ledger.errors import ManagedLedgerWriteError
from managed_ledger.ledger import ManagedLedger
from managed_ledger.position import MessageId, Position
from tests.managed_ledger.ml_support import Env, config


def msgs(n: int, tag: str = "m") -> bytes:
    return encode_batch(1_000, None, [Message(value=f"{tag}{i}".encode()) for i in range(n)])


async def offsets_of(ml: ManagedLedger) -> list[int]:
    """Every stored message's offset, read back through the entries."""
    first = ml.first_position
    if first is None:
        return []
    out: list[int] = []
    for pos, payload in await ml.read_entries(first, 10_000):
        out.extend(
            m.offset for m in decode_batch(pos.ledger_id, pos.entry_id, payload) if m.offset is not None
        )
    return out


async def check_found(ml: ManagedLedger, lo: int, hi: int) -> None:
    """Every offset in [lo, hi) is found in the entry that holds it."""
    for offset in range(lo, hi):
        position = await ml.find_offset(offset)
        assert position is not None, offset
        base, count = entry_offsets(await ml.read_entry(position)) or (-1, 0)
        assert base <= offset < base + count


async def test_offsets_are_continuous_over_batches_and_rollovers() -> None:
    env = Env()
    ml = await env.factory().open("t", config(max_entries=3))
    sizes = [1, 5, 2, 7, 1, 1, 3, 10, 4]
    positions = [await ml.append(msgs(n)) for n in sizes]
    assert len({p.ledger_id for p in positions}) == 3
    assert await offsets_of(ml) == list(range(sum(sizes)))
    assert ml.high_watermark == sum(sizes)
    assert await ml.log_start_offset() == 0
    await check_found(ml, 0, sum(sizes))
    assert await ml.find_offset(sum(sizes)) is None


async def test_restart_continues_offsets_and_finds_old_ones_by_binary_search() -> None:
    env = Env()
    ml = await env.factory().open("t", config(max_entries=4))
    for n in range(1, 12):
        await ml.append(msgs(n))
    total = sum(range(1, 12))
    await ml.close()
    ml2 = await env.factory().open("t", config(max_entries=4))  # a new owner: nothing cached
    assert ml2.high_watermark == total
    await check_found(ml2, 0, total)
    await ml2.append(msgs(3))
    assert await offsets_of(ml2) == list(range(total + 3))


async def test_a_crash_keeps_offsets_of_what_was_durable() -> None:
    env = Env()
    ml = await env.factory().open("t", config())
    await ml.append(msgs(4))
    await ml.append(msgs(2))
    # abandoned without close: the successor recovers the open ledger
    ml2 = await env.factory().open("t", config())
    assert ml2.high_watermark == 6
    await ml2.append(msgs(1))
    assert await offsets_of(ml2) == list(range(7))


async def test_a_failed_write_leaves_no_gap() -> None:
    env = Env()
    client = env.client
    assert isinstance(client, InMemoryLedgerClient)
    ml = await env.factory().open("t", config())
    await ml.append(msgs(3))
    client.fail_adds = BookieError(ErrorCode.UNAVAILABLE, "bookie gone")
    with pytest.raises(ManagedLedgerWriteError):
        await ml.append(msgs(5, "lost"))
    client.fail_adds = None
    await ml.append(msgs(2, "again"))
    assert await offsets_of(ml) == list(range(5))
    assert ml.high_watermark == 5


@pytest.mark.parametrize("how", ["retention", "truncate"])
async def test_offsets_survive_deleting_every_ledger(how: str) -> None:
    env = Env()
    cfg = config(max_entries=2, retention_minutes=0, retention_mb=0)
    ml = await env.factory().open("t", cfg)
    for _ in range(5):
        await ml.append(msgs(3))
    if how == "retention":
        await ml.trim()  # no cursor: every closed ledger goes, the current one stays
        assert await ml.log_start_offset() == 12
        await check_found(ml, 12, 15)
        assert await ml.find_offset(11) is None
    else:
        await ml.truncate()
        assert await ml.log_start_offset() == 15 == ml.high_watermark
    await ml.close()
    ml2 = await env.factory().open("t", cfg)
    if how == "truncate":
        assert ml2.first_position is None
    assert ml2.high_watermark == 15
    await ml2.append(msgs(2))
    offsets = await offsets_of(ml2)
    assert offsets[-2:] == [15, 16]


async def test_truncate_before_moves_the_log_start_offset_inside_an_entry() -> None:
    env = Env()
    ml = await env.factory().open("t", config())
    first = await ml.append(msgs(4))
    await ml.append(msgs(4))
    assert await ml.truncate_before(MessageId(first.ledger_id, first.entry_id, 2))
    assert await ml.log_start_offset() == 2
    await ml.truncate_before(MessageId(first.ledger_id, first.entry_id + 1, 0))
    assert await ml.log_start_offset() == 4
    assert await ml.find_offset(3) is None
    assert await ml.find_offset(4) == Position(first.ledger_id, first.entry_id + 1)


async def test_payloads_that_are_not_quire_entries_count_one_offset_each() -> None:
    env = Env()
    ml = await env.factory().open("t", config(max_entries=2))
    for i in range(3):
        await ml.append(b"opaque%d" % i)
    await ml.append(msgs(2))
    assert ml.high_watermark == 5
    await ml.close()
    assert (await env.factory().open("t", config(max_entries=2))).high_watermark == 5
