"""What the storage engine counts for the bookie's metrics, as plain numbers on its event loop.

`app/process_metrics.py` reads them at scrape time (on the loop, through the engine's `stats()`
and `journal_stats`) and serves them as Prometheus families; nothing here knows Prometheus. The
engine updates them once per group commit, never per entry: an add only adds its payload's
length to its group's total.
"""

from __future__ import annotations

from bookie.storage.group import Group
from common.histogram import Histogram

# fdatasync of one group: from a tenth of a millisecond (a cached or battery-backed disk) to a
# second (a disk in trouble).
SYNC_SECONDS_BOUNDS = (0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0)
# Adds covered by one fsync: powers of two up to the thousands a loaded bookie groups.
GROUP_ENTRIES_BOUNDS = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096)


class JournalStats:
    """Counters since the engine started (`counters`, also merged into `stats()`), and two
    histograms per synced group: its fdatasync time and its number of adds. A group of fences
    or deletes alone is an fsync with 0 adds, and is observed as such."""

    def __init__(self) -> None:
        self.counters = {
            "adds": 0,
            "add_bytes": 0,
            "groups": 0,
            "fsyncs": 0,
            "rolls": 0,
            "gc_runs": 0,
            "gc_segments": 0,
        }
        self.sync_seconds = Histogram(SYNC_SECONDS_BOUNDS)
        self.group_entries = Histogram(GROUP_ENTRIES_BOUNDS)

    def group_synced(self, group: Group, sync_s: float) -> None:
        """A group is written, synced and indexed: its adds are stored."""
        counters = self.counters
        counters["groups"] += 1
        counters["fsyncs"] += 1
        counters["adds"] += group.adds
        counters["add_bytes"] += group.add_bytes
        self.sync_seconds.observe(sync_s)
        self.group_entries.observe(group.adds)
