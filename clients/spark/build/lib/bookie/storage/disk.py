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
