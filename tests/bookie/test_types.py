"""`LedgerSpec` with an ensemble history: which bookies each entry is written to and read from."""

from __future__ import annotations

import pickle

import pytest

from bookie.types import LedgerSpec, normalize_history


def test_one_segment_stripes_as_before() -> None:
    spec = LedgerSpec(1, ("a", "b", "c"), 2, 2)
    assert spec.ensembles == ((0, ("a", "b", "c")),)
    assert [spec.write_set(e) for e in range(4)] == [("a", "b"), ("b", "c"), ("c", "a"), ("a", "b")]
    assert spec.last_ensemble == ("a", "b", "c") and spec.bookies == ("a", "b", "c")


def test_each_entry_uses_the_segment_with_the_greatest_first_id_at_or_below_it() -> None:
    history = ((0, ("a", "b", "c")), (4, ("a", "d", "c")), (6, ("e", "d", "c")))
    spec = LedgerSpec(1, ("a", "b", "c"), 2, 1, history)
    assert [spec.segment_index(e) for e in (0, 3, 4, 5, 6, 100)] == [0, 0, 1, 1, 2, 2]
    assert spec.write_set(3) == ("a", "b") and spec.write_set(4) == ("d", "c")
    assert spec.write_set(5) == ("c", "a") and spec.write_set(6) == ("e", "d")
    assert spec.last_ensemble == ("e", "d", "c") and spec.bookies == ("a", "b", "c", "d", "e")
    assert pickle.loads(pickle.dumps(spec)) == spec  # Spark ships specs to its tasks


def test_with_segment_appends_or_replaces_the_last_segment() -> None:
    spec = LedgerSpec(1, ("a", "b"), 2, 2)
    one = spec.with_segment(3, ("a", "c"))
    assert one.ensembles == ((0, ("a", "b")), (3, ("a", "c")))
    assert one.with_segment(3, ("a", "d")).ensembles == ((0, ("a", "b")), (3, ("a", "d")))
    zero = spec.with_segment(0, ("c", "b"))
    assert zero.ensemble == ("c", "b") and zero.ensembles == ((0, ("c", "b")),)


@pytest.mark.parametrize(
    "history",
    [
        ((1, ("a", "b")),),  # does not start at 0
        ((0, ("x", "b")),),  # does not start with the ensemble
        ((0, ("a", "b")), (0, ("a", "c"))),  # first ids must increase
        ((0, ("a", "b")), (5, ("a",))),  # every segment as large as the ensemble
        ((0, ("a", "b")), (5, ("c", "c"))),  # distinct bookies
    ],
)
def test_bad_histories_are_refused(history: tuple[tuple[int, tuple[str, ...]], ...]) -> None:
    with pytest.raises(ValueError):
        LedgerSpec(1, ("a", "b"), 2, 2, history)


def test_json_shaped_history_is_normalized() -> None:
    assert normalize_history(["a"], [[0, ["a"]], [2, ["b"]]]) == ((0, ("a",)), (2, ("b",)))
