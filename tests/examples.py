"""How many examples a Hypothesis property or state machine runs: all of them under `make test`,
a quarter (at least 5) under `make test-fast`, which sets QUIRE_TEST_QUICK=1 to stay the inner
loop. The same properties run in both; the whole suite explores more of each."""

from __future__ import annotations

import os

QUICK = os.environ.get("QUIRE_TEST_QUICK") == "1"


def examples(full: int) -> int:
    """`full` examples in the whole suite, a quarter of them (at least 5) in the inner loop."""
    return max(5, full // 4) if QUICK else full
