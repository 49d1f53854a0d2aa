"""What the compactor counts for its metrics: runs by result, their durations, their messages.

Plain numbers on the compactor's event loop; `app/process_metrics.py` serves them as Prometheus
families. A run is counted once this compactor has taken it (a request another compactor was
already running is a conflict, not a run); its messages only when it succeeded, since a failed
run's counts are never known whole.
"""

from __future__ import annotations

from common.histogram import Histogram

# A run costs from a fraction of a second (nothing new, or one small Spark task) to an hour.
DURATION_SECONDS_BOUNDS = (0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600, 1800, 3600)


class CompactionStats:
    def __init__(self) -> None:
        self.succeeded = 0
        self.failed = 0  # ERROR recorded, or cancelled by the compactor stopping
        self.running = 0
        self.messages_read = 0  # the previous compacted view's messages and the new ones
        self.messages_kept = 0  # written to the new compacted ledgers
        self.duration_seconds = Histogram(DURATION_SECONDS_BOUNDS)

    def run_ended(self, succeeded: bool, duration_s: float) -> None:
        if succeeded:
            self.succeeded += 1
        else:
            self.failed += 1
        self.duration_seconds.observe(duration_s)
