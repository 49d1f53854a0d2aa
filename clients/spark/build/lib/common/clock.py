"""The processes' one wall clock: every timestamp a process stores or compares (lease ends,
heartbeats, claims, ledger and message times) is read through `wall_clock_ms`.

QUIRE_TEST_CLOCK_OFFSET_MS shifts it by that many milliseconds (negative: behind). It exists so
that tests and the chaos campaign can run one process with a skewed clock and check that skew
fails safe (docs/operations.md, "Clocks"); production leaves it unset.
"""

from __future__ import annotations

import os
import time

OFFSET_VARIABLE = "QUIRE_TEST_CLOCK_OFFSET_MS"


def clock_offset_ms() -> int:
    """The test-only skew of this process's wall clock (0 unless QUIRE_TEST_CLOCK_OFFSET_MS)."""
    raw = os.environ.get(OFFSET_VARIABLE, "").strip()
    if not raw:
        return 0
    try:
        return int(raw)
    except ValueError:
        raise ValueError(f"{OFFSET_VARIABLE} must be a whole number of milliseconds, not {raw!r}") from None


def wall_clock_ms() -> int:
    """Milliseconds since the epoch on this process's (possibly test-skewed) wall clock."""
    return time.time_ns() // 1_000_000 + clock_offset_ms()
