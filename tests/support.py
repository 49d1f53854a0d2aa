"""Helpers for tests that start real processes: free ports, bounded waits, cleanup by process
group. They live in `devtools.procs`, which the benchmarks share; this module keeps the names the
tests import."""

from __future__ import annotations

import sys
from collections.abc import Sequence
from pathlib import Path

from devtools.procs import REPO, Proc, free_port, port_open, running, wait_until

__all__ = ["REPO", "QuireProcess", "free_port", "port_open", "running", "wait_until"]


class QuireProcess(Proc):
    """A `quire <process>` child started with its own environment, in a session of its own."""

    def __init__(self, args: Sequence[str], env: dict[str, str], log_path: Path) -> None:
        super().__init__([sys.executable, "-m", "app.cli", *args], env, log_path)
        self.args = list(args)  # the `quire` arguments, to start the same process again
