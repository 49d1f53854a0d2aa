"""The bookie registry: liveness by heartbeat age, placement from live writable bookies, and the
cookie check that keeps a wiped or swapped disk from serving as the bookie it replaced."""

from __future__ import annotations

import json
import random
from collections import Counter
from pathlib import Path

import pytest

import bookie.cookie
from bookie.cookie import COOKIE_FILE, CookieMismatchError, establish_cookie, read_disk_cookie
from bookie.registry import (
    BookieRecord,
    BookieState,
    MetadataBookieRegistry,
    NotEnoughBookiesError,
    RegistryConfig,
)
from managed_ledger.metadata.memory import InMemoryMetadataStore

TIMEOUT_MS = 10_000


class Clock:
    def __init__(self, now_ms: int = 1_000_000) -> None:
        self.now_ms = now_ms

    def __call__(self) -> int:
        return self.now_ms


def _registry(store: InMemoryMetadataStore, clock: Clock, seed: int = 7) -> MetadataBookieRegistry:
    return MetadataBookieRegistry(store, RegistryConfig(TIMEOUT_MS), clock, random.Random(seed))


def _put(store: InMemoryMetadataStore, bookie_id: str, beat_ms: int, **kw: object) -> None:
    store.put_bookie(BookieRecord(bookie_id, f"i-{bookie_id}", heartbeat_ms=beat_ms, **kw))  # type: ignore[arg-type]


@pytest.fixture
def store() -> InMemoryMetadataStore:
    return InMemoryMetadataStore()


def test_an_expired_heartbeat_means_down(store: InMemoryMetadataStore) -> None:
    clock = Clock()
    _put(store, "a:1", clock.now_ms, state=BookieState.WRITABLE, ledgers=3, free_bytes=9)
    _put(store, "b:1", clock.now_ms - TIMEOUT_MS, state=BookieState.WRITABLE)
    _put(store, "c:1", clock.now_ms - TIMEOUT_MS + 1, state=BookieState.READ_ONLY)
    registry = _registry(store, clock)
    states = {b.bookie_id: b.state for b in registry.all_bookies()}
    assert states == {"a:1": BookieState.WRITABLE, "b:1": BookieState.DOWN, "c:1": BookieState.READ_ONLY}
    assert [b.bookie_id for b in registry.live_bookies()] == ["a:1", "c:1"]
    clock.now_ms += 2
    assert [b.bookie_id for b in registry.live_bookies()] == ["a:1"]


def test_ensemble_only_from_live_writable_bookies_not_excluded(store: InMemoryMetadataStore) -> None:
    clock = Clock()
    for name in ("a:1", "b:1", "c:1", "d:1"):
        _put(store, name, clock.now_ms, state=BookieState.WRITABLE)
    _put(store, "ro:1", clock.now_ms, state=BookieState.READ_ONLY)
    _put(store, "gone:1", 0, state=BookieState.WRITABLE)
    _put(store, "dec:1", clock.now_ms, state=BookieState.DECOMMISSIONING)
    registry = _registry(store, clock)
    seen: set[str] = set()
    for _ in range(50):
        ensemble = registry.choose_ensemble(3, exclude=["d:1"])
        assert len(ensemble) == 3 == len(set(ensemble))
        seen.update(ensemble)
    assert seen == {"a:1", "b:1", "c:1"}
    with pytest.raises(NotEnoughBookiesError, match="need 4 live writable bookies, have 3"):
        registry.choose_ensemble(4, exclude=["d:1"])
    with pytest.raises(ValueError):
        registry.choose_ensemble(0)


def test_serving_bookies_are_the_live_ones_not_drained(store: InMemoryMetadataStore) -> None:
    """What readiness probes: a bookie whose heartbeat expired (lost for good) leaves the list,
    a new one joins it; a read-only one stays (it serves reads), a drained one does not."""
    clock = Clock()
    _put(store, "a:1", clock.now_ms, state=BookieState.WRITABLE)
    _put(store, "ro:1", clock.now_ms, state=BookieState.READ_ONLY)
    _put(store, "lost:1", clock.now_ms - TIMEOUT_MS, state=BookieState.WRITABLE)
    _put(store, "done:1", clock.now_ms, state=BookieState.DECOMMISSIONED)
    registry = _registry(store, clock)
    assert registry.serving_bookies() == ("a:1", "ro:1")
    _put(store, "new:1", clock.now_ms, state=BookieState.WRITABLE)
    assert registry.serving_bookies() == ("a:1", "new:1", "ro:1")


def test_placement_spreads_and_favours_the_emptier_bookies(store: InMemoryMetadataStore) -> None:
    clock = Clock()
    for name, ledgers in (("a:1", 0), ("b:1", 0), ("c:1", 0), ("full:1", 99)):
        _put(store, name, clock.now_ms, state=BookieState.WRITABLE, ledgers=ledgers)
    registry = _registry(store, clock)
    firsts = Counter(registry.choose_ensemble(2)[0] for _ in range(600))
    assert {"a:1", "b:1", "c:1"} <= firsts.keys()  # not always the same first bookie
    assert firsts["full:1"] < min(firsts["a:1"], firsts["b:1"], firsts["c:1"])
    # Every bookie can still be chosen when it is needed.
    assert set(registry.choose_ensemble(4)) == {"a:1", "b:1", "c:1", "full:1"}


def test_first_start_writes_the_cookie_to_disk_and_store(
    store: InMemoryMetadataStore, tmp_path: Path
) -> None:
    cookie = establish_cookie(store, "a:1", tmp_path)
    on_disk = read_disk_cookie(tmp_path)
    assert on_disk is not None and on_disk.instance_id == cookie.instance_id
    assert store.get_bookie_cookie("a:1") == cookie and cookie.data_dir == str(tmp_path.resolve())
    assert establish_cookie(store, "a:1", tmp_path) == cookie  # the next start matches


def test_a_wiped_disk_is_refused_until_formatted(store: InMemoryMetadataStore, tmp_path: Path) -> None:
    first = establish_cookie(store, "a:1", tmp_path)
    (tmp_path / COOKIE_FILE).unlink()
    with pytest.raises(CookieMismatchError, match=r"wiped.*--format"):
        establish_cookie(store, "a:1", tmp_path)
    (tmp_path / "journal").mkdir()
    (tmp_path / "journal" / "old").write_bytes(b"x")
    formatted = establish_cookie(store, "a:1", tmp_path, format_disk=True)
    assert formatted.instance_id != first.instance_id
    assert store.get_bookie_cookie("a:1") == formatted and not (tmp_path / "journal").exists()
    assert establish_cookie(store, "a:1", tmp_path) == formatted


def test_a_format_that_dies_part_way_leaves_a_disk_that_is_refused(
    store: InMemoryMetadataStore, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    establish_cookie(store, "a:1", tmp_path)
    (tmp_path / "journal").mkdir()
    (tmp_path / "journal" / "old").write_bytes(b"x")

    def dies(data_dir: Path, cookie: object) -> None:
        raise OSError("the process died between erasing the data and writing the new cookie")

    monkeypatch.setattr(bookie.cookie, "write_disk_cookie", dies)
    with pytest.raises(OSError):
        establish_cookie(store, "a:1", tmp_path, format_disk=True)
    monkeypatch.undo()
    assert not (tmp_path / "journal").exists()  # erased: the old instance's copies are gone
    with pytest.raises(CookieMismatchError, match=r"wiped.*--format"):  # a plain restart
        establish_cookie(store, "a:1", tmp_path)
    assert establish_cookie(store, "a:1", tmp_path, format_disk=True).bookie_id == "a:1"


def test_a_swapped_disk_is_refused(store: InMemoryMetadataStore, tmp_path: Path) -> None:
    establish_cookie(store, "a:1", tmp_path / "a")
    establish_cookie(store, "b:1", tmp_path / "b")
    with pytest.raises(CookieMismatchError, match="belongs to bookie b:1"):
        establish_cookie(store, "a:1", tmp_path / "b")
    other = InMemoryMetadataStore()
    establish_cookie(other, "a:1", tmp_path / "c")  # a disk of another cluster's a:1
    with pytest.raises(CookieMismatchError, match="swapped"):
        establish_cookie(store, "a:1", tmp_path / "c")


def test_a_disk_cookie_without_a_store_record_is_adopted(
    store: InMemoryMetadataStore, tmp_path: Path
) -> None:
    old = establish_cookie(InMemoryMetadataStore(), "a:1", tmp_path)
    adopted = establish_cookie(store, "a:1", tmp_path)
    assert adopted.instance_id == old.instance_id and store.get_bookie_cookie("a:1") == adopted


def test_an_unreadable_cookie_file_is_refused(store: InMemoryMetadataStore, tmp_path: Path) -> None:
    (tmp_path / COOKIE_FILE).write_text(json.dumps({"bookieId": "a:1"}))
    with pytest.raises(CookieMismatchError, match="unreadable"):
        establish_cookie(store, "a:1", tmp_path)


def test_a_cookie_of_an_unknown_layout_is_refused(store: InMemoryMetadataStore, tmp_path: Path) -> None:
    establish_cookie(store, "a:1", tmp_path)
    raw = json.loads((tmp_path / COOKIE_FILE).read_text())
    assert raw["layoutVersion"] == 1
    (tmp_path / COOKIE_FILE).write_text(json.dumps({**raw, "layoutVersion": 2}))
    with pytest.raises(CookieMismatchError, match="layout version 2"):
        establish_cookie(store, "a:1", tmp_path)


# --- heartbeats judged by the reader's clock (reliability review 2026-11-28, finding 11) ---------


def test_a_reader_whose_clock_runs_ahead_sees_a_heartbeating_bookie_alive(
    store: InMemoryMetadataStore,
) -> None:
    bookie_clock, reader_clock = Clock(), Clock(1_000_000 + 10 * TIMEOUT_MS)  # reader ahead
    registry = _registry(store, reader_clock)
    for _ in range(5):
        _put(store, "a:1", bookie_clock.now_ms, state=BookieState.WRITABLE)
        registry.live_bookies()
        bookie_clock.now_ms += 1_000
        reader_clock.now_ms += 1_000
    assert [b.bookie_id for b in registry.live_bookies()] == ["a:1"]  # not fenced as lost
    reader_clock.now_ms += TIMEOUT_MS  # it stopped heartbeating: down one timeout later
    assert registry.live_bookies() == []


def test_a_reader_whose_clock_runs_behind_sees_a_stopped_bookie_go_down(store: InMemoryMetadataStore) -> None:
    bookie_clock, reader_clock = Clock(1_000_000 + 10 * TIMEOUT_MS), Clock()  # reader behind
    registry = _registry(store, reader_clock)
    _put(store, "a:1", bookie_clock.now_ms, state=BookieState.WRITABLE)
    assert [b.bookie_id for b in registry.live_bookies()] == ["a:1"]
    reader_clock.now_ms += TIMEOUT_MS  # no heartbeat since: down, though its stamp is "future"
    assert registry.live_bookies() == []
