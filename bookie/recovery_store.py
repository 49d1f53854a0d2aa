"""Auto-recovery's records in the metadata store: leader leases and under-replicated ledgers.

BookKeeper keeps both in ZooKeeper (the auditor's election node and the under-replication
manager's znodes); here they are two small tables of the metadata store, written only by
compare-and-set on `version`, with the same rule as the other put_* records: version 0 creates
(BadVersionError when one exists), version v replaces version v (BadVersionError when the row
moved on, NotFoundError when it is gone).

- A `LeaderLease` names who holds a role (`holder`) until `expires_ms`. Whoever finds it lapsed
  (or held by itself) may take or renew it by one CAS; two candidates cannot both win, since the
  loser's CAS meets the winner's version. The auditor is elected this way.
- An `UnderReplicatedLedger` is a ledger with a segment on a bookie that is lost or being
  decommissioned (`missing`), or with entries a bookie holds rotten (`rotten`: their stored
  checksum fails; the bookie's scrub lists them, `bookie.scrubber`). The auditor writes the
  first kind and keeps the second; a recovery worker claims it (its id and a
  claim expiry, by CAS), re-replicates, and deletes it by CAS on the version it read, so a row
  the auditor grew meanwhile survives for the next pass. A claim that lapses (the worker died
  or hangs) may be taken by any other worker.

The SQL and in-memory stores implement `RecoveryStore` (`managed_ledger/metadata/recovery.py`).
Leases and claims are stamped and judged with the `now_ms` their callers pass; the autorecovery
process passes the metadata store's clock (`StoreClock`), so one clock judges them all.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Protocol

from bookie.ledger_metadata import BadVersionError, NotFoundError


@dataclass(frozen=True, slots=True)
class LeaderLease:
    name: str
    holder: str = ""
    expires_ms: int = 0
    version: int = 0


@dataclass(frozen=True, slots=True)
class UnderReplicatedLedger:
    """`missing`: sorted ids of the bookies whose copies the ledger lacks; `marked_ms`: when the
    auditor first listed it (an OPEN ledger is left to its writer for a grace period from then).
    `rotten`: sorted (bookie, entry id) copies that bookie holds but cannot serve (their checksum
    fails); a worker rewrites each in place from a good copy. A row names one or the other."""

    ledger_id: int
    missing: tuple[str, ...]
    marked_ms: int = 0
    claimed_by: str = ""
    claim_expires_ms: int = 0
    version: int = 0
    rotten: tuple[tuple[str, int], ...] = ()

    def named(self) -> tuple[str, ...]:
        """The bookies the row names: missing ones and those holding rotten copies."""
        return tuple(sorted(set(self.missing) | {b for b, _ in self.rotten}))


class RecoveryStore(Protocol):
    def get_lease(self, name: str) -> LeaderLease | None: ...

    def put_lease(self, lease: LeaderLease) -> LeaderLease:
        """CAS on version (0 creates); returns the lease with its new version."""
        ...

    def list_underreplicated(self) -> list[UnderReplicatedLedger]:
        """Every under-replicated ledger, in ledger id order."""
        ...

    def get_underreplicated(self, ledger_id: int) -> UnderReplicatedLedger | None: ...

    def put_underreplicated(self, row: UnderReplicatedLedger) -> UnderReplicatedLedger:
        """CAS on version (0 creates); returns the row with its new version."""
        ...

    def delete_underreplicated(self, ledger_id: int, version: int) -> None:
        """Delete the row if it still has `version`: BadVersionError if it moved on,
        NotFoundError if it is gone."""
        ...


def take_lease(
    store: RecoveryStore, name: str, holder: str, now_ms: int, lease_ms: int
) -> LeaderLease | None:
    """Take or renew the lease `name` for `holder` until now + lease_ms; None when someone else
    holds it and it has not lapsed, or another candidate's CAS won."""
    current = store.get_lease(name)
    if current is not None and current.holder != holder and current.expires_ms > now_ms:
        return None
    wanted = LeaderLease(name, holder, now_ms + lease_ms, 0 if current is None else current.version)
    try:
        return store.put_lease(wanted)
    except (BadVersionError, NotFoundError):
        return None


def claimable(row: UnderReplicatedLedger, now_ms: int) -> bool:
    """Nobody holds the row, or its claim lapsed."""
    return not row.claimed_by or row.claim_expires_ms <= now_ms


def claim(
    store: RecoveryStore, row: UnderReplicatedLedger, worker: str, now_ms: int, claim_ms: int
) -> UnderReplicatedLedger | None:
    """Claim (or renew the claim on) `row` by CAS; None when another process changed it first."""
    try:
        return store.put_underreplicated(replace(row, claimed_by=worker, claim_expires_ms=now_ms + claim_ms))
    except (BadVersionError, NotFoundError):
        return None


def mark_rotten(
    store: RecoveryStore, ledger_id: int, bookie_id: str, entry_ids: set[int], now_ms: int
) -> bool:
    """Add (bookie_id, e) for every e to the ledger's row (a new row, or the row changed by CAS,
    its worker's claim kept); False when the row kept moving (the caller tries again later)."""
    wanted = {(bookie_id, e) for e in entry_ids}
    for _ in range(5):
        row = store.get_underreplicated(ledger_id)
        try:
            if row is None:
                new = UnderReplicatedLedger(ledger_id, (), now_ms, rotten=tuple(sorted(wanted)))
                store.put_underreplicated(new)
            elif wanted <= set(row.rotten):
                return True
            else:
                store.put_underreplicated(replace(row, rotten=tuple(sorted(set(row.rotten) | wanted))))
            return True
        except (BadVersionError, NotFoundError):
            continue  # the auditor or a worker changed it meanwhile: read it again
    return False
