"""Disk usage and the read-only switch with hysteresis (high-water mark on, low-water mark off)."""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable
from pathlib import Path

DiskUsage = Callable[[Path], float]


def disk_usage_fraction(path: Path) -> float:
    """Fraction (0..1) of the filesystem holding `path` that is used."""
    usage = shutil.disk_usage(path)
    return usage.used / usage.total if usage.total else 0.0


class ReadOnlySwitch:
    """Read-only once usage reaches the high-water mark; writable again only below the low one,
    so a disk hovering near the limit does not flap."""

    def __init__(self, high_water: float, low_water: float, measure: DiskUsage) -> None:
        if not 0 < low_water <= high_water <= 1:
            raise ValueError("need 0 < disk_usage_low_water <= disk_usage_high_water <= 1")
        self.high_water = high_water
        self.low_water = low_water
        self.measure = measure
        self.read_only = False
        self.last_usage = 0.0

    def update(self, path: Path) -> bool:
        """Measure and switch; returns whether the bookie is now read-only."""
        usage = self.measure(path)
        self.last_usage = usage
        if not self.read_only and usage >= self.high_water:
            self.read_only = True
        elif self.read_only and usage < self.low_water:
            self.read_only = False
        return self.read_only


def free_bytes(path: Path) -> int:
    """Bytes an unprivileged writer may still allocate on the filesystem holding `path`."""
    st = os.statvfs(path)
    return st.f_bavail * st.f_frsize


class DiskSpace:
    """A bookie's room on its disk: the usage switch, measured every `interval_s` (and every
    tick while the disk is full), and after a full disk the free space wanted before adds are
    taken again (`wanted_bytes`: a whole new segment and the index's reserve)."""

    def __init__(self, path: Path, switch: ReadOnlySwitch, interval_s: float, wanted_bytes: int) -> None:
        self.path = path
        self.switch = switch
        self.interval_s = interval_s
        self.wanted_bytes = wanted_bytes
        self.full = False  # a write found the disk full: read-only until the room is back
        self.read_only = False
        self._due = 0.0  # loop time of the next periodic usage check

    def ran_out(self) -> bool:
        """A write found no room; True the first time (until the room is back)."""
        first = not self.full
        self.full = self.read_only = True
        return first

    def check(self) -> tuple[bool, bool]:
        """Measure now; (read-only now, whether that changed). After a full disk, read-only
        until usage is under the low-water mark and `wanted_bytes` are free."""
        before = self.read_only
        now = self.switch.update(self.path)
        if self.full:
            if now or free_bytes(self.path) < self.wanted_bytes:
                now = True
            else:
                self.full = False
        self.read_only = now
        return now, now != before

    def due(self, loop_time: float) -> bool:
        """Whether a tick at `loop_time` measures: the interval is up, or the disk is full."""
        if self.full or loop_time >= self._due:
            self._due = loop_time + self.interval_s
            return True
        return False
