"""One partition's read through the compacted view (topics.compacted_reads), over a fake view,
managed ledger and cursor: the branch at the horizon, and the ack up to the horizon once all the
view delivered is acked. The service-level rules are in test_read_compacted.py."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, cast

from managed_ledger.entry_format import StoredMessage
from managed_ledger.position import MessageId, Position
from topics.compacted_reads import CompactedPartition


def msg(entry: int, index: int = 0) -> StoredMessage:
    return StoredMessage(MessageId(1, entry, index), b"v", f"k{entry}", None, None, None, 0)


class View:
    def __init__(self, horizon: MessageId | None, messages: list[StoredMessage]) -> None:
        self._horizon = horizon
        self.messages = messages
        self.starts: list[MessageId] = []

    async def horizon(self, ml_name: str) -> MessageId | None:
        return self._horizon

    async def read(
        self, ml_name: str, start: MessageId, max_messages: int, until: MessageId | None = None
    ) -> list[StoredMessage]:
        self.starts.append(start)
        return [m for m in self.messages if m.message_id >= start][:max_messages]


class Ledger:
    name = "ml"

    def next_position(self, position: Position) -> Position:
        return Position(position.ledger_id, position.entry_id + 1)


class CursorFake:
    def __init__(self) -> None:
        self.read_position = Position(1, 0)
        self.rewound: list[Position] = []
        self.acked_through: list[Position] = []

    def rewind(self, position: Position) -> None:
        self.rewound.append(position)
        self.read_position = position

    def ack_cumulative(self, position: Position) -> None:
        self.acked_through.append(position)


def keeping(taken: list[MessageId]) -> Callable[[StoredMessage], bool]:
    def take(m: StoredMessage) -> bool:
        taken.append(m.message_id)
        return True

    return take


def partition(view: View, cursor: CursorFake) -> CompactedPartition:
    return CompactedPartition(cast(Any, view), cast(Any, Ledger()), cast(Any, cursor))


async def test_reads_the_view_in_pages_then_continues_after_the_horizon() -> None:
    view, cursor = View(MessageId(1, 9, 0), [msg(2), msg(5), msg(9)]), CursorFake()
    part, taken = partition(view, cursor), list[MessageId]()
    assert await part.read(2, keeping(taken)) is True
    assert taken == [MessageId(1, 2, 0), MessageId(1, 5, 0)] and cursor.rewound == []
    assert await part.read(2, keeping(taken)) is True
    assert view.starts == [MessageId(1, 0, 0), MessageId(1, 5, 1)]  # the second page after the first
    assert cursor.rewound == [Position(1, 10)] and part.end == Position(1, 9)
    assert await part.read(2, lambda m: True) is None  # past the horizon: the topic's turn
    assert cursor.acked_through == []  # three delivered, none acked


async def test_acks_up_to_the_horizon_once_all_it_delivered_is_acked() -> None:
    view, cursor = View(MessageId(1, 9, 0), [msg(2), msg(5)]), CursorFake()
    part = partition(view, cursor)
    await part.read(10, lambda m: True)
    part.acked([MessageId(1, 2, 0), MessageId(7, 7, 7)])
    assert cursor.acked_through == []
    part.acked_through(MessageId(1, 5, 0))
    assert cursor.acked_through == [Position(1, 9)] and part.end is None
    part.acked([MessageId(1, 5, 0)])
    assert cursor.acked_through == [Position(1, 9)]  # once


async def test_what_take_refuses_is_not_awaited_and_clear_forgets_the_read() -> None:
    view, cursor = View(MessageId(1, 9, 0), [msg(2)]), CursorFake()
    part = partition(view, cursor)
    await part.read(10, lambda m: False)  # acked in its batch before a restart
    assert cursor.acked_through == [Position(1, 9)]
    view2, cursor2 = View(MessageId(1, 9, 0), [msg(2), msg(5)]), CursorFake()
    part = partition(view2, cursor2)
    await part.read(1, lambda m: True)
    part.clear()
    assert (part.next, part.unacked, part.end) == (None, set(), None)
    await part.read(1, lambda m: True)
    assert view2.starts == [MessageId(1, 0, 0), MessageId(1, 0, 0)]


async def test_no_horizon_means_no_view() -> None:
    part = partition(View(None, [msg(2)]), CursorFake())
    assert await part.read(10, lambda m: True) is None
