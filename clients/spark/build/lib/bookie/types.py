"""Plain values shared by the bookie client and its callers."""

from __future__ import annotations

import itertools
from bisect import bisect_right
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

# One segment of a ledger's ensemble history: (first entry id, bookies). Entries from that id up
# to the next segment's first id are striped over these bookies.
Segment = tuple[int, tuple[str, ...]]


def normalize_history(ensemble: Sequence[str], history: Iterable[Sequence[Any]] = ()) -> tuple[Segment, ...]:
    """The ensemble history as plain tuples; an empty history means `((0, ensemble),)`.

    Raises ValueError unless the first segment starts at entry 0 with `ensemble`, first entry
    ids strictly increase, and every segment has as many distinct bookies as `ensemble`.
    """
    initial = tuple(str(b) for b in ensemble)
    segments: list[Segment] = []
    for first, bookies in history:  # also JSON's [[0, ["b:1", ...]], ...]
        segments.append((int(first), tuple(str(b) for b in bookies)))
    if not segments:
        return ((0, initial),)
    if segments[0] != (0, initial):
        raise ValueError(f"ensemble history must start with (0, {initial}), got {segments[0]}")
    for (a, _), (b, _) in itertools.pairwise(segments):
        if b <= a:
            raise ValueError(f"ensemble history must have increasing first entry ids, got {a} then {b}")
    for first, bookies in segments:
        if len(bookies) != len(initial) or len(set(bookies)) != len(bookies):
            raise ValueError(f"segment at entry {first} must hold {len(initial)} distinct bookies: {bookies}")
    return tuple(segments)


@dataclass(frozen=True, slots=True)
class LedgerSpec:
    """What a client must know to reach a ledger: its id, its ensembles and its quorums.

    The metadata store owns these facts (as ZooKeeper does for BookKeeper); the client only
    uses them. Bookies are addresses "host:port". `ensemble` is the ledger's first ensemble and
    `ensembles` its history: (first entry id, bookies) segments, the first at entry 0, a new one
    each time the writer replaced a failed bookie. Entry e belongs to the segment with the
    greatest first entry id <= e and is written to bookies[(e + i) % E] of it for i in
    range(write_quorum); an add is acknowledged once ack_quorum of those made it durable. With
    E=Qw=Qa=1 a ledger lives on one bookie. An empty `ensembles` means one segment.
    """

    ledger_id: int
    ensemble: tuple[str, ...]
    write_quorum: int = 1
    ack_quorum: int = 1
    ensembles: tuple[Segment, ...] = ()
    _starts: tuple[int, ...] = field(default=(), init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        e = len(self.ensemble)
        if not (e >= self.write_quorum >= self.ack_quorum >= 1):
            raise ValueError(
                f"need ensemble >= write_quorum >= ack_quorum >= 1, got "
                f"{e}/{self.write_quorum}/{self.ack_quorum}"
            )
        history = normalize_history(self.ensemble, self.ensembles)
        object.__setattr__(self, "ensemble", history[0][1])
        object.__setattr__(self, "ensembles", history)
        object.__setattr__(self, "_starts", tuple(first for first, _ in history))

    def segment_index(self, entry_id: int) -> int:
        """The index in `ensembles` of the segment holding `entry_id`."""
        if len(self._starts) == 1:
            return 0
        return max(bisect_right(self._starts, entry_id) - 1, 0)

    def ensemble_at(self, entry_id: int) -> tuple[str, ...]:
        return self.ensembles[self.segment_index(entry_id)][1]

    def write_set(self, entry_id: int) -> tuple[str, ...]:
        bookies = self.ensemble_at(entry_id)
        e = len(bookies)
        return tuple(bookies[(entry_id + i) % e] for i in range(self.write_quorum))

    @property
    def last_ensemble(self) -> tuple[str, ...]:
        """The ensemble new entries go to (the last segment's)."""
        return self.ensembles[-1][1]

    @property
    def bookies(self) -> tuple[str, ...]:
        """Every bookie of any segment, each once, in order of appearance."""
        return tuple(dict.fromkeys(b for _, bookies in self.ensembles for b in bookies))

    def with_segment(self, first_entry_id: int, bookies: Sequence[str]) -> LedgerSpec:
        """This spec with a new last segment from `first_entry_id` (replacing the last one when it
        starts at the same entry: no entry of it was written)."""
        kept = tuple(s for s in self.ensembles if s[0] < first_entry_id)
        return LedgerSpec(
            self.ledger_id,
            self.ensemble if kept else tuple(bookies),
            self.write_quorum,
            self.ack_quorum,
            (*kept, (first_entry_id, tuple(bookies))),
        )
