"""The ledger client seam: what the managed ledger and the compactor need from the bookies.

`bookie.client.BookieLedgerClient` is the real implementation (TCP to bookie processes);
`bookie.memory.InMemoryLedgerClient` passes the same contract tests for fast unit tests of the
layers above. Callers never see bookie connections, ensembles or quorums beyond a `LedgerSpec`,
so replication (E/Qw/Qa, ensemble changes) changes only the client.

Entry ids are dense from 0. `last_add_confirmed` (LAC) is the highest entry id such that it and
every entry before it were acknowledged to the writer; -1 for none.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Protocol

from bookie.errors import BookieError
from bookie.types import LedgerSpec

# The ensemble change a writer asks of the ledger lifecycle: (first entry id of the new segment,
# the current ensemble, every bookie that failed for this writer) -> the new ensemble, in which
# each failed bookie of the current one is replaced at its position. It returns only once the
# new segment is recorded in the ledger's metadata; it raises when no replacement exists or the
# ledger was recovered by someone else (FencedError).
EnsembleChanger = Callable[[int, tuple[str, ...], frozenset[str]], Awaitable[tuple[str, ...]]]


class LedgerWriter(Protocol):
    """The single writer of one ledger."""

    @property
    def spec(self) -> LedgerSpec: ...

    @property
    def last_add_confirmed(self) -> int: ...

    @property
    def failure(self) -> BookieError | None:
        """The error that failed this writer (every later add fails with it), or None."""
        ...

    async def add_entry(self, payload: bytes) -> int:
        """Append one entry; returns its id once it is durable on an ack quorum.

        Many calls may be in flight at once (issue them from several tasks, or gather them):
        ids are assigned in call order and acknowledgements complete in id order. A bookie that
        fails is replaced (ensemble change) when the writer was given an `EnsembleChanger`;
        once an add fails, every later add of this writer fails too (the ledger must be closed
        and a new one started), as in BookKeeper.
        """
        ...

    async def close(self) -> int:
        """Wait for adds in flight, refuse new ones; returns the last entry id (LAC)."""
        ...


class LedgerClient(Protocol):
    async def create_ledger(
        self, spec: LedgerSpec, on_ensemble_change: EnsembleChanger | None = None
    ) -> LedgerWriter:
        """Start writing a new ledger (its metadata was already created by the caller). Without
        `on_ensemble_change` a failed bookie fails the writer."""
        ...

    async def read_entries(self, spec: LedgerSpec, first_entry_id: int, last_entry_id: int) -> list[bytes]:
        """Read entries first..last inclusive, in order. Raises NoSuchEntryError/NoSuchLedgerError."""
        ...

    async def read_last_add_confirmed(self, spec: LedgerSpec) -> int: ...

    async def recover(
        self,
        spec: LedgerSpec,
        fresh: frozenset[str] = frozenset(),
        instances: Mapping[str, str] | None = None,
    ) -> int:
        """Fence the ledger on its bookies so the old writer can add no more, then find and
        return its last entry id (-1 if empty): every entry acknowledged to a writer is at or
        before it, and every entry up to it is readable."""
        ...

    async def delete_ledger(self, spec: LedgerSpec) -> None:
        """Delete the ledger's entries on every bookie (idempotent)."""
        ...

    async def bookie_instance(self, address: str) -> str | None:
        """The instance id (cookie) of the bookie now at `address`, recorded in each segment it
        enters; None when unknown (unreachable, no instance, or no bookies at all)."""
        ...

    async def healthy(self, bookies: Sequence[str] | None = None) -> bool:
        """True when enough of `bookies` (default: those this client was configured with)
        answer (for readiness)."""
        ...

    async def close(self) -> None: ...


def read_ranges(total_first: int, total_last: int, chunk: int) -> Sequence[tuple[int, int]]:
    """Split an inclusive entry range into chunks of at most `chunk` entries."""
    return [(a, min(a + chunk - 1, total_last)) for a in range(total_first, total_last + 1, chunk)]
