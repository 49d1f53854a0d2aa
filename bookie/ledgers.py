"""The ledger lifecycle in one place (BookKeeper's LedgerManager plus LedgerHandle).

Every ledger is created, closed, recovered and deleted here, and its `LedgerSpec` is built from
its metadata here (`ledger_spec`), so the rules below are written once:

- Create: the metadata row first (OPEN; its id comes from the store's sequence), then the
  bookie writer. A crash in between leaves an OPEN row with no entries, which costs one row and
  misleads nobody: a row never names data that is not there. If the writer cannot be started
  the row is deleted again at once.
- Placement and ensemble change: a new ledger's ensemble comes from the placement policy (the
  bookie registry in a broker or compactor, a static list otherwise). Its writer gets a
  `_BookieReplacer`: when a bookie fails, it picks a replacement from the same policy and
  records the new segment of the ensemble history by compare-and-set (`change_ensemble`) before
  the writer acknowledges any entry of it. `replace_bookie` swaps a bookie of one segment for
  another that holds a copy of its entries (re-replication).
- Close: the writer's close waits for the adds in flight; then one compare-and-set makes the
  row CLOSED with the last entry id, the length in bytes and the closing time. A handle whose
  adds failed is closed through recovery instead.
- Recover and close: the row goes IN_RECOVERY, the bookies fence the ledger (its old writer can
  add no more) and find its last entry, its bytes are counted by reading it, and the row becomes
  CLOSED. On a ledger that is already CLOSED it only returns the row. The bookies recovery puts
  in place of unreachable ones stay in memory until that closing compare-and-set, which records
  them with the CLOSED state (BookKeeper's `closeRecovered`): a recovery that fails leaves the
  row as it found it, so no later recovery asks a replacement that never held the entries.
- Delete: the metadata is the truth, so it must never point at bookie data that is gone. The
  row is first marked DELETING (from then on nothing reads the ledger), then the bookies delete
  the entries, then the row is deleted. A crash after the mark leaves a DELETING row and maybe
  some bookie data; `finish_deletions` (run by the managed ledger factory when it starts, and
  safe to run anywhere, any number of times) finishes every such row. Both steps after the
  mark are idempotent, so finishing twice is harmless. A bookie that cannot delete (down, hung,
  or failing) does not hold the deletion up: the row is deleted all the same, and that bookie
  deletes its copy itself when it is back, by comparing what it holds with the metadata
  (`bookie.ledger_gc`, as BookKeeper's bookies do). A deletion that waited for every bookie
  would wait for ever on one that is gone for good, and with it whatever waits for the deletion.

The metadata store is synchronous; every call into it goes through `bookie.metadata_calls`.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import replace
from typing import Protocol

from bookie.api import LedgerClient, LedgerWriter, read_ranges
from bookie.errors import BookieError, FencedError, NoSuchLedgerError, ShortOfQuorumError
from bookie.ledger_metadata import (
    BadVersionError,
    LedgerMetadata,
    LedgerMetadataStore,
    LedgerState,
    NotFoundError,
    recorded_instances,
)
from bookie.metadata_calls import call_store
from bookie.registry import BookieCookie, NotEnoughBookiesError
from bookie.types import LedgerSpec, Segment, normalize_history
from common.clock import wall_clock_ms

READ_CHUNK = 1_000  # entries per read when recovery counts a ledger's bytes
CAS_ATTEMPTS = 5  # tries of a metadata change that re-reads the row after a lost race


class LedgerCounters:
    """What this process's ledger writers did, for its metrics (one process, many managers)."""

    ensemble_changes = 0


COUNTERS = LedgerCounters()
MAX_RECOVERY_CHANGES = 4  # ensemble changes one recovery may make before it gives up
log = logging.getLogger(__name__)


class EnsemblePlacement(Protocol):
    """Where new ledgers (and replacement bookies) go: `bookie.registry.BookieRegistry` in a
    process that has a registry, `StaticPlacement` otherwise. Synchronous (it may ask the
    metadata store); the manager calls it off the event loop."""

    def choose_ensemble(self, ensemble_size: int, exclude: Iterable[str] = ()) -> tuple[str, ...]:
        """`ensemble_size` distinct bookies not in `exclude`, or NotEnoughBookiesError."""
        ...

    def serving_bookies(self) -> tuple[str, ...]:
        """The bookies that may serve ledgers now (readiness probes these): the registry's live
        bookies, or the fixed list."""
        ...


class StaticPlacement:
    """A fixed list of bookies (tests, benchmarks, the in-memory client): each ledger takes
    `ensemble_size` of them from a rotating start, so ledgers spread over the list; whether a
    bookie is up is not known here (a dead one is found by the writer, which replaces it)."""

    def __init__(self, bookies: Sequence[str]) -> None:
        self.bookies = tuple(dict.fromkeys(bookies))
        self._next = 0

    def serving_bookies(self) -> tuple[str, ...]:
        return self.bookies

    def choose_ensemble(self, ensemble_size: int, exclude: Iterable[str] = ()) -> tuple[str, ...]:
        excluded = set(exclude)
        candidates = [b for b in self.bookies if b not in excluded]
        if len(candidates) < ensemble_size:
            raise NotEnoughBookiesError(
                f"need {ensemble_size} bookies, {len(candidates)} configured"
                + (f" (excluding {sorted(excluded)})" if excluded else "")
            )
        start = self._next % len(candidates)
        self._next += 1
        return tuple(candidates[(start + i) % len(candidates)] for i in range(ensemble_size))


class LedgerPlacement(Protocol):
    """Where a ledger lives: what `LedgerMetadata` (and a compactor read range) carry."""

    @property
    def ledger_id(self) -> int: ...

    @property
    def ensemble(self) -> Sequence[str]: ...

    @property
    def write_quorum(self) -> int: ...

    @property
    def ack_quorum(self) -> int: ...

    @property
    def ensembles(self) -> Sequence[Segment]:
        """The ensemble history; empty means the first ensemble from entry 0."""
        ...


def with_segment(
    meta: LedgerMetadata,
    first_entry_id: int,
    new_bookies: Sequence[str],
    entered: Mapping[str, str | None] | None = None,
) -> LedgerMetadata:
    """`meta` with a new last segment from `first_entry_id` (replacing a last segment that starts
    there: none of its entries was acknowledged); ValueError for one before the last segment.
    The bookies kept from the last segment keep their recorded instance ids; `entered` gives
    those of the new ones."""
    history = meta.history()
    if first_entry_id < history[-1][0]:
        raise ValueError(
            f"ledger {meta.ledger_id}: new segment at entry {first_entry_id} is before the last "
            f"one at {history[-1][0]}"
        )
    kept = tuple(s for s in history if s[0] < first_entry_id)
    segments = (*kept, (first_entry_id, tuple(new_bookies)))
    ensemble = meta.ensemble if kept else tuple(new_bookies)
    carried = meta.segment_instances(history[-1][0])
    known = {b: (entered or {}).get(b, carried.get(b)) for b in new_bookies}
    instances = recorded_instances(meta.instances, first_entry_id, known)
    return replace(
        meta, ensemble=ensemble, ensembles=normalize_history(ensemble, segments), instances=instances
    )


def ledger_spec(placement: LedgerPlacement) -> LedgerSpec:
    """The one conversion from ledger metadata to what the ledger client needs."""
    return LedgerSpec(
        placement.ledger_id,
        tuple(placement.ensemble),
        placement.write_quorum,
        placement.ack_quorum,
        normalize_history(placement.ensemble, placement.ensembles),
    )


class LedgerHandle:
    """The writer of a ledger created by `LedgerManager.create`, with its metadata and the
    length of its entries (which the manager records when it closes it)."""

    def __init__(self, metadata: LedgerMetadata, writer: LedgerWriter) -> None:
        self.metadata = metadata
        self.writer = writer
        self.length_bytes = 0
        self._failed: BookieError | None = None

    @property
    def ledger_id(self) -> int:
        return self.metadata.ledger_id

    @property
    def spec(self) -> LedgerSpec:
        return self.writer.spec

    @property
    def last_add_confirmed(self) -> int:
        return self.writer.last_add_confirmed

    @property
    def failed(self) -> BookieError | None:
        """Why this ledger must be closed through recovery: the writer's own failure, or an add
        failure a caller reported (`failed = exc`), or None."""
        return self._failed or self.writer.failure

    @failed.setter
    def failed(self, exc: BookieError | None) -> None:
        if self._failed is None:
            self._failed = exc

    def add_entry(self, payload: bytes) -> Awaitable[int]:
        """As `LedgerWriter.add_entry` (no coroutine of its own: this is the hot path).

        A writer that fails remembers it (`failure`), so closing recovers; a caller that sees an
        add fail for a reason the writer does not know sets `failed`. The length counts an entry
        when it is handed to the writer, not when it is acknowledged: the writer's close returns
        once every add has settled, possibly before the tasks that await those adds resume.
        Without a failure every entry handed over is in the ledger; after one, closing recovers
        and counts the bytes on the bookies instead."""
        self.length_bytes += len(payload)
        return self.writer.add_entry(payload)


class _BookieReplacer:
    """A writer's ensemble change (`bookie.api.EnsembleChanger`): replacements from the placement
    policy (live writable bookies outside the ensemble and outside every bookie that failed for
    this writer), the new segment recorded by compare-and-set, the handle's metadata updated."""

    def __init__(self, manager: LedgerManager, ledger_id: int) -> None:
        self._manager = manager
        self._ledger_id = ledger_id
        self.handle: LedgerHandle | None = None

    async def __call__(
        self, first_entry_id: int, ensemble: tuple[str, ...], failed: frozenset[str]
    ) -> tuple[str, ...]:
        exclude = set(ensemble) | set(failed)
        new = await call_store(self._manager.replaced, ensemble, failed, exclude)
        entered = await self._manager.instances(b for b in new if b not in ensemble)
        meta = await self._manager.change_ensemble(self._ledger_id, first_entry_id, new, entered)
        if self.handle is not None:
            self.handle.metadata = meta
        return new


class LedgerManager:
    """Creates, closes, recovers and deletes ledgers: metadata rows and bookie data together.

    Raises the metadata store's errors (`bookie.ledger_metadata`) and the client's
    `BookieError`s unchanged; callers translate them into their own layer's errors.
    """

    def __init__(
        self,
        store: LedgerMetadataStore,
        client: LedgerClient,
        *,
        clock: Callable[[], int] = wall_clock_ms,
        placement: EnsemblePlacement | None = None,
        cookies: Callable[[str], BookieCookie | None] | None = None,
    ) -> None:
        """`cookies`: the store's bookie cookies (`BookieDirectory.get_bookie_cookie`), so that
        recovery can tell a bookie formatted since the ledger was made; None: it cannot."""
        self._store = store
        self._client = client
        self._clock = clock
        self.placement = placement or StaticPlacement(())
        self._cookies = cookies

    async def create(
        self,
        ensemble_size: int = 1,
        write_quorum: int = 1,
        ack_quorum: int = 1,
        *,
        ensemble: Sequence[str] | None = None,
    ) -> LedgerHandle:
        """A new OPEN ledger and its writer: the metadata row first, then the writer.

        The ensemble comes from the placement policy unless the caller names one. Raises
        NotEnoughBookiesError when the policy has too few bookies."""
        size = len(ensemble) if ensemble is not None else ensemble_size
        LedgerSpec(0, tuple(f"b{i}" for i in range(size)), write_quorum, ack_quorum)  # bad quorums: no row
        if ensemble is None:
            ensemble = await call_store(self.placement.choose_ensemble, ensemble_size)
        instances = recorded_instances((), 0, await self.instances(ensemble))
        meta = await call_store(
            self._store.create_ledger, tuple(ensemble), write_quorum, ack_quorum, self._clock(), instances
        )
        replacer = _BookieReplacer(self, meta.ledger_id)
        try:
            writer = await self._client.create_ledger(ledger_spec(meta), replacer)
        except Exception:
            with contextlib.suppress(Exception):  # if this fails too, the sweep finishes it
                await self.delete(meta.ledger_id)
            raise
        handle = replacer.handle = LedgerHandle(meta, writer)
        if writer.spec.ensembles != meta.ensembles:
            handle.metadata = await self.get(meta.ledger_id)  # replaced at once: a bookie was down
        return handle

    async def close(self, handle: LedgerHandle) -> LedgerMetadata:
        """Close the writer and record the ledger CLOSED (last entry, length, time) by one CAS.
        A handle whose adds (or close) failed is closed through recovery."""
        if handle.failed is None:
            try:
                last = await handle.writer.close()
            except BookieError as exc:
                handle.failed = exc
        if handle.failed is not None:
            handle.metadata = await self.recover_and_close(handle.ledger_id)
            return handle.metadata

        def closed(meta: LedgerMetadata) -> LedgerMetadata:
            # Re-replication may have swapped a bookie of a segment before the writer's last one
            # (without fencing) since the handle read the row: close the row as it is now. A row
            # no longer OPEN was recovered by someone else: the lost race the caller expects.
            if meta.state != LedgerState.OPEN:
                raise BadVersionError(f"ledger {meta.ledger_id} is {meta.state.value}, not OPEN")
            return replace(
                meta,
                state=LedgerState.CLOSED,
                last_entry_id=last,
                length_bytes=handle.length_bytes,
                closed_ms=self._clock(),
            )

        try:
            handle.metadata = await call_store(self._store.update_ledger, closed(handle.metadata))
        except BadVersionError as lost:
            try:
                handle.metadata = await self._update_with_retry(handle.ledger_id, closed)
            except NotFoundError:
                raise lost from None  # deleted meanwhile: as lost a race as any
        return handle.metadata

    async def recover_and_close(self, ledger_id: int) -> LedgerMetadata:
        """Fence the ledger, find its last entry, count its bytes and record it CLOSED.

        Returns the row unchanged when it is already CLOSED. Raises NotFoundError when the
        row is gone or being deleted.
        """
        meta = await self.get(ledger_id)
        if meta.state == LedgerState.CLOSED:
            return meta
        if meta.state == LedgerState.OPEN:
            meta = await call_store(self._store.update_ledger, replace(meta, state=LedgerState.IN_RECOVERY))
        meta, last = await self._recover(meta)
        spec = ledger_spec(meta)
        length = 0
        for first, end in read_ranges(0, last, READ_CHUNK):
            length += sum(len(p) for p in await self._client.read_entries(spec, first, end))
        # One compare-and-set closes the ledger and records recovery's ensemble changes with it.
        closed = replace(
            meta, state=LedgerState.CLOSED, last_entry_id=last, length_bytes=length, closed_ms=self._clock()
        )
        try:
            return await call_store(self._store.update_ledger, closed)
        except BadVersionError:
            now = await self.get(ledger_id)  # another recovery closed it first: its end stands
            if now.state == LedgerState.CLOSED:
                return now
            raise

    async def _recover(self, meta: LedgerMetadata) -> tuple[LedgerMetadata, int]:
        """Recover the ledger's last entry. An entry recovery cannot copy to an ack quorum of
        its write set (a member is down or hangs) gets its unreachable members replaced from
        that entry on, as BookKeeper's recovery writes entries back with an ensemble change;
        without a replacement, recovery fails and the ledger stays IN_RECOVERY for a later try.

        The replacement segments stay in the returned metadata, not in the store, until the
        closing compare-and-set (BookKeeper's `newEnsemblesFromRecovery`): a recovery that fails
        changes nothing a later one reads. Were they stored, the next recovery would ask the
        replacements, whose "not there" it cannot tell from evidence, and could close the ledger
        short of an acknowledged entry that only the replaced bookie holds."""
        fresh = await call_store(self._formatted_since, meta)
        failed: set[str] = set()  # every bookie that could not take a copy in this recovery
        for attempt in range(MAX_RECOVERY_CHANGES + 1):
            # Only the instances that entered the last segment can say an entry past it is absent.
            instances = meta.segment_instances(meta.history()[-1][0])
            try:
                return meta, await self._client.recover(ledger_spec(meta), frozenset(fresh), instances)
            except ShortOfQuorumError as short:
                if not short.unreachable or attempt == MAX_RECOVERY_CHANGES:
                    raise
                current = ledger_spec(meta).ensemble_at(short.entry_id)
                failed.update(short.unreachable)
                try:
                    new = await call_store(self.replaced, current, short.unreachable, set(current) | failed)
                except NotEnoughBookiesError:
                    raise short from None  # the more telling error: what recovery could not do
                added = [b for b in new if b not in current]
                log.warning(
                    "recovery of ledger %d: entry %d short of its ack quorum; %s replaced by %s",
                    meta.ledger_id,
                    short.entry_id,
                    ",".join(short.unreachable),
                    ",".join(added),
                )
                fresh.update(added)
                # Kept in memory until the closing compare-and-set, as BookKeeper's recovery
                # keeps `newEnsemblesFromRecovery`: a recovery that fails must leave nothing a
                # later one would read. A replacement recorded now would be believed by the next
                # recovery, whose "not there" from it would close the ledger short of an
                # acknowledged entry held by the bookie it replaced.
                meta = with_segment(meta, short.entry_id, new, await self.instances(added))
        raise AssertionError("unreachable: the last attempt returns or raises")

    async def instances(self, bookies: Iterable[str]) -> dict[str, str | None]:
        """The instance id of each bookie now (None where unknown), to record in its segment."""
        bookies = list(bookies)
        found = await asyncio.gather(*(self._client.bookie_instance(b) for b in bookies))
        return dict(zip(bookies, found, strict=True))

    def _formatted_since(self, meta: LedgerMetadata) -> set[str]:
        """The ledger's bookies formatted as new instances after it was made: their "no such
        ledger" or "no such entry" says nothing about it (a wiped disk cannot know what it held),
        so recovery never counts it as evidence. Synchronous: reads the store's cookies."""
        if self._cookies is None or meta.created_ms <= 0:
            return set()
        fresh = set()
        for bookie in sorted({b for _, bookies in meta.history() for b in bookies}):
            cookie = self._cookies(bookie)
            if cookie is not None and cookie.created_ms > meta.created_ms:
                fresh.add(bookie)
        return fresh

    def replaced(
        self, ensemble: Sequence[str], failed: Collection[str], exclude: Collection[str]
    ) -> tuple[str, ...]:
        """`ensemble` with each `failed` bookie replaced by one the placement policy picks
        outside `exclude` (NotEnoughBookiesError when it has too few). Synchronous: the policy
        may read the metadata store; callers run it off the event loop."""
        count = sum(1 for b in ensemble if b in failed)
        chosen = list(self.placement.choose_ensemble(count, exclude))
        return tuple(chosen.pop(0) if b in failed else b for b in ensemble)

    async def change_ensemble(
        self,
        ledger_id: int,
        first_entry_id: int,
        new_bookies: Sequence[str],
        entered: Mapping[str, str | None] | None = None,
    ) -> LedgerMetadata:
        """Record a new last segment of an OPEN ledger: `new_bookies` from `first_entry_id` on.

        The writer calls this when it replaces a failed bookie, before it acknowledges any entry
        of the new segment. A last segment starting at the same entry is replaced (none of its
        entries was acknowledged). Raises FencedError when the ledger is no longer OPEN (someone
        recovered it: the writer must stop), ValueError for a segment that does not fit.
        `entered`: the instance ids of the bookies new to the ensemble (the others keep theirs).
        """

        return await self._record_segment(ledger_id, first_entry_id, new_bookies, LedgerState.OPEN, entered)

    async def _record_segment(
        self,
        ledger_id: int,
        first_entry_id: int,
        new_bookies: Sequence[str],
        state: LedgerState,
        entered: Mapping[str, str | None] | None = None,
    ) -> LedgerMetadata:
        """The new last segment, by compare-and-set while the ledger is in `state` (OPEN for its
        writer; recovery keeps its segments in memory); FencedError in any other state."""

        def change(meta: LedgerMetadata) -> LedgerMetadata:
            if meta.state != state:
                raise FencedError(ledger_id)
            return with_segment(meta, first_entry_id, new_bookies, entered)

        recorded = await self._update_with_retry(ledger_id, change)
        COUNTERS.ensemble_changes += 1
        return recorded

    async def replace_bookie(self, ledger_id: int, first_entry_id: int, old: str, new: str) -> LedgerMetadata:
        """Swap bookie `old` for `new` in the segment starting at `first_entry_id` (a copy of that
        segment's entries was made on `new`), by compare-and-set, in any ledger state but
        DELETING. Replacing the first segment's bookie changes `ensemble` too. Raises NotFoundError
        when the ledger or the segment is gone, BadVersionError when `old` is no longer in the
        segment (someone replaced it first), ValueError when `new` already is.
        """

        def swap(meta: LedgerMetadata) -> LedgerMetadata:
            history = list(meta.history())
            index = next((i for i, s in enumerate(history) if s[0] == first_entry_id), None)
            if index is None:
                raise NotFoundError(f"ledger {ledger_id} has no segment starting at entry {first_entry_id}")
            bookies = history[index][1]
            if old not in bookies:
                raise BadVersionError(f"ledger {ledger_id}: {old} is no longer in segment {first_entry_id}")
            if new in bookies:
                raise ValueError(f"ledger {ledger_id}: {new} is already in segment {first_entry_id}")
            history[index] = (first_entry_id, tuple(new if b == old else b for b in bookies))
            ensemble = history[0][1]
            # `old`'s instance goes with it; `new`'s copy is not recorded (judged as before).
            instances = tuple(x for x in meta.instances if x[:2] != (first_entry_id, old))
            return replace(
                meta, ensemble=ensemble, ensembles=normalize_history(ensemble, history), instances=instances
            )

        return await self._update_with_retry(ledger_id, swap)

    async def _update_with_retry(
        self, ledger_id: int, change: Callable[[LedgerMetadata], LedgerMetadata]
    ) -> LedgerMetadata:
        """Apply `change` to the current row by compare-and-set, re-reading it after a lost race
        (bounded: a row that keeps moving this fast means something is wrong)."""
        for attempt in range(CAS_ATTEMPTS):
            updated = change(await self.get(ledger_id))
            try:
                return await call_store(self._store.update_ledger, updated)
            except BadVersionError:
                if attempt == CAS_ATTEMPTS - 1:
                    raise
        raise AssertionError("unreachable")

    async def get(self, ledger_id: int) -> LedgerMetadata:
        """The ledger's metadata; NotFoundError when it is gone or being deleted."""
        meta = await call_store(self._store.get_ledger, ledger_id)
        if meta.state == LedgerState.DELETING:
            raise NotFoundError(f"ledger {ledger_id} is being deleted")
        return meta

    async def spec(self, ledger_id: int) -> LedgerSpec:
        """How to reach the ledger; NotFoundError when it is gone or being deleted."""
        return ledger_spec(await self.get(ledger_id))

    async def read(self, ledger_id: int, first_entry_id: int, last_entry_id: int) -> list[bytes]:
        """Entries first..last (inclusive) of a ledger known by id."""
        return await self._client.read_entries(await self.spec(ledger_id), first_entry_id, last_entry_id)

    async def delete(self, ledger_id: int) -> None:
        """Mark the row DELETING, delete the bookie data, delete the row (module docstring).
        Idempotent: a ledger that is already gone is not an error."""
        try:
            meta = await call_store(self._store.get_ledger, ledger_id)
            if meta.state != LedgerState.DELETING:
                meta = await self._mark_deleting(meta)
        except NotFoundError:
            return
        await self._erase(meta)

    async def finish_deletions(self) -> int:
        """Finish every deletion a crash interrupted (rows marked DELETING); returns how many."""
        marked = [m for m in await call_store(self._store.list_ledgers) if m.state == LedgerState.DELETING]
        for meta in marked:
            await self._erase(meta)
        return len(marked)

    async def _mark_deleting(self, meta: LedgerMetadata) -> LedgerMetadata:
        try:
            return await call_store(self._store.update_ledger, replace(meta, state=LedgerState.DELETING))
        except BadVersionError:
            # Someone updated the row meanwhile: fine if that was another deleter's mark.
            current = await call_store(self._store.get_ledger, meta.ledger_id)
            if current.state != LedgerState.DELETING:
                raise
            return current

    async def _erase(self, meta: LedgerMetadata) -> None:
        try:
            await self._client.delete_ledger(ledger_spec(meta))
        except NoSuchLedgerError:
            pass
        except BookieError as exc:  # the bookie's ledger garbage collector reclaims it (docstring)
            log.warning("ledger %d: a bookie did not delete it (its collector will): %s", meta.ledger_id, exc)
        with contextlib.suppress(NotFoundError):
            await call_store(self._store.delete_ledger, meta.ledger_id)
