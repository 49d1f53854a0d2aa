"""The fault schedule's order (`bench/chaos/schedule.py`): every kind once per round, whatever the
seed, with compound faults' parts counted and blocked kinds caught up, never starved."""

from __future__ import annotations

import random
from collections import Counter

import pytest

from bench.chaos.faults import KINDS
from bench.chaos.schedule import Schedule


def _run(schedule: Schedule, picks: int, counts: Counter[str], blocked: set[str] | None = None) -> list[str]:
    """Take `picks` kinds; each counts for itself and, for a compound, for its parts as well (as
    the campaign's history does)."""
    taken = []
    for _ in range(picks):
        kind = schedule.next(counts, blocked or set())
        assert kind is not None
        taken.append(kind)
        counts[kind] += 1
        if "+" in kind:
            counts.update(kind.split("+"))
    return taken


@pytest.mark.parametrize("seed", range(20))
def test_every_kind_runs_once_per_round_whatever_the_seed(seed: int) -> None:
    kinds = [k for k in KINDS if "+" not in k]  # no parts counted: exactly one run per round
    schedule = Schedule(kinds, random.Random(seed))
    counts: Counter[str] = Counter()
    for round_ in range(1, 4):
        taken = _run(schedule, len(kinds), counts)
        assert sorted(taken) == sorted(kinds)
        assert all(counts[k] == round_ for k in kinds)


@pytest.mark.parametrize("seed", range(20))
def test_compound_parts_count_and_every_kind_reaches_each_round(seed: int) -> None:
    schedule = Schedule(KINDS, random.Random(seed))
    counts: Counter[str] = Counter()
    _run(schedule, 3 * len(KINDS), counts)
    assert min(counts[k] for k in KINDS) >= 3
    # Compounds run first in a round, so their parts are spared runs of their own: three rounds
    # take a pick per kind that is no part, and one per compound.
    parts = {part for k in KINDS if "+" in k for part in k.split("+")}
    schedule = Schedule(KINDS, random.Random(seed))
    counts = Counter()
    taken: list[str] = []
    while min(counts[k] for k in KINDS) < 3:
        taken += _run(schedule, 1, counts)
    assert not parts & set(taken)
    assert len(taken) == 3 * (len(KINDS) - len(parts))


def test_rounds_are_shuffled_and_reproducible() -> None:
    def order(seed: int) -> list[str]:
        return _run(Schedule(KINDS, random.Random(seed)), 2 * len(KINDS), Counter())

    assert order(5) == order(5)
    assert order(5) != order(6)
    first, second = order(5)[: len(KINDS)], order(5)[len(KINDS) :]
    assert first != second[: len(first)]


def test_in_order_runs_the_first_round_as_given_then_shuffles() -> None:
    kinds = ["kill-broker", "skew-broker", "hold-store", "pause-bookie", "kill-bookie"]
    schedule = Schedule(kinds, random.Random(1), in_order=True)
    counts: Counter[str] = Counter()
    assert _run(schedule, len(kinds), counts) == kinds
    assert sorted(_run(schedule, len(kinds), counts)) == sorted(kinds)


@pytest.mark.parametrize("seed", range(20))
def test_a_blocked_kind_is_not_starved_it_catches_up(seed: int) -> None:
    """A kind blocked for two rounds' worth of picks runs as soon as it is free, then again
    before any other kind runs more, until it has as many runs as the rest."""
    rng = random.Random(seed)
    schedule = Schedule(KINDS, random.Random(seed))
    counts: Counter[str] = Counter()
    parts = {part for k in KINDS for part in k.split("+") if "+" in k}
    stuck = rng.choice([k for k in KINDS if "+" not in k and k not in parts])
    _run(schedule, 2 * len(KINDS), counts, blocked={stuck})
    behind = counts[stuck]
    assert behind < min(counts[k] for k in KINDS if k != stuck)
    caught_up = _run(schedule, 4, counts)
    assert caught_up[0] == stuck
    _run(schedule, 2 * len(KINDS), counts)
    assert counts[stuck] >= min(counts[k] for k in KINDS) >= 3


@pytest.mark.parametrize("seed", range(20))
def test_kinds_blocked_at_random_all_reach_three_runs(seed: int) -> None:
    """Any kind may be blocked at any pick (as losses are while copies are re-replicated), none for
    long: every kind still reaches three runs in a bounded number of picks."""
    rng = random.Random(seed)
    schedule = Schedule(KINDS, random.Random(seed))
    counts: Counter[str] = Counter()
    picks = 0
    while min(counts[k] for k in KINDS) < 3:
        blocked = {k for k in KINDS if rng.random() < 0.2}
        kind = schedule.next(counts, blocked)
        picks += 1
        assert picks < 6 * len(KINDS), counts
        if kind is None:
            continue
        assert kind not in blocked
        counts[kind] += 1
        if "+" in kind:
            counts.update(kind.split("+"))


def test_every_kind_blocked_gives_none_and_bad_kinds_are_refused() -> None:
    schedule = Schedule(["kill-broker", "kill-bookie"], random.Random(0))
    assert schedule.next(Counter(), {"kill-broker", "kill-bookie"}) is None
    with pytest.raises(ValueError, match="no fault kinds"):
        Schedule([], random.Random(0))
    with pytest.raises(ValueError, match="named twice"):
        Schedule(["kill-broker", "kill-broker"], random.Random(0))
