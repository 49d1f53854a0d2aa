"""The periodic ledger check (BookKeeper's LedgerChecker and the auditor's periodic check): do the
bookies hold what the metadata says they hold?

The auditor lists the ledgers of bookies it sees lost, draining or drained, from the registry
alone. Copies lost without a change of registration (a damaged index rebuilt short, a disk wiped
and formatted, a write the disk dropped) would stay lost for good without this check. The auditor
process that holds the auditor lease runs a pass every `check_interval_ms`:

1. Picks the ledgers to check: first the ledgers naming a bookie whose cookie was created after
   the ledger (formatted since: the suspects, each checked once per bookie instance, at most
   half of a pass), then the next ones in id order from where the last pass stopped,
   `ledgers_per_pass` in all.
2. For each CLOSED ledger every segment, and for a ledger still being written the segments
   before the last (the last one is still being written; its writer finds a bookie that lacks
   an entry itself), asks every bookie of the segment that is up for the first and the last
   entry it should store there: entry e of a segment of E bookies is stored on
   bookies[(e + i) % E] for i < Qw (`LedgerSpec.write_set`). At most `reads_in_flight` reads
   are in flight.
3. A bookie that answers NO_SUCH_ENTRY or NO_SUCH_LEDGER for one of them lacks copies it was
   given: it is added to the ledger's row of the under-replicated list (a new row, or the row
   changed by CAS, its worker's claim kept) and to `confirmed`, which the auditor reads so that
   it does not drop the bookie from the row because it heartbeats. A bookie that is down, or
   that fails to answer, tells nothing (an unknown answer is not a negative): it is not listed.

Checking only the ends of each bookie's part of a segment finds a wiped disk, a lost ledger and
a lost tail, as BookKeeper's LedgerChecker does; a hole in the middle is left to reads, which
fall back to another copy.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Protocol

from bookie.errors import BookieError
from bookie.ledger_metadata import (
    BadVersionError,
    LedgerMetadata,
    LedgerMetadataStore,
    LedgerState,
    NotFoundError,
)
from bookie.ledgers import ledger_spec
from bookie.metadata_calls import call_store
from bookie.recovery_store import RecoveryStore, UnderReplicatedLedger
from bookie.registry import BookieDirectory, BookieRegistry, BookieState, wall_clock_ms
from bookie.replica_io import ReplicaIO

log = logging.getLogger(__name__)
_UP = (BookieState.WRITABLE, BookieState.READ_ONLY, BookieState.DECOMMISSIONING)


class CheckerStore(LedgerMetadataStore, RecoveryStore, BookieDirectory, Protocol):
    """The metadata store as the checker sees it (the auditor's view: it lists for the auditor)."""


class ConfirmedMissing:
    """The bookies the checker found lacking entries, by ledger. The checker adds to it and the
    auditor reads and prunes it, each from a thread of its own (store calls run off the event
    loop), hence the lock. It lives in the process's memory: an auditor that takes the lease
    over starts empty, drops such rows of bookies that heartbeat, and its checker lists them
    again when it comes to them."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._by_ledger: dict[int, set[str]] = {}

    def add(self, ledger_id: int, bookies: set[str]) -> None:
        with self._lock:
            self._by_ledger.setdefault(ledger_id, set()).update(bookies)

    def still_named(self, ledger_id: int, named: set[str]) -> set[str]:
        """The ledger's confirmed bookies among `named`; the others are forgotten."""
        with self._lock:
            kept = self._by_ledger.pop(ledger_id, set()) & named
            if kept:
                self._by_ledger[ledger_id] = kept
            return set(kept)

    def forget_all_but(self, ledger_ids: set[int]) -> None:
        with self._lock:
            for ledger_id in set(self._by_ledger) - ledger_ids:
                del self._by_ledger[ledger_id]


@dataclass(frozen=True, slots=True)
class CheckerConfig:
    ledgers_per_pass: int = 1_000
    reads_in_flight: int = 16


@dataclass(slots=True)
class CheckerCounters:
    """What the checker did since the process started (exported as Prometheus metrics)."""

    passes: int = 0
    ledgers_checked: int = 0
    missing_found: int = 0  # (ledger, bookie) pairs found lacking copies
    underreplicated_ledgers: int = 0  # the under-replicated list's length after the last pass


@dataclass(slots=True)
class CheckResult:
    checked: list[int] = field(default_factory=list)
    missing: dict[int, set[str]] = field(default_factory=dict)


class LedgerChecker:
    def __init__(
        self,
        store: CheckerStore,
        registry: BookieRegistry,
        io: ReplicaIO,
        config: CheckerConfig,
        confirmed: ConfirmedMissing,
        clock_ms: Callable[[], int] = wall_clock_ms,
    ) -> None:
        self.store = store
        self.registry = registry
        self.io = io
        self.config = config
        self.confirmed = confirmed  # shared with the auditor (`Auditor.confirmed`)
        self.counters = CheckerCounters()
        self._clock_ms = clock_ms
        self._after = -1  # the sweep goes on after this ledger id
        # (ledger, bookie, cookie time) of suspects already checked: not looked at first again.
        self._seen: set[tuple[int, str, int]] = set()

    async def check_once(self) -> CheckResult:
        """One pass (the caller makes sure this process holds the auditor lease)."""
        result = CheckResult()
        metas = [m for m in await call_store(self.store.list_ledgers) if m.state != LedgerState.DELETING]
        up = {s.bookie_id for s in await call_store(self.registry.all_bookies) if s.state in _UP}
        formatted = await call_store(self._formatted_ms, up)
        chosen = self._choose(sorted(metas, key=lambda m: m.ledger_id), formatted)
        reads = asyncio.Semaphore(max(1, self.config.reads_in_flight))
        for meta in chosen:
            lacking = await self._check_ledger(meta, up, reads)
            result.checked.append(meta.ledger_id)
            self._seen |= {(meta.ledger_id, b, formatted[b]) for b in checked_bookies(meta) if b in formatted}
            if lacking:
                result.missing[meta.ledger_id] = lacking
                await call_store(self._list, meta.ledger_id, lacking)
        self.counters.passes += 1
        self.counters.ledgers_checked += len(chosen)
        self.counters.underreplicated_ledgers = len(await call_store(self.store.list_underreplicated))
        return result

    def _formatted_ms(self, bookies: set[str]) -> dict[str, int]:
        out: dict[str, int] = {}
        for bookie_id in bookies:
            cookie = self.store.get_bookie_cookie(bookie_id)
            if cookie is not None and cookie.created_ms > 0:
                out[bookie_id] = cookie.created_ms
        return out

    def _choose(self, metas: list[LedgerMetadata], formatted: dict[str, int]) -> list[LedgerMetadata]:
        """The suspects not checked yet (at most half the bound, so that the sweep always goes
        on), then the sweep from where the last pass stopped, up to the bound."""
        limit = max(1, self.config.ledgers_per_pass)
        live = {m.ledger_id for m in metas}
        self._seen = {s for s in self._seen if s[0] in live}
        suspects = [m for m in metas if self._suspect(m, formatted)]
        chosen = suspects[: max(1, limit // 2)]
        ids = {m.ledger_id for m in chosen}
        rest = [m for m in metas if m.ledger_id not in ids]
        ordered = [m for m in rest if m.ledger_id > self._after] + [
            m for m in rest if m.ledger_id <= self._after
        ]
        swept = ordered[: limit - len(chosen)]
        if swept:
            self._after = swept[-1].ledger_id
        return chosen + swept

    def _suspect(self, meta: LedgerMetadata, formatted: dict[str, int]) -> bool:
        """A bookie of a checked segment formatted since the ledger was made, not checked yet
        as that instance (one that entered the ledger later holds its entries: checked once)."""
        return any(
            formatted.get(b, 0) > meta.created_ms > 0 and (meta.ledger_id, b, formatted[b]) not in self._seen
            for b in checked_bookies(meta)
        )

    async def _check_ledger(self, meta: LedgerMetadata, up: set[str], reads: asyncio.Semaphore) -> set[str]:
        """The up bookies of the ledger's checked segments that lack an entry they should hold."""
        spec = ledger_spec(meta)
        asks: list[tuple[str, int]] = []
        for first, last, bookies in checked_segments(meta):
            for bookie in bookies:
                if bookie not in up:
                    continue  # down: no evidence either way
                stored = [e for e in _ends(first, last, len(bookies)) if bookie in spec.write_set(e)]
                asks += [(bookie, e) for e in {min(stored), max(stored)}] if stored else []
        answers = await asyncio.gather(*(self._lacks(meta.ledger_id, b, e, reads) for b, e in asks))
        return {b for (b, _), lacking in zip(asks, answers, strict=True) if lacking}

    async def _lacks(self, ledger_id: int, bookie: str, entry_id: int, reads: asyncio.Semaphore) -> bool:
        async with reads:
            try:
                payload = await self.io.read_entry(bookie, ledger_id, entry_id)
            except BookieError as exc:  # no answer is no evidence
                log.debug("ledger check: %s did not answer for %d:%d: %s", bookie, ledger_id, entry_id, exc)
                return False
        if payload is None:
            log.warning("ledger check: bookie %s lacks entry %d of ledger %d", bookie, entry_id, ledger_id)
        return payload is None

    def _list(self, ledger_id: int, lacking: set[str]) -> None:
        """Add the bookies to the ledger's row (its worker's claim kept) and to `confirmed`."""
        self.confirmed.add(ledger_id, lacking)
        for _ in range(3):
            row = self.store.get_underreplicated(ledger_id)
            try:
                if row is None:
                    row = UnderReplicatedLedger(ledger_id, tuple(sorted(lacking)), self._clock_ms())
                elif lacking <= set(row.missing):
                    return
                else:
                    row = replace(row, missing=tuple(sorted(set(row.missing) | lacking)))
                self.store.put_underreplicated(row)
                self.counters.missing_found += len(lacking)
                return
            except (BadVersionError, NotFoundError):
                continue  # a worker or the auditor changed it meanwhile: read it again
        log.warning("ledger check: could not list ledger %d (its row keeps moving); next pass", ledger_id)


def checked_segments(meta: LedgerMetadata) -> list[tuple[int, int, tuple[str, ...]]]:
    """(first, last, bookies) of the segments whose entries are fixed: every segment of a CLOSED
    ledger (empty ones left out), the ones before the last of a ledger still being written."""
    history = meta.history()
    closed = len(history) if meta.state == LedgerState.CLOSED else len(history) - 1
    out = []
    for index in range(closed):
        first, bookies = history[index]
        last = history[index + 1][0] - 1 if index + 1 < len(history) else meta.last_entry_id
        if meta.state == LedgerState.CLOSED:
            last = min(last, meta.last_entry_id)
        if last >= first:
            out.append((first, last, bookies))
    return out


def checked_bookies(meta: LedgerMetadata) -> set[str]:
    """The bookies of the checked segments."""
    return {b for _, _, bookies in checked_segments(meta) for b in bookies}


def _ends(first: int, last: int, size: int) -> list[int]:
    """The first and last `size` entries of first..last: every bookie's first and last stored
    entry is among them."""
    head = range(first, min(last, first + size - 1) + 1)
    tail = range(max(first, last - size + 1), last + 1)
    return sorted(set(head) | set(tail))
