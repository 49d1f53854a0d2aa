"""Recovery workers (BookKeeper's ReplicationWorker): they give under-replicated ledgers their
copies back, on other bookies.

A worker claims one row of the under-replicated list (`bookie.recovery_store.claim`, a lease
renewed while it works) and then, for the ledger it names:

1. Skips it (dropping the row) when the ledger is gone or being deleted.
2. Closes it first when it is not CLOSED: an OPEN ledger is left to its writer for a grace
   period from when the auditor listed it (the writer may still close it, or replace the bookie
   itself); after that the writer counts as gone and the ledger is fenced and closed through
   `LedgerManager.recover_and_close`, so no entry can be added behind the copy's back.
3. For each lost bookie and each segment of the ledger's ensemble history that names it: picks
   a replacement (live, writable, not in that segment, not lost), copies every entry of the
   segment whose write set includes the lost bookie from a surviving replica to the replacement
   (many in flight, each fsynced there before it counts), and only then swaps the replacement in
   by compare-and-set (`LedgerManager.replace_bookie`). The metadata never names a bookie for
   entries it does not hold.
4. Deletes the row by CAS on the version it read: a row the auditor grew meanwhile stays for
   the next round.

A crash at any step loses nothing: the metadata still names the surviving replicas, the row
stays, and its claim lapses so another worker takes it. A copy the crash interrupted is done
again (a re-added entry with the same bytes is a no-op); the copies it had made on a replacement
that the next worker does not choose are left there as garbage, as in BookKeeper. An entry no
surviving replica holds cannot be copied: the worker logs it and leaves the row (and its claim,
until it lapses), so the ledger stays listed as under-replicated for an operator to see.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable
from dataclasses import dataclass, replace

from bookie.errors import BookieError
from bookie.ledger_metadata import BadVersionError, LedgerMetadata, LedgerState, NotFoundError
from bookie.ledgers import LedgerManager, call_blocking, ledger_spec
from bookie.recovery_store import RecoveryStore, UnderReplicatedLedger, claim, claimable
from bookie.registry import BookieRegistry, NotEnoughBookiesError, wall_clock_ms
from bookie.replica_io import ReplicaIO
from common.errors import ErrorKind, QuireError

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class WorkerConfig:
    worker_id: str
    claim_ms: int = 30_000
    open_ledger_grace_ms: int = 30_000
    copies_in_flight: int = 64


@dataclass(slots=True)
class RecoveryCounters:
    """What this worker did since it started (the process exports them as Prometheus counters)."""

    ensemble_changes: int = 0
    recovered_entries: int = 0
    recovery_bytes: int = 0
    ledgers_recovered: int = 0


class UnrecoverableEntryError(QuireError):
    """No surviving replica holds an entry that the segment being re-replicated should have."""

    kind = ErrorKind.unavailable
    title = "No replica of an entry"


class ClaimLostError(QuireError):
    """Another worker took the row (this one's claim lapsed): stop without writing anything."""

    kind = ErrorKind.conflict
    title = "Recovery claim lost"


class ReplicationWorker:
    def __init__(
        self,
        store: RecoveryStore,
        ledgers: LedgerManager,
        registry: BookieRegistry,
        io: ReplicaIO,
        config: WorkerConfig,
        clock_ms: Callable[[], int] = wall_clock_ms,
    ) -> None:
        self.store = store
        self.ledgers = ledgers
        self.registry = registry
        self.io = io
        self.config = config
        self.counters = RecoveryCounters()
        self._clock_ms = clock_ms
        self._row: UnderReplicatedLedger | None = None  # the claimed row, as last written

    async def run_once(self) -> bool:
        """Claim one under-replicated ledger and re-replicate it; False when none was claimable."""
        now = self._clock_ms()
        for row in await call_blocking(self.store.list_underreplicated):
            if not claimable(row, now):
                continue
            claimed = await call_blocking(
                claim, self.store, row, self.config.worker_id, now, self.config.claim_ms
            )
            if claimed is None:
                continue
            self._row = claimed
            renewer = asyncio.get_running_loop().create_task(self._renew_claim())
            try:
                await self._recover(claimed.ledger_id)
            except (
                ClaimLostError,
                UnrecoverableEntryError,
                BookieError,
                NotEnoughBookiesError,
                NotFoundError,
            ) as exc:
                log.warning("re-replication of ledger %d stopped: %s", claimed.ledger_id, exc)
            finally:
                renewer.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await renewer
                self._row = None
            return True
        return False

    async def _renew_claim(self) -> None:
        """Push the claim out every third of its length. A row the auditor grew keeps our claim
        (only its version moved): adopt it. Any other change means the claim is gone."""
        while True:
            await asyncio.sleep(self.config.claim_ms / 3 / 1000)
            row = self._row
            if row is None:
                return
            try:
                renewed = await call_blocking(
                    claim, self.store, row, self.config.worker_id, self._clock_ms(), self.config.claim_ms
                )
                if renewed is None:
                    current = await call_blocking(self.store.get_underreplicated, row.ledger_id)
                    if current is None or current.claimed_by != self.config.worker_id:
                        self._row = None
                        return
                    renewed = current
                self._row = renewed
            except Exception:  # the store is unreachable for now: the next beat tries again
                log.exception("could not renew the claim on ledger %d", row.ledger_id)

    def _current_row(self) -> UnderReplicatedLedger:
        if self._row is None:
            raise ClaimLostError("this worker's claim was taken over")
        return self._row

    async def _recover(self, ledger_id: int) -> None:
        """Re-replicate the claimed ledger; a ledger deleted before or during it is dropped."""
        try:
            await self._recover_ledger(ledger_id)
        except (NotFoundError, UnrecoverableEntryError):
            if await self._ledger_exists(ledger_id):
                raise
            await self._drop_row()

    async def _ledger_exists(self, ledger_id: int) -> bool:
        try:
            await self.ledgers.get(ledger_id)
        except NotFoundError:
            return False
        return True

    async def _recover_ledger(self, ledger_id: int) -> None:
        meta = await self.ledgers.get(ledger_id)
        if meta.state != LedgerState.CLOSED:
            row = self._current_row()
            until = row.marked_ms + self.config.open_ledger_grace_ms
            if self._clock_ms() < until:
                await self._defer(until)  # its writer may still be at work: look again then
                return
            meta = await self.ledgers.recover_and_close(ledger_id)
        while True:
            for lost in self._current_row().missing:
                meta = await self._replace_everywhere(meta, lost)
            if await self._drop_row():
                self.counters.ledgers_recovered += 1
                return
            meta = await self.ledgers.get(ledger_id)  # the auditor grew the row: once more

    async def _replace_everywhere(self, meta: LedgerMetadata, lost: str) -> LedgerMetadata:
        """Replace `lost` in every segment that names it; returns the ledger as it is after."""
        while True:
            history = meta.history()
            todo = [i for i, (_, bookies) in enumerate(history) if lost in bookies]
            if not todo:
                return meta
            index = todo[0]
            first, bookies = history[index]
            last = history[index + 1][0] - 1 if index + 1 < len(history) else meta.last_entry_id
            exclude = set(bookies) | set(self._current_row().missing)
            (replacement,) = await call_blocking(self.registry.choose_ensemble, 1, exclude)
            await self._copy_segment(meta, first, min(last, meta.last_entry_id), lost, replacement)
            self._current_row()  # do not touch the metadata once the claim is gone
            try:
                meta = await self.ledgers.replace_bookie(meta.ledger_id, first, lost, replacement)
            except BadVersionError:
                meta = await self.ledgers.get(meta.ledger_id)  # someone moved it: look again
                continue
            self.counters.ensemble_changes += 1
            log.info(
                "ledger %d: segment at entry %d now on %s instead of %s",
                meta.ledger_id,
                first,
                replacement,
                lost,
            )

    async def _copy_segment(
        self, meta: LedgerMetadata, first: int, last: int, lost: str, replacement: str
    ) -> None:
        spec = ledger_spec(meta)
        missing = set(self._current_row().missing)
        wanted = [e for e in range(first, last + 1) if lost in spec.write_set(e)]
        width = self.config.copies_in_flight
        for start in range(0, len(wanted), width):
            self._current_row()
            batch = wanted[start : start + width]
            sources = [self._sources(spec.write_set(e), lost, missing) for e in batch]
            await asyncio.gather(
                *(self._copy_entry(meta, e, src, replacement) for e, src in zip(batch, sources, strict=True))
            )

    @staticmethod
    def _sources(write_set: tuple[str, ...], lost: str, missing: set[str]) -> list[str]:
        """Survivors first; the lost bookie itself last (a decommissioning one still answers)."""
        ordered = [b for b in write_set if b not in missing]
        ordered += [b for b in write_set if b in missing and b != lost] + [lost]
        return ordered

    async def _copy_entry(self, meta: LedgerMetadata, entry_id: int, sources: list[str], target: str) -> None:
        errors: list[str] = []
        for source in sources:
            try:
                payload = await self.io.read_entry(source, meta.ledger_id, entry_id)
            except BookieError as exc:
                errors.append(f"{source}: {exc}")
                continue
            if payload is None:
                errors.append(f"{source}: no such entry")
                continue
            await self.io.recovery_add(target, meta.ledger_id, entry_id, meta.last_entry_id, payload)
            self.counters.recovered_entries += 1
            self.counters.recovery_bytes += len(payload)
            return
        raise UnrecoverableEntryError(
            f"ledger {meta.ledger_id} entry {entry_id}: no replica could be read ({'; '.join(errors)})"
        )

    async def _drop_row(self) -> bool:
        """Delete the claimed row by CAS; False when the auditor grew it (we adopt the new one)."""
        row = self._current_row()
        try:
            await call_blocking(self.store.delete_underreplicated, row.ledger_id, row.version)
            return True
        except NotFoundError:
            return True
        except BadVersionError:
            current = await call_blocking(self.store.get_underreplicated, row.ledger_id)
            if current is None:
                return True
            if current.claimed_by != self.config.worker_id:
                raise ClaimLostError(f"ledger {row.ledger_id} was claimed by {current.claimed_by}") from None
            self._row = current
            return False

    async def _defer(self, until_ms: int) -> None:
        """Hold the row until `until_ms`, so no worker (this one included) takes it before."""
        row = self._current_row()
        with contextlib.suppress(BadVersionError, NotFoundError):
            self._row = await call_blocking(
                self.store.put_underreplicated, replace(row, claim_expires_ms=until_ms)
            )
