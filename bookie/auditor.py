"""The auditor (BookKeeper's Auditor): one process at a time lists the ledgers that lost copies.

Every auto-recovery process is a candidate; the one holding the `auditor` lease in the metadata
store (`bookie.recovery_store.take_lease`) audits, renewing the lease at each pass, and another
takes over within one lease after it dies. A pass:

1. Looks at the registry. A bookie is *lost* once it has been down (heartbeat expired) for the
   grace period, counted from when this auditor first saw it down: a bookie restarting for an
   upgrade must not set off a copy of everything it holds. A bookie being *decommissioned* counts
   at once: it is alive, and its copies are read from it while they are moved off.
   A bookie that is up is missing from a ledger only when it says so: the periodic ledger
   check (`bookie.ledger_checker`, run by the same process while it holds the lease) asks it
   for the entries the metadata gives it and records in `confirmed` the bookies that lack them.
   A bookie wiped and started with `--format` within the grace period is found that way (the
   checker looks at the ledgers of such a bookie first); a bookie that merely joined
   the cluster after a ledger was made, and entered it by an ensemble change, is not listed.
2. Lists, for every ledger (not being deleted), the lost, decommissioning or drained bookies
   named in any segment of its ensemble history, and the ones the checker confirmed lacking,
   and records them as the ledger's missing copies: a new row, or a row changed by CAS (its
   worker's claim is kept). A row only loses a bookie that is back, heartbeating, and not
   confirmed lacking by the checker (a bookie down for less than the grace period, or one a
   new auditor has not timed yet, stays listed):
   a row whose bookies are all back is dropped, so a cluster with no spare bookie to copy to
   does not keep listing ledgers whose copies came home. A row's rotten copies (listed by a
   bookie's scrub, `bookie.scrubber`) are kept: only the worker that rewrote them drops them.
3. Drops rows whose ledger is gone, and marks a decommissioning bookie `decommissioned` once no
   ledger names it and no row is left for it: it holds nothing anyone needs and may be stopped.
   Placement never chooses a decommissioning bookie, so no new ledger can name it meanwhile.

No rule here compares a cookie's creation time with a ledger's: a bookie that joined after a
ledger was made can hold its entries (an ensemble change, or a copy by re-replication), and
listing it would fence the ledger's writer and copy the same entries again and again. The
cookie time only tells the checker which ledgers to look at first. What is compared is the
cookie's instance with the one recorded in a segment when the bookie entered it
(`LedgerMetadata.instances`): a bookie formatted as another instance since is listed at once,
no clocks involved. Where no instance was recorded (rows from before revision 0011, copies made
by re-replication), only the ledger check finds a wipe.

The pass is synchronous (metadata store calls); async callers run it in a thread.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Protocol

from bookie.ledger_checker import ConfirmedMissing, checked_bookies
from bookie.ledger_metadata import (
    BadVersionError,
    LedgerMetadata,
    LedgerMetadataStore,
    LedgerState,
    NotFoundError,
)
from bookie.recovery_store import RecoveryStore, UnderReplicatedLedger, take_lease
from bookie.registry import BookieDirectory, BookieRegistry, BookieState, wall_clock_ms

log = logging.getLogger(__name__)
AUDITOR_LEASE = "auditor"


class AuditorStore(LedgerMetadataStore, RecoveryStore, BookieDirectory, Protocol):
    """The metadata store as the auditor sees it (the SQL and in-memory stores are all three)."""


@dataclass(frozen=True, slots=True)
class AuditorConfig:
    candidate_id: str
    lease_ms: int = 15_000
    lost_bookie_grace_ms: int = 30_000


@dataclass(slots=True)
class AuditResult:
    leader: bool = False
    lost: set[str] = field(default_factory=set)
    decommissioning: set[str] = field(default_factory=set)
    back: set[str] = field(default_factory=set)  # heartbeating, in any state but decommissioning
    # Drained bookies: a ledger still naming one (a copy onto it swapped in after the pass that
    # found it drained) is listed, so that it does not rest on a bookie that may be stopped.
    drained: set[str] = field(default_factory=set)
    instances: dict[str, str] = field(default_factory=dict)  # each bookie's cookie instance now
    marked: int = 0  # rows created or changed this pass
    cleared: int = 0  # rows dropped because their bookies came back
    decommissioned: list[str] = field(default_factory=list)


class Auditor:
    def __init__(
        self,
        store: AuditorStore,
        registry: BookieRegistry,
        config: AuditorConfig,
        clock_ms: Callable[[], int] = wall_clock_ms,
    ) -> None:
        self.store = store
        self.registry = registry
        self.config = config
        self._clock_ms = clock_ms
        self._down_since: dict[str, int] = {}
        # Bookies the ledger checker found lacking entries, by ledger: kept listed although up.
        self.confirmed = ConfirmedMissing()
        self.leading = False  # held the lease at the last pass: the checker runs only then

    def audit_once(self) -> AuditResult:
        """One pass if this candidate holds (or takes) the lease; otherwise nothing."""
        now = self._clock_ms()
        result = AuditResult()
        if take_lease(self.store, AUDITOR_LEASE, self.config.candidate_id, now, self.config.lease_ms) is None:
            self._down_since.clear()  # a later term starts its grace periods afresh
            self.leading = False
            return result
        result.leader = self.leading = True
        self._classify(now, result)
        targets = result.lost | result.decommissioning | result.drained
        named = self._mark(targets, now, result)
        self._finish_decommissions(result.decommissioning - named, result)
        return result

    def _classify(self, now: int, result: AuditResult) -> None:
        down_now: set[str] = set()
        for status in self.registry.all_bookies():
            if status.state == BookieState.DECOMMISSIONING:
                result.decommissioning.add(status.bookie_id)
            elif status.state == BookieState.DECOMMISSIONED:
                result.drained.add(status.bookie_id)
            elif status.state != BookieState.DOWN:
                result.back.add(status.bookie_id)
            else:
                down_now.add(status.bookie_id)
                since = self._down_since.setdefault(status.bookie_id, now)
                if now - since >= self.config.lost_bookie_grace_ms:
                    result.lost.add(status.bookie_id)
        for bookie_id in list(self._down_since):
            if bookie_id not in down_now:
                del self._down_since[bookie_id]
        # A decommissioning bookie that is also down shows as down: still one to drain.
        for record in self.store.list_bookies():
            if record.state == BookieState.DECOMMISSIONING:
                result.decommissioning.add(record.bookie_id)
            cookie = self.store.get_bookie_cookie(record.bookie_id)
            if cookie is not None:
                result.instances[record.bookie_id] = cookie.instance_id
        result.back -= result.decommissioning

    def _mark(self, targets: set[str], now: int, result: AuditResult) -> set[str]:
        """Record the missing copies of every ledger; returns the targets still named anywhere."""
        rows = {r.ledger_id: r for r in self.store.list_underreplicated()}
        named: set[str] = set()
        live_ids: set[int] = set()
        for meta in self.store.list_ledgers():
            if meta.state == LedgerState.DELETING:
                continue
            live_ids.add(meta.ledger_id)
            holders = {b for _, bookies in meta.history() for b in bookies}
            named |= holders & targets
            missing = (holders & targets) | self._confirmed(meta) | _formatted_since(meta, result)
            row = rows.get(meta.ledger_id)
            if row is not None:
                # Keep what the row lists unless that bookie is back with the ledger's entries.
                missing |= {b for b in row.missing if b not in result.back or b in missing}
            self._record(meta.ledger_id, missing, row, now, result)
        for ledger_id, row in rows.items():
            named |= set(row.missing) & targets
            if ledger_id not in live_ids:
                self._drop(row)
        self.confirmed.forget_all_but(live_ids)
        return named

    def _confirmed(self, meta: LedgerMetadata) -> set[str]:
        """The bookies the checker found lacking that a checked segment of the ledger still
        names (one replaced everywhere, or left only in an open ledger's last segment, is done)."""
        return self.confirmed.still_named(meta.ledger_id, checked_bookies(meta))

    def _record(
        self,
        ledger_id: int,
        missing: set[str],
        row: UnderReplicatedLedger | None,
        now: int,
        result: AuditResult,
    ) -> None:
        listed = tuple(sorted(missing))
        try:
            if row is None:
                if listed:
                    self.store.put_underreplicated(UnderReplicatedLedger(ledger_id, listed, now))
                    result.marked += 1
            elif not listed and row.rotten:
                # Rotten copies stay listed until a worker rewrote them (`bookie.scrubber`).
                if row.missing:
                    self.store.put_underreplicated(replace(row, missing=()))
                    result.cleared += 1
            elif not listed:
                self.store.delete_underreplicated(row.ledger_id, row.version)
                log.info("auditor: ledger %d: its bookies %s are back", ledger_id, ", ".join(row.missing))
                result.cleared += 1
            elif listed != row.missing:
                self.store.put_underreplicated(replace(row, missing=listed))
                result.marked += 1
        except (BadVersionError, NotFoundError):
            pass  # a worker changed it meanwhile: the next pass looks again

    def _drop(self, row: UnderReplicatedLedger) -> None:
        with contextlib.suppress(BadVersionError, NotFoundError):  # a worker dropped it first
            self.store.delete_underreplicated(row.ledger_id, row.version)

    def _finish_decommissions(self, drained: set[str], result: AuditResult) -> None:
        for bookie_id in sorted(drained):
            try:
                self.store.set_bookie_state(
                    bookie_id, BookieState.DECOMMISSIONED, expect=BookieState.DECOMMISSIONING
                )
            except (NotFoundError, BadVersionError):
                continue  # gone, or an operator cancelled the decommission since this pass read it
            log.info("auditor: bookie %s is drained: decommissioned", bookie_id)
            result.decommissioned.append(bookie_id)


def _formatted_since(meta: LedgerMetadata, result: AuditResult) -> set[str]:
    """The bookies of a ledger formatted as new instances since they entered a segment of it, by
    the instance recorded in that segment (none recorded: not judged here)."""
    recorded = {(f, b): i for f, b, i in meta.instances}
    out: set[str] = set()
    for first, bookies in meta.history():
        for b in bookies:
            instance = recorded.get((first, b))
            if instance is not None and result.instances.get(b, instance) != instance:
                out.add(b)
    return out
