"""A histogram as plain numbers: a count per bucket and the sum of what was observed.

The domain packages keep their figures in plain Python (no prometheus_client, no locks) and
`app/` turns them into Prometheus families at scrape time (`app/process_metrics.py`). An
observation costs a bisect and two additions, so it may sit on a per-group path; nothing here
is meant to be called per entry on a hot path when a plain counter would do.

Each instance belongs to one thread (an event loop): `snapshot` is meant to be taken on that
thread too, so the counts and the sum it returns agree.
"""

from __future__ import annotations

import math
from bisect import bisect_left
from collections.abc import Sequence
from dataclasses import dataclass
from itertools import pairwise


@dataclass(frozen=True, slots=True)
class HistogramSnapshot:
    """Cumulative counts per upper bound (Prometheus's `le`), the last one +Inf, and the sum."""

    buckets: tuple[tuple[float, int], ...]
    sum: float

    @property
    def count(self) -> int:
        return self.buckets[-1][1]


class Histogram:
    """Observations counted under the first bound they do not exceed (`value <= bound`), and past
    the last bound in an overflow bucket (+Inf)."""

    __slots__ = ("bounds", "counts", "sum")

    def __init__(self, bounds: Sequence[float]) -> None:
        bounds = tuple(float(b) for b in bounds)
        if not bounds or any(not math.isfinite(b) for b in bounds):
            raise ValueError("a histogram needs finite bucket bounds")
        if any(a >= b for a, b in pairwise(bounds)):
            raise ValueError(f"bucket bounds must increase: {bounds}")
        self.bounds = bounds
        self.counts = [0] * (len(bounds) + 1)
        self.sum = 0.0

    def observe(self, value: float) -> None:
        self.counts[bisect_left(self.bounds, value)] += 1
        self.sum += value

    def snapshot(self) -> HistogramSnapshot:
        cumulative = []
        running = 0
        for bound, count in zip((*self.bounds, math.inf), self.counts, strict=True):
            running += count
            cumulative.append((bound, running))
        return HistogramSnapshot(tuple(cumulative), self.sum)
