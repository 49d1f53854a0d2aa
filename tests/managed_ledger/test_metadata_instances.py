"""The metadata store contract for bookie instance ids (review 2026-11-28, findings 2 and 9),
run against every store by the fixtures of `test_metadata_contract`: per-segment instance ids
round-trip, and a registration from an instance the cookie no longer names is refused."""

from __future__ import annotations

from dataclasses import replace

import pytest

from bookie.errors import InstanceReplacedError
from bookie.registry import BookieCookie, BookieRecord, BookieState
from managed_ledger.metadata.api import MetadataStore
from tests.managed_ledger.test_metadata_contract import Opener, opener, store  # noqa: F401


def test_segment_instance_ids_round_trip(store: MetadataStore) -> None:  # noqa: F811
    instances = ((0, "b1:1", "i-1"), (0, "b2:2", "i-2"))
    created = store.create_ledger(("b1:1", "b2:2"), 2, 2, 1, instances)
    assert created.instances == instances and created.segment_instances(0) == {"b1:1": "i-1", "b2:2": "i-2"}
    history = ((0, ("b1:1", "b2:2")), (5, ("b3:3", "b2:2")))
    changed = store.update_ledger(
        replace(created, ensembles=history, instances=(*instances, (5, "b3:3", "i-3")))
    )
    assert store.get_ledger(created.ledger_id) == changed and changed.segment_instances(5) == {"b3:3": "i-3"}
    assert store.create_ledger(("b1:1",), 1, 1, 1).instances == ()  # none known: judged as before


def test_a_registration_from_an_instance_the_cookie_no_longer_names_is_refused(opener: Opener) -> None:  # noqa: F811
    first, other = opener(), opener()
    cookie = first.put_bookie_cookie(BookieCookie("b1:3181", "i1", "/d", created_ms=5))
    first.put_bookie(BookieRecord("b1:3181", "i1", BookieState.WRITABLE, heartbeat_ms=1))
    other.put_bookie_cookie(replace(cookie, instance_id="i2"))  # formatted as new elsewhere
    other.put_bookie(BookieRecord("b1:3181", "i2", BookieState.WRITABLE, heartbeat_ms=2))
    with pytest.raises(InstanceReplacedError):
        first.put_bookie(BookieRecord("b1:3181", "i1", BookieState.WRITABLE, heartbeat_ms=3))
    (stored,) = first.list_bookies()
    assert (stored.instance_id, stored.heartbeat_ms) == ("i2", 2)
