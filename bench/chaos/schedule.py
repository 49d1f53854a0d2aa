"""The order of the faults: rounds in which every enabled kind runs once, each round in an order
of its own drawn from the seed, so that a campaign of N rounds' length runs every kind N times
whatever the seed.

- A kind's count is how often it ran, as a fault of its own or as a part of a compound fault
  (the table counts both, and says how many were parts). A round runs its compound kinds first,
  so a kind that a compound ran in the round is not run again on its own in it: with every kind
  enabled, the kinds that are parts of compounds (a broker killed, a bookie wiped, killed or cut
  off, PostgreSQL stalled) run inside those compounds, on their own only when a compound could
  not run (blocked, below) or was not enabled (`--kinds`).
- The next kind is always one of those that ran fewest times, the first of them in the round's
  order. So no kind runs a second time before every kind has run once, and so on.
- A kind that cannot run now (a loss of copies while an earlier loss is not re-replicated yet) is
  *blocked*: the caller names it, it is passed over and keeps its count, and it is the next one
  drawn once it is no longer blocked (it ran fewest times), so it catches up instead of being
  dropped from its round.

The rounds are drawn from their own generator, so the order depends on the seed only, not on
what the faults drew for themselves. With `in_order` the first round is the order the kinds were
given in (`--in-order`, for a short campaign that must reach certain kinds first).
"""

from __future__ import annotations

import random
from collections.abc import Collection, Mapping, Sequence


class Schedule:
    def __init__(self, kinds: Sequence[str], rng: random.Random, in_order: bool = False) -> None:
        if not kinds:
            raise ValueError("no fault kinds to draw from")
        if len(set(kinds)) != len(kinds):
            raise ValueError(f"a fault kind is named twice in {', '.join(kinds)}")
        self.kinds = tuple(kinds)
        self.rng = rng
        self.in_order = in_order
        self.round = -1  # the fewest runs of any kind when `order` was drawn
        self.rounds_drawn = 0
        self.order: list[str] = []

    def next(self, counts: Mapping[str, int], blocked: Collection[str] = ()) -> str | None:
        """The kind to run next, given how often each ran (`counts`); None when every kind is
        blocked."""
        candidates = [k for k in self.kinds if k not in blocked]
        if not candidates:
            return None
        fewest = min(counts.get(k, 0) for k in candidates)
        if fewest > self.round:
            self.round = fewest
            self.order = self._draw()
        return next(k for k in self.order if k in candidates and counts.get(k, 0) == fewest)

    def _draw(self) -> list[str]:
        """The round's order: the compound kinds first, each part shuffled (as given, for the
        first round with `in_order`)."""
        self.rounds_drawn += 1
        if self.in_order and self.rounds_drawn == 1:
            return list(self.kinds)
        compounds = [k for k in self.kinds if "+" in k]
        singles = [k for k in self.kinds if "+" not in k]
        self.rng.shuffle(compounds)
        self.rng.shuffle(singles)
        return compounds + singles
