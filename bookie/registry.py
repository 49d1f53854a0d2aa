"""Which bookies exist, which are alive, and which ones a new ledger should be written to.

Every bookie process registers itself in the metadata store under its id (the advertised
`host:port` clients dial) and renews a heartbeat every few seconds, reporting whether it takes
writes, its free bytes and how many ledgers it holds. A bookie whose heartbeat is older than the
expiry is down; this stands in for BookKeeper's ephemeral ZooKeeper nodes, which vanish with the
session. A heartbeat is stamped with the bookie's wall clock, but the reader judges its age
with its own clock (`HeartbeatAges`): a heartbeat is as old as the reader's time since it first
saw that value, never younger than the stamp says. So skew between machines can only make a
bookie look alive a little longer (a stopped bookie goes DOWN one expiry after the reader saw its
last heartbeat, whatever its clock said), never make a heartbeating bookie look DOWN for longer
than one heartbeat interval after the reader first looks (docs/operations.md, "Clocks").

This module holds the records, the store seam (`BookieDirectory`: methods the SQL and in-memory
metadata stores implement) and the placement policy; it knows nothing of SQL. Liveness and
placement are computed here, above the store, so both stores agree by construction.
"""

from __future__ import annotations

import random
import threading
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Protocol

from common.clock import wall_clock_ms as wall_clock_ms  # re-exported: the bookie modules import it here
from common.errors import ErrorKind, QuireError


class BookieState(StrEnum):
    """What a bookie reports of itself (`DOWN` is never stored: it is an expired heartbeat)."""

    WRITABLE = "writable"
    READ_ONLY = "read_only"
    DECOMMISSIONING = "decommissioning"
    # Drained: no ledger names it any more; shown whatever its heartbeat, and it may be stopped.
    DECOMMISSIONED = "decommissioned"
    DOWN = "down"


STORED_STATES = (
    BookieState.WRITABLE,
    BookieState.READ_ONLY,
    BookieState.DECOMMISSIONING,
    BookieState.DECOMMISSIONED,
)
# States only an operator (decommission) or the auditor sets; a bookie's heartbeat keeps them.
OPERATOR_STATES = (BookieState.DECOMMISSIONING, BookieState.DECOMMISSIONED)


class NotEnoughBookiesError(QuireError):
    """Fewer live writable bookies than a ledger's ensemble needs; more may join later."""

    kind = ErrorKind.unavailable
    retriable = True
    title = "Not enough bookies"


@dataclass(frozen=True, slots=True)
class BookieRecord:
    """A bookie's registration as stored: its last heartbeat and what it reported with it.

    `instance_id` is the cookie's: it changes only when the bookie is formatted as new.
    `process_id` is the registering process's, new at every start (`bookie.registration`): two
    processes on one disk (a copy of it) share the instance, never the process.
    """

    bookie_id: str
    instance_id: str
    state: BookieState
    heartbeat_ms: int
    free_bytes: int = 0
    ledgers: int = 0
    process_id: str = ""


@dataclass(frozen=True, slots=True)
class BookieCookie:
    """The identity of a bookie's disk: written once to the data directory and to the store.

    A disk whose cookie differs from the stored one (or is missing while the store has one) was
    wiped or swapped: the bookie would answer for entries it no longer holds.
    """

    bookie_id: str
    instance_id: str
    data_dir: str
    created_ms: int = 0
    version: int = 0


@dataclass(frozen=True, slots=True)
class BookieStatus:
    """A bookie as an operator sees it: the stored state, or DOWN once its heartbeat expired."""

    bookie_id: str
    state: BookieState
    ledgers: int
    free_bytes: int
    heartbeat_ms: int


class BookieDirectory(Protocol):
    """The metadata store's bookie methods (SQL and in-memory stores both implement them)."""

    def put_bookie(self, record: BookieRecord, *, expect_process: str | None = None) -> None:
        """Register or renew a bookie. A stored DECOMMISSIONING or DECOMMISSIONED state is kept:
        only `set_bookie_state` changes it. Compare-and-set on the instance: when the store holds
        a cookie for the bookie id naming another instance, the record is refused with
        `bookie.errors.InstanceReplacedError` (the id was formatted as a new instance since: the
        sender is a stale process and must stop), checked in the same transaction as the write.
        With `expect_process`, also on the process: a stored registration naming a process other
        than `expect_process` and the record's own (another process took the id over) refuses it
        with `bookie.errors.ProcessReplacedError`; a row naming no process is anyone's."""
        ...

    def set_bookie_state(
        self, bookie_id: str, state: BookieState, *, expect: BookieState | None = None
    ) -> BookieRecord:
        """Set a registered bookie's stored state (decommission, and the auditor marking it
        drained); NotFoundError for an unknown bookie. With `expect`, a compare-and-set: the
        state changes only from `expect`, else BadVersionError (an operator's cancel and the
        auditor's "drained" must not overwrite each other). Returns the record as stored."""
        ...

    def list_bookies(self) -> list[BookieRecord]:
        """Every registered bookie, in bookie id order."""
        ...

    def get_bookie_cookie(self, bookie_id: str) -> BookieCookie | None: ...

    def put_bookie_cookie(self, cookie: BookieCookie) -> BookieCookie:
        """Compare-and-set on version: 0 creates (a stale version if one exists), v replaces
        version v; returns the cookie with its new version."""
        ...


class BookieRegistry(Protocol):
    """What a broker asks about bookies: who is there, who is alive, where to place a ledger."""

    def all_bookies(self) -> list[BookieStatus]: ...

    def live_bookies(self) -> list[BookieRecord]:
        """Registered bookies whose heartbeat has not expired, in any state but DOWN."""
        ...

    def choose_ensemble(self, ensemble_size: int, exclude: Iterable[str] = ()) -> tuple[str, ...]:
        """`ensemble_size` distinct live writable bookies not in `exclude`; NotEnoughBookiesError
        when there are fewer."""
        ...


@dataclass(frozen=True, slots=True)
class RegistryConfig:
    heartbeat_timeout_ms: int = 10_000


class HeartbeatAges:
    """When each bookie's heartbeat was written, on the reader's clock.

    The value changed since the reader's previous look: it was written after that look, and no
    later than now; within that, the stamp's own time counts only where it is older. First
    sight: the stamp, but never later than now. With clocks that agree this is the stamp itself;
    a reader whose clock runs ahead sees a heartbeating bookie alive from its second look, one
    whose clock runs behind sees a stopped one expire one timeout after it last changed."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._seen: dict[str, tuple[int, int, int]] = {}  # id -> (stamp, written at, looked at)

    def written_at(self, record: BookieRecord, now_ms: int) -> int:
        with self._lock:
            seen = self._seen.get(record.bookie_id)
            if seen is None:
                written = min(now_ms, record.heartbeat_ms)
            elif seen[0] != record.heartbeat_ms:
                written = max(seen[2], min(now_ms, record.heartbeat_ms))
            else:
                written = seen[1]
            self._seen[record.bookie_id] = (record.heartbeat_ms, written, now_ms)
            return written


class MetadataBookieRegistry:
    """`BookieRegistry` over a `BookieDirectory`. Placement picks at random among the live
    writable bookies, weighted towards those holding fewer ledgers, so that new ledgers spread
    over the cluster instead of always landing on the same first E bookies."""

    def __init__(
        self,
        directory: BookieDirectory,
        config: RegistryConfig | None = None,
        clock_ms: Callable[[], int] = wall_clock_ms,
        rng: random.Random | None = None,
    ) -> None:
        self.directory = directory
        self.config = config or RegistryConfig()
        self._clock_ms = clock_ms
        self._rng = rng or random.Random()
        self._ages = HeartbeatAges()

    def _alive(self, record: BookieRecord, now_ms: int) -> bool:
        if record.heartbeat_ms == 0:  # the last record of a clean stop
            return False
        return now_ms - self._ages.written_at(record, now_ms) < self.config.heartbeat_timeout_ms

    def all_bookies(self) -> list[BookieStatus]:
        now = self._clock_ms()
        return [
            BookieStatus(
                bookie_id=r.bookie_id,
                state=shown_state(r, self._alive(r, now)),
                ledgers=r.ledgers,
                free_bytes=r.free_bytes,
                heartbeat_ms=r.heartbeat_ms,
            )
            for r in self.directory.list_bookies()
        ]

    def live_bookies(self) -> list[BookieRecord]:
        now = self._clock_ms()
        return [r for r in self.directory.list_bookies() if self._alive(r, now)]

    def choose_ensemble(self, ensemble_size: int, exclude: Iterable[str] = ()) -> tuple[str, ...]:
        if ensemble_size < 1:
            raise ValueError(f"ensemble size must be at least 1, got {ensemble_size}")
        excluded = set(exclude)
        candidates = [
            r for r in self.live_bookies() if r.state == BookieState.WRITABLE and r.bookie_id not in excluded
        ]
        if len(candidates) < ensemble_size:
            raise NotEnoughBookiesError(
                f"need {ensemble_size} live writable bookies, have {len(candidates)}"
                + (f" (excluding {sorted(excluded)})" if excluded else "")
            )
        return pick_weighted(candidates, ensemble_size, self._rng)

    def serving_bookies(self) -> tuple[str, ...]:
        """Live bookies not drained (a read-only one still serves reads): a bookie replaced for
        good leaves this list once its heartbeat expires, a new one joins it at its first."""
        gone = (BookieState.DECOMMISSIONED,)
        return tuple(r.bookie_id for r in self.live_bookies() if r.state not in gone)


def shown_state(record: BookieRecord, alive: bool) -> BookieState:
    """DOWN once the heartbeat expired, except for a drained bookie: it may well be stopped."""
    if alive or record.state == BookieState.DECOMMISSIONED:
        return record.state
    return BookieState.DOWN


def pick_weighted(candidates: Sequence[BookieRecord], count: int, rng: random.Random) -> tuple[str, ...]:
    """`count` distinct bookies drawn without replacement, each draw weighted by 1 / (1 + its
    ledger count): every bookie can be chosen, the emptier ones more often."""
    pool = list(candidates)
    chosen: list[str] = []
    for _ in range(count):
        weights = [1.0 / (1 + max(r.ledgers, 0)) for r in pool]
        index = rng.choices(range(len(pool)), weights=weights)[0]
        chosen.append(pool.pop(index).bookie_id)
    return tuple(chosen)
