"""Test helpers for the group coordinator: a scheduler whose time moves only when a test says,
requests with defaults, and a coordinator over the real topics service."""

from __future__ import annotations

import asyncio
import heapq
import itertools
from collections.abc import Callable
from dataclasses import dataclass, field

from app.kafka_listener.cluster import KafkaNode
from app.kafka_listener.groups import JoinRequest

ME = KafkaNode(1, "127.0.0.1", 9092)
SETTLE_ROUNDS = 20


@dataclass(order=True)
class ManualTimer:
    due_ms: int
    seq: int
    callback: Callable[[], None] = field(compare=False)
    cancelled: bool = field(default=False, compare=False)
    fired: bool = field(default=False, compare=False)

    def cancel(self) -> None:
        self.cancelled = True


class ManualScheduler:
    """Timers that fire only in `advance`, in due order, each at its own time."""

    def __init__(self) -> None:
        self.now_ms = 0
        self._heap: list[ManualTimer] = []
        self._seq = itertools.count()

    def call_later(self, delay_ms: int, callback: Callable[[], None]) -> ManualTimer:
        timer = ManualTimer(self.now_ms + max(delay_ms, 0), next(self._seq), callback)
        heapq.heappush(self._heap, timer)
        return timer

    def advance(self, ms: int) -> None:
        end = self.now_ms + ms
        while self._heap and self._heap[0].due_ms <= end:
            timer = heapq.heappop(self._heap)
            if timer.cancelled:
                continue
            self.now_ms = timer.due_ms
            timer.fired = True
            timer.callback()
        self.now_ms = end

    def live(self) -> int:
        """Timers neither fired nor cancelled."""
        return sum(1 for t in self._heap if not t.cancelled)


async def settle() -> None:
    """Let every task that can run, run (tasks waiting in the coordinator reach their await)."""
    for _ in range(SETTLE_ROUNDS):
        await asyncio.sleep(0)


def join_request(
    member_id: str = "",
    *,
    group: str = "g",
    protocols: tuple[tuple[str, bytes], ...] = (("range", b"meta"),),
    session_ms: int = 1_000,
    rebalance_ms: int = 5_000,
    protocol_type: str = "consumer",
    client_id: str = "c",
    v4: bool = True,
) -> JoinRequest:
    return JoinRequest(
        group_id=group,
        member_id=member_id,
        session_timeout_ms=session_ms,
        rebalance_timeout_ms=rebalance_ms,
        protocol_type=protocol_type,
        protocols=protocols,
        client_id=client_id,
        require_known_member_id=v4,
    )
