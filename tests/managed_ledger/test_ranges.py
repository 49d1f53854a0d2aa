"""Position arithmetic and acked ranges against a plain set model (Hypothesis)."""

from __future__ import annotations

import asyncio
import itertools

from hypothesis import given, settings
from hypothesis import strategies as st

from bookie.types import LedgerSpec
from managed_ledger.position import Position
from managed_ledger.ranges import LedgerInfo, LedgerList
from tests.examples import examples
from tests.managed_ledger.ml_support import Env, config


def _list(sizes: list[int]) -> tuple[LedgerList, list[Position]]:
    ledgers = LedgerList()
    positions = []
    for i, n in enumerate(sizes):
        ledger_id = 3 * i + 2  # ids with gaps, as after trimming
        ledgers.add(LedgerInfo(ledger_id, n, n, 1, LedgerSpec(ledger_id, ("b:1",))))
        positions += [Position(ledger_id, e) for e in range(n)]
    return ledgers, positions


@given(st.lists(st.integers(0, 4), min_size=1, max_size=6))
def test_next_position_and_counts_follow_the_flat_order(sizes: list[int]) -> None:
    ledgers, positions = _list(sizes)
    before_all = Position(-1, -1)
    for i, p in enumerate(positions):
        expected_next = positions[i + 1] if i + 1 < len(positions) else None
        if expected_next is not None:
            assert ledgers.next_position(p) == expected_next
        assert ledgers.count_up_to(p) == i + 1
        assert ledgers.position_at(i) == p
        assert ledgers.count_between(before_all, p) == i + 1
    if positions:
        assert ledgers.next_position(before_all) == positions[0]
        assert ledgers.next_position(positions[-1]) > positions[-1]
    assert ledgers.total_entries() == len(positions)


@settings(max_examples=examples(60), deadline=None)
@given(
    st.lists(st.integers(0, 5), min_size=1, max_size=5),
    st.lists(st.tuples(st.booleans(), st.integers(0, 10**6)), max_size=40),
)
def test_cursor_acks_match_a_set_model(sizes: list[int], ops: list[tuple[bool, int]]) -> None:
    asyncio.run(_acks(sizes, ops))


async def _acks(sizes: list[int], ops: list[tuple[bool, int]]) -> None:
    env = Env()
    ml = await env.factory().open("t", config())
    positions = []
    for n in sizes:
        positions += [await ml.append(b"x") for _ in range(n)]
        await ml.rollover()
    cursor = await ml.open_cursor("c", "earliest")
    if not positions:
        return
    acked: set[Position] = set()
    for cumulative, k in ops:
        p = positions[k % len(positions)]
        if cumulative:
            cursor.ack_cumulative(p)
            acked.update(q for q in positions if q <= p)
        else:
            cursor.ack([p])
            acked.add(p)
        prefix = 0
        while prefix < len(positions) and positions[prefix] in acked:
            prefix += 1
        if prefix:
            assert cursor.mark_delete_position == positions[prefix - 1]
        assert cursor.backlog == len(positions) - len(acked)
        assert [q for q in positions if cursor.is_acked(q)] == [q for q in positions if q in acked]
        ranges = cursor.individually_deleted_ranges()
        for (_, last), (first, _) in itertools.pairwise(ranges):
            assert ml.next_position(last) < first  # disjoint and never adjacent (merged)


@given(
    st.lists(st.tuples(st.integers(0, 4), st.integers(0, 50)), min_size=1, max_size=5),
    st.integers(0, 120),
)
def test_size_after_and_the_position_keeping_a_size(ledgers_: list[tuple[int, int]], limit: int) -> None:
    """`position_keeping(m)` is the first stored position with at most m bytes after it (by
    `size_after`, which never grows along the flat order), None when everything fits."""
    ledgers = LedgerList()
    positions = [Position(-1, -1)]
    for i, (n, size) in enumerate(ledgers_):
        ledger_id = 3 * i + 2
        ledgers.add(LedgerInfo(ledger_id, n, size if n else 0, 1, LedgerSpec(ledger_id, ("b:1",))))
        positions += [Position(ledger_id, e) for e in range(n)]
    sizes = [ledgers.size_after(p) for p in positions]
    assert sizes[0] == ledgers.total_size_bytes()
    assert sizes == sorted(sizes, reverse=True)
    found = ledgers.position_keeping(limit)
    if sizes[0] <= limit:
        assert found is None
    else:
        assert found == next(p for p, s in zip(positions, sizes, strict=True) if s <= limit)
