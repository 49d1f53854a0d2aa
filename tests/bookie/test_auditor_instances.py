"""The auditor's "formatted since" rule by instance ids (review 2026-11-28, findings 2 and 6).

A bookie counts as formatted since it entered a segment when its cookie now names another
instance than the one recorded in that segment; the cookie's creation time is used only where no
instance was recorded. A bookie that joined a ledger by an ensemble change after the ledger was
made is therefore not listed as missing, and one wiped and formatted after entering is.
"""

from __future__ import annotations

from dataclasses import replace

from bookie.auditor import Auditor, AuditorConfig
from bookie.registry import BookieCookie, BookieRecord, BookieState, MetadataBookieRegistry, RegistryConfig
from managed_ledger.metadata.memory import InMemoryMetadataStore

NOW = 100_000


def _store_with_bookies(instances: dict[str, tuple[str, int]]) -> InMemoryMetadataStore:
    store = InMemoryMetadataStore()
    for address, (instance, created_ms) in instances.items():
        store.put_bookie_cookie(BookieCookie(address, instance, "/d", created_ms))
        store.put_bookie(BookieRecord(address, instance, BookieState.WRITABLE, NOW))
    return store


def _listed(store: InMemoryMetadataStore) -> list[tuple[int, tuple[str, ...]]]:
    registry = MetadataBookieRegistry(store, RegistryConfig(10_000), lambda: NOW)
    assert Auditor(store, registry, AuditorConfig("a1"), lambda: NOW).audit_once().leader
    return [(r.ledger_id, r.missing) for r in store.list_underreplicated()]


def test_a_bookie_that_joined_after_the_ledger_was_made_is_not_formatted_since() -> None:
    store = _store_with_bookies({"a:1": ("ia", 1), "b:1": ("ib", 1), "d:1": ("id", 5_000)})
    created = store.create_ledger(("a:1", "b:1"), 2, 2, 1_000, ((0, "a:1", "ia"), (0, "b:1", "ib")))
    history = ((0, ("a:1", "b:1")), (7, ("a:1", "d:1")))  # b replaced by d, which joined later
    recorded = (*created.instances, (7, "a:1", "ia"), (7, "d:1", "id"))
    store.update_ledger(replace(created, ensembles=history, instances=recorded))
    assert _listed(store) == []


def test_a_bookie_formatted_after_it_entered_a_segment_is_listed() -> None:
    store = _store_with_bookies({"a:1": ("ia", 1), "b:1": ("ib-new", 500)})  # formatted before...
    store.create_ledger(("a:1", "b:1"), 2, 2, 1_000, ((0, "a:1", "ia"), (0, "b:1", "ib-old")))
    # ...by its clock, yet the ledger recorded another instance: the instance decides, not clocks.
    assert _listed(store) == [(1, ("b:1",))]


def test_without_recorded_instances_no_clock_decides() -> None:
    """A row from before instance ids: the cookie's age against the ledger's (two machines'
    clocks) lists nobody; the ledger check asks the bookies instead (tests/bookie/test_ledger_checker.py)."""
    store = _store_with_bookies({"a:1": ("ia", 1), "b:1": ("ib", 5_000)})
    store.create_ledger(("a:1", "b:1"), 2, 2, 1_000)
    assert _listed(store) == []
