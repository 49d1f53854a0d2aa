"""The managed ledger's clock seam: every time-based rule (rollover age, retention time, flush
and snapshot intervals) reads time through it, so tests drive time by hand instead of sleeping."""

from __future__ import annotations

from typing import Protocol

from common.clock import wall_clock_ms


class Clock(Protocol):
    def now_ms(self) -> int:
        """Wall-clock milliseconds since the epoch (ledger timestamps are stored in these)."""
        ...


class SystemClock:
    def now_ms(self) -> int:
        return wall_clock_ms()


class ManualClock:
    """A clock that moves only when a test says so."""

    def __init__(self, start_ms: int = 1_700_000_000_000) -> None:
        self._now_ms = start_ms

    def now_ms(self) -> int:
        return self._now_ms

    def advance(self, ms: int) -> None:
        assert ms >= 0, "time does not go back"
        self._now_ms += ms
