"""The run lease of a compaction: the rules every process applies to a topic's CompactionState.

A trigger (an admin PUT, or the broker's threshold check) *requests* a run: the status is RUNNING
at once, `requested` is set, nobody holds it yet, and a request lease bounds how long it may wait
for a compactor. A compactor *takes* the run by compare-and-set (its instance id as holder, a run
lease from now), renews that lease while the run goes on, and ends the run with one more CAS that
records SUCCESS or ERROR and drops the lease.

A RUNNING state whose lease has lapsed is a dead run: its compactor was killed, hangs or cannot
reach the store, or no compactor ever took the request. Whoever looks at it (the broker answering
a status GET or a PUT, its threshold check, a compactor's poll) records ERROR for it, so the
status stops saying RUNNING within one lease of the last renewal. The compactor that held it can
no longer record anything: each of its writes is a CAS on the version it wrote last, and the
ERROR written here changed that version. The dead run's half-written ledger stays named in
`run_ledger_id` until a compactor deletes it.

Leases are stamped and judged with the `now_ms` callers pass: the compactor process passes the
metadata store's clock (`StoreClock`), and so does a broker requesting or observing a run (its
`lease_clock`), so one clock judges them all (docs/operations.md, "Clocks"). The lease length
is the `compaction_lease_ms` setting.

Functions here are synchronous store calls; async callers run them in a thread.
"""

from __future__ import annotations

from dataclasses import replace

from managed_ledger.metadata.api import (
    BadVersionError,
    CompactionState,
    CompactionStatus,
    MetadataStore,
    NotFoundError,
)

LEASE_LOST = "compactor lost its lease"
NO_TAKER = "no compactor took the run"
_CAS_ATTEMPTS = 8


def lapsed(state: CompactionState, now_ms: int) -> bool:
    """True for a RUNNING state whose lease ran out. A RUNNING state with no expiry at all was
    written before runs had leases: nobody renews it, so it counts as lapsed too."""
    if state.status != CompactionStatus.RUNNING:
        return False
    return state.lease_expires_ms is None or now_ms >= state.lease_expires_ms


def live(state: CompactionState, now_ms: int) -> bool:
    """A run requested or running whose lease still holds: a new trigger must wait for it."""
    return state.status == CompactionStatus.RUNNING and not lapsed(state, now_ms)


def waiting(state: CompactionState, now_ms: int) -> bool:
    """A request no compactor has taken yet (one stored before leases existed counts too)."""
    if not state.requested:
        return False
    return state.status != CompactionStatus.RUNNING or (not state.lease_holder and not lapsed(state, now_ms))


def expired(state: CompactionState, now_ms: int) -> CompactionState:
    """The ERROR that replaces a lapsed run. `run_ledger_id` stays so a compactor deletes it."""
    if state.lease_holder:
        reason = f"{LEASE_LOST}: {state.lease_holder} stopped renewing it"
    else:
        waited_s = max(0, (state.lease_expires_ms or now_ms) - (state.started_ms or now_ms)) / 1000
        reason = f"{NO_TAKER} within {waited_s:g} s of the request"
    return replace(
        state,
        status=CompactionStatus.ERROR,
        last_error=reason,
        requested=False,
        ended_ms=now_ms,
        last_failed_ms=now_ms,
        lease_holder="",
        lease_expires_ms=None,
    )


def requested(state: CompactionState, now_ms: int, request_lease_ms: int) -> CompactionState:
    """A new request: RUNNING from now on, no holder, waiting at most `request_lease_ms`."""
    return replace(
        state,
        status=CompactionStatus.RUNNING,
        requested=True,
        started_ms=now_ms,
        ended_ms=None,
        last_error="",
        lease_holder="",
        lease_expires_ms=now_ms + request_lease_ms,
    )


def taken(state: CompactionState, holder: str, now_ms: int, lease_ms: int) -> CompactionState:
    """The run as `holder` starts it: the request cleared, a run lease from now."""
    return replace(
        state,
        status=CompactionStatus.RUNNING,
        requested=False,
        started_ms=now_ms,
        ended_ms=None,
        last_error="",
        lease_holder=holder,
        lease_expires_ms=now_ms + lease_ms,
    )


def observe(store: MetadataStore, topic: str, now_ms: int) -> CompactionState:
    """The topic's state as it stands, with a lapsed lease first recorded as ERROR (by CAS: when
    another process writes first, look again)."""
    state = store.get_compaction(topic)
    for _ in range(_CAS_ATTEMPTS):
        if not lapsed(state, now_ms):
            return state
        try:
            return store.put_compaction(expired(state, now_ms))
        except (BadVersionError, NotFoundError):
            state = store.get_compaction(topic)
    # The store is too busy to take our write; what we answer is what the next write will say.
    return expired(state, now_ms) if lapsed(state, now_ms) else state


def request(store: MetadataStore, topic: str, now_ms: int, request_lease_ms: int) -> CompactionState | None:
    """Request a run of `topic`; None when a run is already requested or running (or the CAS kept
    losing to other writers, which are requesting or running one)."""
    for _ in range(_CAS_ATTEMPTS):
        state = observe(store, topic, now_ms)
        if live(state, now_ms):
            return None
        try:
            return store.put_compaction(requested(state, now_ms, request_lease_ms))
        except (BadVersionError, NotFoundError):
            continue
    return None


def extend_request(store: MetadataStore, state: CompactionState, now_ms: int, request_lease_ms: int) -> bool:
    """Push out the request lease of a request that a live compactor will take when it can, so a
    request waiting behind a long run does not expire. False (nothing written) when `state` is
    not a waiting request or changed since it was read."""
    if state.status != CompactionStatus.RUNNING or not waiting(state, now_ms):
        return False
    try:
        store.put_compaction(replace(state, lease_expires_ms=now_ms + request_lease_ms))
    except (BadVersionError, NotFoundError):
        return False
    return True
