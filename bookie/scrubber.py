"""The bookie's scrub (BookKeeper's local consistency check, `localScrubInterval`, and the bookie
scanner of BP-24): find the copies this bookie holds whose stored checksum fails, and list them
for auto-recovery to repair.

A copy can rot on disk after it was acknowledged (bit rot, a write the disk dropped). The engine
never serves one: a read of it is answered CORRUPT and the reader falls back to another copy. But
then the ledger silently has one good copy fewer, and losing that other copy would lose the
entry. So the rotten copies are listed the way the auditor lists a lost bookie's: in the
under-replicated list (`bookie.recovery_store.mark_rotten`, the row's `rotten` pairs), where a
recovery worker claims the row and rewrites each rotten copy *in place* from a good one
(`bookie.rereplication`): a recovery add over a record whose checksum fails replaces it
(`bookie.storage.engine`). In place rather than moved to another bookie: the bookie is up and
its other copies are good, the metadata does not change (no compare-and-set against a writer
still adding to the ledger, no fencing), only the rotten entries travel, and a cluster with no
spare bookie outside the ensemble can still be repaired.

Two ways find a rotten copy, both through the engine's `on_corrupt` hook, so they are one path:
- a read that meets it (a reader's, the ledger checker's, a recovery worker's): noticed at once;
- the periodic scrub: every `interval_s` (0: off) it reads every entry the bookie holds, ledger
  by ledger, at most `rate_bytes_per_s` of payload a second (so that a scrub never starves the
  bookie's clients of disk), and the reads of rotten ones call the same hook.
Noticed copies are listed by a reporter task from a queue; a listing that fails (the store out
of reach) is tried again, and a copy that stays rotten is found again by the next scrub.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from bookie.errors import BookieError, ErrorCode, NoSuchEntryError, NoSuchLedgerError
from bookie.storage.api import LedgerStorageApi
from common.tasks import cancel_all

log = logging.getLogger(__name__)
CORRUPT_COST_BYTES = 1_024  # what a rotten entry counts against the rate (its size is unknown)
RETRY_S = 5.0  # a failed listing is tried again after this long
YIELD_EVERY = 256  # entries read between two turns of the event loop, whatever the rate


@dataclass(frozen=True, slots=True)
class ScrubConfig:
    interval_s: float = 86_400.0  # one scrub a day, as BookKeeper's default
    rate_bytes_per_s: int = 8 * 1024 * 1024


@dataclass(slots=True)
class ScrubCounters:
    """What the scrub did since the process started (exported as Prometheus metrics)."""

    passes: int = 0
    entries_scrubbed: int = 0
    bytes_scrubbed: int = 0
    rotten_found: int = 0  # copies found rotten (by the scrub or a read), listed or to list
    rotten_listed: int = 0


class RateLimit:
    """At most `rate` units a second on average since `start` (a pass's budget): `spend` sleeps
    as long as the units spent so far are ahead of the time elapsed."""

    def __init__(
        self,
        rate: float,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
    ) -> None:
        assert rate > 0, "a rate limit needs a positive rate"
        self.rate = rate
        self._clock = clock
        self._sleep = sleep
        self._start = clock()
        self._spent = 0.0

    async def spend(self, units: float) -> None:
        self._spent += units
        ahead = self._spent / self.rate - (self._clock() - self._start)
        if ahead > 0:
            await self._sleep(ahead)


Report = Callable[[int, set[int]], Awaitable[bool]]  # (ledger, entries) listed: True


class Scrubber:
    """Runs a scrub every `config.interval_s` once started, and lists every rotten copy the
    engine reports through `notice` (install it as the engine's `on_corrupt`)."""

    def __init__(
        self,
        storage: LedgerStorageApi,
        report: Report,
        config: ScrubConfig,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
    ) -> None:
        self.storage = storage
        self.report = report
        self.config = config
        self.counters = ScrubCounters()
        self._clock = clock
        self._sleep = sleep
        self._pending: dict[int, set[int]] = {}  # ledger -> rotten entries not listed yet
        self._wake = asyncio.Event()
        self._tasks: list[asyncio.Task[None]] = []

    def notice(self, ledger_id: int, entry_id: int) -> None:
        """A rotten copy was met (the engine's `on_corrupt`; runs on the event loop)."""
        entries = self._pending.setdefault(ledger_id, set())
        if entry_id not in entries:
            entries.add(entry_id)
            self.counters.rotten_found += 1
        self._wake.set()

    async def scrub_once(self) -> int:
        """Read every entry held, within the rate; returns how many were rotten."""
        limit = RateLimit(self.config.rate_bytes_per_s, self._clock, self._sleep)
        rotten = 0
        for ledger_id in sorted(self.storage.ledger_ids()):
            try:
                last = self.storage.last_entry_id(ledger_id)
            except NoSuchLedgerError:
                continue  # deleted since the listing
            for entry_id in range(last + 1):
                cost = self._check(ledger_id, entry_id)
                if cost < 0:
                    rotten += 1
                    cost = CORRUPT_COST_BYTES
                self.counters.entries_scrubbed += 1
                self.counters.bytes_scrubbed += cost
                await limit.spend(cost)
                if self.counters.entries_scrubbed % YIELD_EVERY == 0:
                    await asyncio.sleep(0)  # reads are synchronous: let clients in between
        self.counters.passes += 1
        if rotten:
            log.warning("scrub: %d rotten copies found; listed for repair", rotten)
        return rotten

    def _check(self, ledger_id: int, entry_id: int) -> int:
        """The entry's payload size; -1 if its copy is rotten (the read reported it), 0 if the
        bookie does not hold it (not written here, or the ledger was deleted meanwhile)."""
        try:
            return len(self.storage.read_entry(ledger_id, entry_id))
        except (NoSuchEntryError, NoSuchLedgerError):
            return 0
        except BookieError as exc:
            if exc.code == ErrorCode.CORRUPT:
                return -1
            log.warning("scrub: ledger %d entry %d could not be read: %s", ledger_id, entry_id, exc)
            return 0

    async def list_pending(self) -> None:
        """List what was noticed; what could not be listed stays pending."""
        pending, self._pending = self._pending, {}
        for ledger_id, entries in sorted(pending.items()):
            try:
                listed = await self.report(ledger_id, entries)
            except Exception as exc:  # the store out of reach: try again later
                log.warning("scrub: could not list rotten copies of ledger %d: %s", ledger_id, exc)
                listed = False
            if listed:
                self.counters.rotten_listed += len(entries)
                log.warning("ledger %d: rotten copies %s listed for repair", ledger_id, sorted(entries))
            else:
                self._pending.setdefault(ledger_id, set()).update(entries)

    def start(self) -> None:
        loop = asyncio.get_running_loop()
        self._tasks.append(loop.create_task(self._report_loop()))
        if self.config.interval_s > 0:
            self._tasks.append(loop.create_task(self._scrub_loop()))

    async def _report_loop(self) -> None:
        while True:
            await self._wake.wait()
            self._wake.clear()
            await self.list_pending()
            if self._pending:
                await self._sleep(RETRY_S)
                self._wake.set()

    async def _scrub_loop(self) -> None:
        while True:
            await self._sleep(self.config.interval_s)
            try:
                await self.scrub_once()
            except Exception:  # one bad pass must not end the scrub
                log.exception("scrub: pass failed")

    async def close(self) -> None:
        tasks, self._tasks = self._tasks, []
        await cancel_all(tasks)
