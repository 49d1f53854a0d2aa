"""The group coordinator's timer seam: session, rebalance and initial-delay timers are scheduled
through a `Scheduler`, so that tests move time by hand (tests/kafka_listener) instead of
sleeping. Callbacks are plain functions run on the event loop; they never block."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Protocol


class Timer(Protocol):
    def cancel(self) -> None: ...


class Scheduler(Protocol):
    def call_later(self, delay_ms: int, callback: Callable[[], None]) -> Timer:
        """Run `callback` once, `delay_ms` from now, unless the timer is cancelled first."""
        ...


class LoopScheduler:
    """The running event loop's own timers."""

    def call_later(self, delay_ms: int, callback: Callable[[], None]) -> Timer:
        return asyncio.get_running_loop().call_later(max(delay_ms, 0) / 1000, callback)
