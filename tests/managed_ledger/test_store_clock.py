"""The store's clock as a process's clock (`StoreClock`), and the test-only skew of the wall
clock (`common.clock`): leases stamped and judged on one clock (docs/operations.md, "Clocks")."""

from __future__ import annotations

import pytest

from common.clock import OFFSET_VARIABLE, wall_clock_ms
from managed_ledger.metadata.api import MetadataError
from managed_ledger.metadata.memory import InMemoryMetadataStore
from managed_ledger.metadata.store_clock import StoreClock


class Store:
    def __init__(self) -> None:
        self.now_ms, self.asked, self.down = 5_000_000, 0, False

    def __call__(self) -> int:
        self.asked += 1
        if self.down:
            raise MetadataError("the store is unreachable")
        return self.now_ms


class Monotonic:
    def __init__(self) -> None:
        self.now_s = 100.0

    def __call__(self) -> float:
        return self.now_s


def test_the_store_clock_follows_the_store_not_this_machine() -> None:
    store, mono = Store(), Monotonic()
    clock = StoreClock(store, refresh_ms=1_000, monotonic=mono)
    assert clock.now_ms() == 5_000_000
    mono.now_s += 0.25
    assert clock.now_ms() == 5_000_250 and store.asked == 1  # carried on locally in between
    store.now_ms = 9_000_000  # the store's view wins at the next sample
    mono.now_s += 1.0
    assert clock.now_ms() == 9_000_000 and store.asked == 2


def test_the_store_clock_carries_on_from_its_last_sample_while_the_store_is_down() -> None:
    store, mono = Store(), Monotonic()
    clock = StoreClock(store, refresh_ms=1_000, monotonic=mono)
    store.down = True
    with pytest.raises(MetadataError):
        clock.now_ms()  # nothing to carry on from
    store.down = False
    assert clock.now_ms() == 5_000_000
    store.down = True
    mono.now_s += 3.0
    assert clock.now_ms() == 5_003_000


def test_the_test_clock_offset_skews_this_process_and_a_bad_one_is_refused(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv(OFFSET_VARIABLE, "-3600000")
    behind = wall_clock_ms()
    monkeypatch.delenv(OFFSET_VARIABLE)
    assert 3_500_000 < wall_clock_ms() - behind < 3_700_000
    # The in-memory store lives in its users' process: its clock is theirs, skew included.
    monkeypatch.setenv(OFFSET_VARIABLE, "3600000")
    assert abs(InMemoryMetadataStore().store_now_ms() - wall_clock_ms()) < 1_000
    monkeypatch.setenv(OFFSET_VARIABLE, "soon")
    with pytest.raises(ValueError, match=OFFSET_VARIABLE):
        wall_clock_ms()
