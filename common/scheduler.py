"""One timer for many deadlines: a heap of (deadline, key) entries and one asyncio task for the
whole process, instead of a task (and a wake-up every interval) per managed ledger or topic.

Each key has at most one entry: `schedule` replaces it (a reschedule), `schedule_by` keeps the
earlier of the two (activity asks "at the latest then"), `cancel` drops it. Replaced and
cancelled entries stay in the heap until they reach its top, where they are skipped (their
sequence number no longer matches). Callbacks are plain functions, run in deadline order on the
scheduler's task; one that has I/O to do starts a task of its own (the managed ledger keeps its
tick's task so that its close can wait for it). `run_due` runs what is due now without the
task: tests drive the scheduler with a manual clock through it.
"""

from __future__ import annotations

import asyncio
import contextlib
import heapq
import logging
from collections.abc import Callable

log = logging.getLogger(__name__)
MAX_SLEEP_S = 60.0  # the task looks at the clock at least this often (a clock may jump)


class Scheduler:
    """Deadlines in the milliseconds of `now_ms` (the managed ledger's clock)."""

    def __init__(self, now_ms: Callable[[], int]) -> None:
        self._now_ms = now_ms
        self._heap: list[tuple[int, int, object]] = []
        self._entries: dict[object, tuple[int, int, Callable[[], None]]] = {}
        self._seq = 0
        self._task: asyncio.Task[None] | None = None
        self._wake: asyncio.Event | None = None
        self._closed = False
        self.runs = 0  # callbacks run so far (tests and stats)

    def __len__(self) -> int:
        return len(self._entries)

    def deadline(self, key: object) -> int | None:
        entry = self._entries.get(key)
        return None if entry is None else entry[0]

    def schedule(self, key: object, at_ms: int, callback: Callable[[], None]) -> None:
        """Run `callback` at `at_ms`, replacing the key's entry if it has one."""
        if self._closed:
            return
        self._seq += 1
        self._entries[key] = (at_ms, self._seq, callback)
        earliest = self._heap[0][0] if self._heap else None
        heapq.heappush(self._heap, (at_ms, self._seq, key))
        if earliest is None or at_ms < earliest:
            self._poke()

    def schedule_by(self, key: object, at_ms: int, callback: Callable[[], None]) -> None:
        """Run `callback` at `at_ms` at the latest: an earlier entry of the key stays."""
        entry = self._entries.get(key)
        if entry is None or at_ms < entry[0]:
            self.schedule(key, at_ms, callback)

    def cancel(self, key: object) -> None:
        self._entries.pop(key, None)
        if not self._entries:
            self._heap.clear()

    def run_due(self) -> int:
        """Run every callback whose deadline has come, earliest first; returns how many ran. A
        callback that schedules its key again for now runs on the next call, not in this one."""
        now = self._now_ms()
        due: list[Callable[[], None]] = []
        while self._heap and self._heap[0][0] <= now:
            _, seq, key = heapq.heappop(self._heap)
            entry = self._entries.get(key)
            if entry is None or entry[1] != seq:
                continue  # replaced or cancelled
            del self._entries[key]
            due.append(entry[2])
        for callback in due:
            self.runs += 1
            try:
                callback()
            except Exception:  # one bad entry must not stop the others
                log.exception("scheduled callback failed")
        return len(due)

    def next_deadline(self) -> int | None:
        while self._heap:
            at, seq, key = self._heap[0]
            entry = self._entries.get(key)
            if entry is not None and entry[1] == seq:
                return at
            heapq.heappop(self._heap)
        return None

    # --- the task ------------------------------------------------------------------------------
    def _poke(self) -> None:
        if self._wake is not None:
            self._wake.set()
            return
        with contextlib.suppress(RuntimeError):  # no running loop: `run_due` drives it (tests)
            loop = asyncio.get_running_loop()
            self._wake = asyncio.Event()
            self._task = loop.create_task(self._run(), name="quire-scheduler")

    async def _run(self) -> None:
        assert self._wake is not None
        while not self._closed:
            self.run_due()
            nxt = self.next_deadline()
            delay_s = MAX_SLEEP_S if nxt is None else min(MAX_SLEEP_S, max(0, nxt - self._now_ms()) / 1000)
            self._wake.clear()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wake.wait(), delay_s)

    async def close(self) -> None:
        """Drop every entry and stop the task."""
        self._closed = True
        self._entries.clear()
        self._heap.clear()
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
