"""A managed ledger's share of the process's scheduler (`common.scheduler`, the factory's): no
task of its own, and no entry at all while the managed ledger is idle.

`wake` (an append, an ack, a new config, a new compaction horizon) asks for a tick within one
interval at the latest; after each tick the managed ledger says when it wants the next one
(`next_tick_ms`: within an interval while it has something to flush, snapshot or delete, else
its rollover's or retention's deadline, else never). A tick runs as a task the timer keeps, so
that a close waits for a pass in progress rather than cutting it in the middle of a store call
(a CAS applied in the database but not in memory would fence the close itself).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import Protocol

from common.scheduler import Scheduler
from managed_ledger.api import ManagedLedgerConfig

log = logging.getLogger(__name__)


class Timed(Protocol):
    """What the timer needs of its managed ledger."""

    @property
    def name(self) -> str: ...

    @property
    def config(self) -> ManagedLedgerConfig: ...

    async def tick(self) -> None: ...

    def next_tick_ms(self, now: int) -> int | None: ...


class LedgerTimer:
    def __init__(self, owner: Timed, scheduler: Scheduler | None, now_ms: Callable[[], int]) -> None:
        self._owner = owner  # also its key in the scheduler
        self._scheduler = scheduler
        self._now_ms = now_ms
        self._on = False
        self._closing = False
        self.task: asyncio.Task[None] | None = None  # the pass in progress, if any

    def interval_ms(self) -> int:
        """How soon work is done once there is some: the cursor flush interval, at most 1 s."""
        return min(self._owner.config.cursor_flush_interval_ms, 1_000)

    def start(self) -> None:
        if self._scheduler is not None and not self._on:
            self._on = True
            self.wake()

    def wake(self) -> None:
        """Tick within one interval at the latest. Cheap: called on every ack."""
        if self._on and not self._closing and self._scheduler is not None:
            self._scheduler.schedule_by(self._owner, self._now_ms() + self.interval_ms(), self._fired)

    def _fired(self) -> None:
        if self._closing or (self.task is not None and not self.task.done()):
            return
        self.task = asyncio.get_running_loop().create_task(self._run())

    async def _run(self) -> None:
        try:
            await self._owner.tick()
        except Exception as exc:  # the timer must outlive one failed pass; the next retries
            log.warning("managed ledger %s: background task failed: %s", self._owner.name, exc)
            self.wake()
        if self._closing or self._scheduler is None:
            return
        at = self._owner.next_tick_ms(self._now_ms())
        if at is not None:
            self._scheduler.schedule_by(self._owner, at, self._fired)

    async def close(self) -> None:
        """No more ticks; wait for the pass in progress (not cancelled)."""
        self._closing = True
        if self._scheduler is not None:
            self._scheduler.cancel(self._owner)
        if self.task is not None:
            await self.task
