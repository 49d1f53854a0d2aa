"""A running bookie's registration: its first record, then a heartbeat every few seconds.

Each heartbeat reports the storage engine's state (read-only when its disk is nearly full), the
free bytes of the data directory's file system and the number of ledgers held. A heartbeat that
fails (the metadata store unreachable) is logged and tried again at the next tick: the bookie
keeps serving, and readers see it as down only if the store stays out of reach past the expiry.
A clean stop writes a last record with heartbeat 0, so it shows as down at once instead of
after the expiry.

A heartbeat the store refuses because the bookie id's cookie names another instance (formatted
as new while this process was paused or cut off), or because another process registered under
the id since, is not retried: this process no longer is that bookie, so `replaced` is set and
`on_replaced` runs (the bookie process stops and exits). It writes no last record: that would
show the other one as down.

One process per bookie id (BookKeeper's registration waits for the previous session's ephemeral
node to expire before it registers). Every process registers under a process id of its own, and
every record it writes expects that id in the store (`BookieDirectory.put_bookie`). At start the
registration found in the store is taken over only once its process is known to be gone:
- at once, when it recorded a clean stop (heartbeat 0), or when it is this directory's dead
  predecessor (`bookie.process_mark`: the directory's mark names it, and this process holds the
  directory's lock), so a restart after a crash is not delayed;
- otherwise after watching it for a heartbeat timeout (and one interval) on this process's own
  monotonic clock: if its heartbeat or process moves meanwhile, another live process serves the
  id (a copy of the disk, the bookie started twice), and the start is refused
  (`TwinBookieError`); if not, that process is dead or cut off from the store for as long as
  readers need to count it down, and it is taken over by compare-and-set on its process id (a
  process that raced in meanwhile makes that fail: refused too). A process taken over that
  comes back finds its next heartbeat refused and stops.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import shutil
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path

from bookie.errors import InstanceReplacedError, ProcessReplacedError, TwinBookieError
from bookie.metadata_calls import call_store
from bookie.process_mark import read_mark, write_mark
from bookie.registry import BookieDirectory, BookieRecord, BookieState, wall_clock_ms
from bookie.storage.api import LedgerStorageApi

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class RegistrationConfig:
    bookie_id: str
    instance_id: str
    data_dir: Path
    heartbeat_interval_ms: int = 2_000
    heartbeat_timeout_ms: int = 10_000  # the registry's: a registration this silent is down


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
        self.process_id = uuid.uuid4().hex

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
            process_id=self.process_id,
        )

    def _put(self, record: BookieRecord, expect_process: str) -> None:
        self.directory.put_bookie(record, expect_process=expect_process)

    def _stored(self) -> BookieRecord | None:
        return next((r for r in self.directory.list_bookies() if r.bookie_id == self.config.bookie_id), None)

    async def start(self) -> None:
        """Take the id over from the process registered under it once that one is gone (module
        docstring; TwinBookieError if it is alive), register, then heartbeat in the background.
        Call it with the data directory's lock held (the storage engine started)."""
        stored = await call_store(self._stored)
        if stored is not None and not await asyncio.to_thread(self._provably_gone, stored):
            stored = await self._watch(stored)
        previous = "" if stored is None else stored.process_id
        await asyncio.to_thread(write_mark, self.config.data_dir, self.process_id)
        try:
            await call_store(self._put, self.record(), previous)
        except ProcessReplacedError as exc:
            raise TwinBookieError(
                f"bookie {self.config.bookie_id}: another process registered first: {exc}"
            ) from exc
        self._task = asyncio.get_running_loop().create_task(self._beat())

    def _provably_gone(self, stored: BookieRecord) -> bool:
        """A clean stop recorded, or this directory's own dead predecessor (`process_mark`)."""
        if stored.heartbeat_ms == 0 or not stored.process_id:
            return stored.heartbeat_ms == 0
        mark = read_mark(self.config.data_dir)
        return (
            mark is not None
            and mark.process_id == stored.process_id
            and mark.same_directory(self.config.data_dir)
        )

    async def _watch(self, stored: BookieRecord) -> BookieRecord | None:
        """Watch the registration for a heartbeat timeout; TwinBookieError if it moves."""
        interval_s = self.config.heartbeat_interval_ms / 1000
        wait_s = self.config.heartbeat_timeout_ms / 1000 + interval_s
        log.warning("bookie %s: registered by process %s, not known to be gone: watching its heartbeat "
                    "for %.1f s before taking the id over", self.config.bookie_id, stored.process_id or "?",
                    wait_s)  # fmt: skip
        deadline = time.monotonic() + wait_s
        while (left := deadline - time.monotonic()) > 0:
            await asyncio.sleep(min(interval_s / 2, left))
            now = await call_store(self._stored)
            if now is None or now.heartbeat_ms == 0:
                return now  # deleted, or it stopped cleanly meanwhile: gone
            if (now.process_id, now.heartbeat_ms) != (stored.process_id, stored.heartbeat_ms):
                raise TwinBookieError(
                    f"bookie {self.config.bookie_id} is served by another live process "
                    f"({now.process_id or 'unnamed'}: its heartbeat moved while this one watched). "
                    "Two processes must not serve one bookie id: is this a copy of its data "
                    "directory, or the same bookie started twice?"
                )
        return stored

    async def _beat(self) -> None:
        interval_s = self.config.heartbeat_interval_ms / 1000
        while True:
            await asyncio.sleep(interval_s)
            try:
                await call_store(self._put, self.record(), self.process_id)
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
            await call_store(self._put, replace(self.record(), heartbeat_ms=0), self.process_id)
        except Exception as exc:  # readers will see it down after the expiry instead
            log.warning("bookie %s: could not record the stop: %s", self.config.bookie_id, exc)
