"""A running bookie's registration: its first record, then a heartbeat every few seconds.

Each heartbeat reports the storage engine's state (read-only when its disk is nearly full), the
free bytes of the data directory's file system and the number of ledgers held. A heartbeat that
fails (the metadata store unreachable) is logged and tried again at the next tick: the bookie
keeps serving, and readers see it as down only if the store stays out of reach past the expiry.
A clean stop writes a last record with heartbeat 0, so it shows as down at once instead of
after the expiry.

A heartbeat the store refuses because the bookie id's cookie names another instance (formatted
as new while this process was paused or cut off) is not retried: this process no longer is that
bookie, so `replaced` is set and `on_replaced` runs (the bookie process stops and exits). It
writes no last record: that would show the new instance as down.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import shutil
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path

from bookie.errors import InstanceReplacedError
from bookie.registry import BookieDirectory, BookieRecord, BookieState, wall_clock_ms
from bookie.storage.api import LedgerStorageApi

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class RegistrationConfig:
    bookie_id: str
    instance_id: str
    data_dir: Path
    heartbeat_interval_ms: int = 2_000


class BookieRegistration:
    def __init__(
        self,
        directory: BookieDirectory,
        storage: LedgerStorageApi,
        config: RegistrationConfig,
        clock_ms: Callable[[], int] = wall_clock_ms,
        on_replaced: Callable[[], None] | None = None,
    ) -> None:
        self.directory = directory
        self.on_replaced = on_replaced
        self.replaced: InstanceReplacedError | None = None
        self.storage = storage
        self.config = config
        self._clock_ms = clock_ms
        self._task: asyncio.Task[None] | None = None
        self.failures = 0

    def record(self) -> BookieRecord:
        stats = self.storage.stats()
        ledgers = stats.get("ledgers", 0)
        return BookieRecord(
            bookie_id=self.config.bookie_id,
            instance_id=self.config.instance_id,
            state=BookieState.READ_ONLY if self.storage.read_only else BookieState.WRITABLE,
            heartbeat_ms=self._clock_ms(),
            free_bytes=shutil.disk_usage(self.config.data_dir).free,
            ledgers=ledgers if isinstance(ledgers, int) else 0,
        )

    async def start(self) -> None:
        """Register now (a failure here stops the start), then heartbeat in the background."""
        await asyncio.to_thread(self.directory.put_bookie, self.record())
        self._task = asyncio.get_running_loop().create_task(self._beat())

    async def _beat(self) -> None:
        interval_s = self.config.heartbeat_interval_ms / 1000
        while True:
            await asyncio.sleep(interval_s)
            try:
                await asyncio.to_thread(self.directory.put_bookie, self.record())
            except InstanceReplacedError as exc:
                log.error("bookie %s: stopping: %s", self.config.bookie_id, exc)
                self.replaced = exc
                if self.on_replaced is not None:
                    self.on_replaced()
                return
            except Exception as exc:  # the store may come back: keep serving, try next tick
                self.failures += 1
                log.warning("bookie %s: heartbeat failed: %s", self.config.bookie_id, exc)

    async def close(self) -> None:
        if self._task is None:
            return
        self._task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await self._task
        self._task = None
        if self.replaced is not None:
            return
        try:
            await asyncio.to_thread(self.directory.put_bookie, replace(self.record(), heartbeat_ms=0))
        except Exception as exc:  # readers will see it down after the expiry instead
            log.warning("bookie %s: could not record the stop: %s", self.config.bookie_id, exc)
