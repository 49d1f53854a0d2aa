"""Recovery workers (BookKeeper's ReplicationWorker): they give under-replicated ledgers their
copies back, on other bookies.

A worker claims one row of the under-replicated list (`bookie.recovery_store.claim`, a lease
renewed while it works) and then, for the ledger it names:

1. Skips it (dropping the row) when the ledger is gone or being deleted.
2. For a ledger that is not CLOSED, copies the segments before the last one without fencing
   (BookKeeper's ReplicationWorker on `openLedgerNoRecovery`): the writer starts a new segment
   at its LAC + 1, so their entries are acknowledged and fixed. Only when the last segment (the
   one the writer adds to) still names a listed bookie that is unavailable (not heartbeating
   as writable or read-only) once a grace period from when the auditor listed it has passed is
   the writer counted as gone, and the ledger fenced and closed through
   `LedgerManager.recover_and_close` (BookKeeper's isLastSegmentOpenAndMissingBookies). A writer
   that already replaced the lost bookie by an ensemble change is never fenced; until the grace
   has passed, or while the last segment's listed bookie is up, the row is held back and looked
   at again later.
3. For each lost bookie and each segment of the ledger's ensemble history that names it: picks
   a replacement (live, writable, not in that segment, not lost), copies every entry of the
   segment whose write set includes the lost bookie from a surviving replica to the replacement,
   and only then swaps the replacement in by compare-and-set (`LedgerManager.replace_bookie`),
   once every copy is acknowledged (fsynced) by the replacement. The metadata never names a
   bookie for entries it does not hold.
4. Rewrites the row's rotten copies in place from a good copy (`bookie.rot_repair`; listed by
   a bookie's scrub, `bookie.scrubber`); a holder that is down holds the row back.
5. Deletes the row by CAS on the version it read: a row the auditor grew meanwhile stays for
   the next round.

The copy is a stream, not a loop of single entries. In a segment of E bookies entry e goes to
the write set starting at position e mod E, so the entries to copy fall into at most Qw runs
(every E-th entry, one run per write set naming the lost bookie), and a survivor of a run's
write set holds the whole run. The segment is copied window by window of entry ids: in each,
every run is read from its own survivor with one strided READ_RANGE (the runs side by side),
the answers are merged back into entry order, and the entries go into one window of recovery
adds pipelined on the replacement's connection, bounded in count and bytes
(`bookie.replica_io.RecoveryAdds`), while the next window is being read. Only an entry a range
read cannot give (the source failed, or lacks it) is read on its own, from whichever replica has
it; a source that failed is asked last from then on. Several claimed ledgers are worked on at
once (`ledgers_in_flight`).

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
from collections.abc import Callable, Coroutine
from dataclasses import dataclass, replace
from typing import Any, TypeVar

from bookie.errors import BookieError
from bookie.ledger_metadata import BadVersionError, LedgerMetadata, LedgerState, NotFoundError
from bookie.ledgers import LedgerManager, ledger_spec
from bookie.metadata_calls import call_store
from bookie.recovery_store import RecoveryStore, UnderReplicatedLedger, claim, claimable
from bookie.registry import BookieRegistry, BookieState, NotEnoughBookiesError, wall_clock_ms
from bookie.replica_io import NOT_THERE, ReplicaIO
from bookie.rot_repair import rewrite_rotten, rotten_to_repair
from common.errors import ErrorKind, QuireError

log = logging.getLogger(__name__)
T = TypeVar("T")
_UP = (BookieState.WRITABLE, BookieState.READ_ONLY)


@dataclass(frozen=True, slots=True)
class WorkerConfig:
    worker_id: str
    claim_ms: int = 30_000
    open_ledger_grace_ms: int = 30_000
    # Recovery adds unanswered on the replacement, at most: with `ledgers_in_flight` windows on one
    # connection, under the bookie's per-connection limit (10,000), past which it stops reading
    # that connection -- the one range reads from that bookie share.
    copies_in_flight: int = 2_048
    copy_window_bytes: int = 8 * 1024 * 1024  # and their payload bytes
    read_chunk_bytes: int = 2 * 1024 * 1024  # reply size asked for by one range read
    read_chunk_entries: int = 1_024  # entries of one write set read per window
    ledgers_in_flight: int = 4  # claimed ledgers re-replicated side by side by `run_pass`


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
    """Re-replicates claimed ledgers; `run_once` calls may run concurrently (each works on a
    ledger of its own: the claims are kept by ledger id)."""

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
        # The claimed rows, as last written, by ledger id; a ledger leaves when its claim is gone.
        self._rows: dict[int, UnderReplicatedLedger] = {}
        self._working: set[int] = set()

    async def run_pass(self) -> int:
        """Re-replicate claimable ledgers, `ledgers_in_flight` at a time, until none is left;
        returns how many were claimed."""
        done = 0

        async def lane() -> None:
            nonlocal done
            while await self.run_once():
                done += 1

        await asyncio.gather(*(lane() for _ in range(max(1, self.config.ledgers_in_flight))))
        return done

    async def run_once(self) -> bool:
        """Claim one under-replicated ledger and re-replicate it; False when none was claimable."""
        now = self._clock_ms()
        for row in await call_store(self.store.list_underreplicated):
            if row.ledger_id in self._working or not claimable(row, now):
                continue
            self._working.add(row.ledger_id)
            try:
                claimed = await call_store(
                    claim, self.store, row, self.config.worker_id, now, self.config.claim_ms
                )
                if claimed is None:
                    continue
                await self._work(claimed)
            finally:
                self._working.discard(row.ledger_id)
            return True
        return False

    async def _work(self, claimed: UnderReplicatedLedger) -> None:
        ledger_id = claimed.ledger_id
        self._rows[ledger_id] = claimed
        renewer = asyncio.get_running_loop().create_task(self._renew_claim(ledger_id))
        try:
            await self._recover(ledger_id)
        except (
            ClaimLostError,
            UnrecoverableEntryError,
            BookieError,
            NotEnoughBookiesError,
            NotFoundError,
        ) as exc:
            log.warning("re-replication of ledger %d stopped: %s", ledger_id, exc)
        finally:
            renewer.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await renewer
            self._rows.pop(ledger_id, None)

    async def _renew_claim(self, ledger_id: int) -> None:
        """Push the claim out every third of its length. A row the auditor grew keeps our claim
        (only its version moved): adopt it. Any other change means the claim is gone."""
        while True:
            await asyncio.sleep(self.config.claim_ms / 3 / 1000)
            row = self._rows.get(ledger_id)
            if row is None:
                return
            try:
                renewed = await call_store(
                    claim, self.store, row, self.config.worker_id, self._clock_ms(), self.config.claim_ms
                )
                if renewed is None:
                    current = await call_store(self.store.get_underreplicated, ledger_id)
                    if current is None or current.claimed_by != self.config.worker_id:
                        self._rows.pop(ledger_id, None)
                        return
                    renewed = current
                if ledger_id in self._rows:
                    self._rows[ledger_id] = renewed
            except Exception:  # the store is unreachable for now: the next beat tries again
                log.exception("could not renew the claim on ledger %d", ledger_id)

    def _current_row(self, ledger_id: int) -> UnderReplicatedLedger:
        row = self._rows.get(ledger_id)
        if row is None:
            raise ClaimLostError("this worker's claim was taken over")
        return row

    async def _recover(self, ledger_id: int) -> None:
        """Re-replicate the claimed ledger; a ledger deleted before or during it is dropped."""
        try:
            await self._recover_ledger(ledger_id)
        except (NotFoundError, UnrecoverableEntryError):
            if await self._ledger_exists(ledger_id):
                raise
            await self._drop_row(ledger_id)

    async def _ledger_exists(self, ledger_id: int) -> bool:
        try:
            await self.ledgers.get(ledger_id)
        except NotFoundError:
            return False
        return True

    async def _recover_ledger(self, ledger_id: int) -> None:
        meta = await self.ledgers.get(ledger_id)
        while True:
            missing = self._current_row(ledger_id).missing
            for lost in missing:
                meta = await self._replace_everywhere(meta, lost)
            if meta.state != LedgerState.CLOSED and set(meta.history()[-1][1]) & set(missing):
                # The writer's own segment still names a listed bookie: that one is fenced only
                # when the writer had its grace and the bookie is still unavailable.
                if not await self._fence_due(ledger_id, meta):
                    return
                meta = await self.ledgers.recover_and_close(ledger_id)
                continue
            if not await self._repair_rotten(meta):
                return
            if await self._drop_row(ledger_id):
                self.counters.ledgers_recovered += 1
                return
            meta = await self.ledgers.get(ledger_id)  # the auditor grew the row: once more

    async def _repair_rotten(self, meta: LedgerMetadata) -> bool:
        """Rewrite the row's rotten copies in place (`bookie.rot_repair`); False (the row held
        back for a grace period) when a holder is not up: it is repaired once back, or the
        auditor lists it lost and its segments move."""
        todo = rotten_to_repair(meta, self._current_row(meta.ledger_id).rotten)
        if not todo:
            return True
        up = {s.bookie_id for s in await call_store(self.registry.all_bookies) if s.state in _UP}
        for bookie, entry_ids in sorted(todo.items()):
            if bookie in up:
                self._current_row(meta.ledger_id)  # stop once the claim is gone
                await rewrite_rotten(self.io, meta, bookie, entry_ids, self._read_one, self._count_copy,
                                     self.config.copies_in_flight, self.config.copy_window_bytes)  # fmt: skip
                log.info("ledger %d: rotten copies %s rewritten on %s", meta.ledger_id, entry_ids, bookie)
        if set(todo) <= up:
            return True
        await self._defer(meta.ledger_id, self._clock_ms() + self.config.open_ledger_grace_ms)
        return False

    async def _fence_due(self, ledger_id: int, meta: LedgerMetadata) -> bool:
        """Whether the open ledger must be fenced and closed now (BookKeeper's
        isLastSegmentOpenAndMissingBookies after the grace); if not, the row is held back.

        A bookie that heartbeats as writable or read-only is up (the checker listed it for a
        closed segment it lacks): the writer's segment on it is served, and nothing is fenced;
        the row is held until the writer closes the ledger or the auditor drops the row."""
        row = self._current_row(ledger_id)
        now = self._clock_ms()
        until = row.marked_ms + self.config.open_ledger_grace_ms
        up = {s.bookie_id for s in await call_store(self.registry.all_bookies) if s.state in _UP}
        unavailable = set(meta.history()[-1][1]) & set(row.missing) - up
        # An IN_RECOVERY ledger has no writer left to spare (it is fenced already): finish it.
        if now >= until and (unavailable or meta.state == LedgerState.IN_RECOVERY):
            return True
        await self._defer(ledger_id, until if now < until else now + self.config.open_ledger_grace_ms)
        return False

    async def _replace_everywhere(self, meta: LedgerMetadata, lost: str) -> LedgerMetadata:
        """Replace `lost` in every segment that names it; returns the ledger as it is after.

        Of a ledger that is not CLOSED only the segments before the last are copied, without
        fencing (BookKeeper's openLedgerNoRecovery): the writer starts a segment at its LAC + 1,
        so every entry before the last segment is acknowledged and fixed, while the last one is
        still being written."""
        ledger_id = meta.ledger_id
        while True:
            history = meta.history()
            closed = len(history) if meta.state == LedgerState.CLOSED else len(history) - 1
            todo = [i for i, (_, bookies) in enumerate(history[:closed]) if lost in bookies]
            if not todo:
                return meta
            index = todo[0]
            first, bookies = history[index]
            last = history[index + 1][0] - 1 if index + 1 < len(history) else meta.last_entry_id
            if meta.state == LedgerState.CLOSED:
                last = min(last, meta.last_entry_id)
            exclude = set(bookies) | set(self._current_row(ledger_id).missing)
            (replacement,) = await call_store(self.registry.choose_ensemble, 1, exclude)
            await self._copy_segment(meta, first, last, lost, replacement)
            self._current_row(ledger_id)  # do not touch the metadata once the claim is gone
            try:
                meta = await self.ledgers.replace_bookie(ledger_id, first, lost, replacement)
            except BadVersionError:
                meta = await self.ledgers.get(ledger_id)  # someone moved it: look again
                continue
            self.counters.ensemble_changes += 1
            log.info(
                "ledger %d: segment at entry %d now on %s instead of %s", ledger_id, first, replacement, lost
            )

    async def _copy_segment(
        self, meta: LedgerMetadata, first: int, last: int, lost: str, replacement: str
    ) -> None:
        """Copy the segment's entries whose write set names `lost` to `replacement`, window by
        window of entry ids (the next window read while this one is sent); returns once every
        copy is durable there."""
        if last < first:
            return
        spec = ledger_spec(meta)
        missing = set(self._current_row(meta.ledger_id).missing)
        stride = len(spec.ensemble_at(first))
        runs = [
            _Run(offset, self._sources(spec.write_set(first + offset), lost, missing))
            for offset in range(min(stride, last - first + 1))
            if lost in spec.write_set(first + offset)
        ]
        if not runs:  # a segment shorter than its ensemble may write no entry to `lost`
            return
        adds = await self.io.recovery_adds(
            replacement,
            meta.ledger_id,
            meta.last_entry_id if meta.state == LedgerState.CLOSED else last,
            self.config.copies_in_flight,
            self.config.copy_window_bytes,
            self._count_copy,
        )
        span = stride * max(1, self.config.read_chunk_entries)
        starts = range(first, last + 1, span)
        ahead: asyncio.Task[tuple[list[int], list[bytes]]] | None = None
        try:
            for start in starts:
                self._current_row(meta.ledger_id)  # stop once the claim is gone
                if ahead is None:
                    ahead = _task(self._read_window(meta, runs, start, min(start + span - 1, last), stride))
                ids, payloads = await ahead
                ahead = None
                following = start + span
                if following <= last:
                    window = self._read_window(meta, runs, following, min(following + span - 1, last), stride)
                    ahead = _task(window)
                await adds.add_all(ids, payloads)
        finally:
            if ahead is not None:
                ahead.cancel()
        await adds.drain()

    async def _read_window(
        self, meta: LedgerMetadata, runs: list[_Run], start: int, end: int, stride: int
    ) -> tuple[list[int], list[bytes]]:
        """The entries of every run between `start` and `end`, each run read from its own source
        at once, merged in entry id order: the replacement then takes each ledger's entries in
        ascending order, which spares it a look-up for an entry below the last it holds."""
        wanted = [range(start + run.offset, end + 1, stride) for run in runs]
        parts = await _all([self._read_run(meta, run, ids) for run, ids in zip(runs, wanted, strict=True)])
        if len(parts) == 1:
            return list(wanted[0]), parts[0]
        order = sorted(range(len(runs)), key=lambda k: runs[k].offset)
        ids: list[int] = []
        payloads: list[bytes] = []
        for j in range(len(wanted[order[0]])):
            for k in order:
                if j < len(parts[k]):
                    ids.append(wanted[k][j])
                    payloads.append(parts[k][j])
        return ids, payloads

    async def _read_run(self, meta: LedgerMetadata, run: _Run, ids: range) -> list[bytes]:
        """Entries `ids` (every E-th) by range reads from the run's first source; an entry a
        range read cannot give is read on its own from any source, and a source that failed
        (rather than lacked an entry) is asked last from then on."""
        out: list[bytes] = []
        while len(out) < len(ids):
            pos = len(out)
            try:
                out += await self.io.read_range(
                    run.sources[0], meta.ledger_id, ids[pos:], self.config.read_chunk_bytes
                )
            except BookieError as exc:
                if exc.code not in NOT_THERE:
                    run.sources = [*run.sources[1:], run.sources[0]]
                out.append(await self._read_one(meta, ids[pos], run.sources))
        return out

    def _count_copy(self, size: int) -> None:
        self.counters.recovered_entries += 1
        self.counters.recovery_bytes += size

    @staticmethod
    def _sources(write_set: tuple[str, ...], lost: str, missing: set[str]) -> list[str]:
        """Survivors first; the lost bookie itself last (a decommissioning one still answers)."""
        ordered = [b for b in write_set if b not in missing]
        ordered += [b for b in write_set if b in missing and b != lost] + [lost]
        return ordered

    async def _read_one(self, meta: LedgerMetadata, entry_id: int, sources: list[str]) -> bytes:
        errors: list[str] = []
        for source in sources:
            try:
                payload = await self.io.read_entry(source, meta.ledger_id, entry_id)
            except BookieError as exc:
                errors.append(f"{source}: {exc}")
                continue
            if payload is not None:
                return payload
            errors.append(f"{source}: no such entry")
        raise UnrecoverableEntryError(
            f"ledger {meta.ledger_id} entry {entry_id}: no replica could be read ({'; '.join(errors)})"
        )

    async def _drop_row(self, ledger_id: int) -> bool:
        """Delete the claimed row by CAS; False when the auditor grew it (we adopt the new one)."""
        row = self._current_row(ledger_id)
        try:
            await call_store(self.store.delete_underreplicated, row.ledger_id, row.version)
            return True
        except NotFoundError:
            return True
        except BadVersionError:
            current = await call_store(self.store.get_underreplicated, row.ledger_id)
            if current is None:
                return True
            if current.claimed_by != self.config.worker_id:
                raise ClaimLostError(f"ledger {row.ledger_id} was claimed by {current.claimed_by}") from None
            self._rows[ledger_id] = current
            return False

    async def _defer(self, ledger_id: int, until_ms: int) -> None:
        """Hold the row until `until_ms`, so no worker (this one included) takes it before."""
        row = self._current_row(ledger_id)
        with contextlib.suppress(BadVersionError, NotFoundError):
            self._rows[ledger_id] = await call_store(
                self.store.put_underreplicated, replace(row, claim_expires_ms=until_ms)
            )


@dataclass(slots=True)
class _Run:
    """The entries of a segment at `offset` + k * E: one write set, read from `sources[0]`."""

    offset: int
    sources: list[str]


async def _all(coros: list[Coroutine[None, None, T]]) -> list[T]:
    """Run them side by side; the first failure cancels the others and is raised."""
    tasks = [asyncio.get_running_loop().create_task(c) for c in coros]
    try:
        return await asyncio.gather(*tasks)
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)


def _task(coro: Coroutine[None, None, T]) -> asyncio.Task[T]:
    """A read ahead; one whose answer nobody awaits (the copy stopped) must not log as lost."""
    task = asyncio.get_running_loop().create_task(coro)
    task.add_done_callback(_retrieve)
    return task


def _retrieve(task: asyncio.Task[Any]) -> None:
    if not task.cancelled():
        task.exception()
