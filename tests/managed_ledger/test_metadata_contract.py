"""One contract for every MetadataStore: the in-memory fake, SQLite and PostgreSQL.

Like ZODB's storage tests, the same functions run against each backend so that the fake the
managed-ledger unit tests rely on cannot drift from the real store. SQL backends come from the
same helpers as the `metadata_url` fixture (fresh SQLite file or fresh PostgreSQL schema).
"""

from __future__ import annotations

import copy
import json
import pickle
import threading
from collections.abc import Callable, Iterator
from dataclasses import asdict, replace
from pathlib import Path
from typing import Any

import pytest

from bookie.ledger_metadata import ensemble_history
from bookie.registry import BookieCookie, BookieRecord, BookieState
from managed_ledger.metadata.api import (
    AlreadyExistsError,
    BadVersionError,
    CompactionState,
    CompactionStatus,
    CursorMetadata,
    DedupSnapshot,
    LedgerState,
    MetadataStore,
    NotEmptyError,
    NotFoundError,
    TopicMetadata,
)
from managed_ledger.metadata.memory import InMemoryMetadataStore
from managed_ledger.position import Position
from tests.conftest import drop_postgres_schema, fresh_postgres_schema_url

Opener = Callable[[], MetadataStore]


@pytest.fixture(params=["memory", "sqlite", "postgres"])
def opener(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Opener]:
    """Opens stores on one fresh database; every call is a new store instance (own engine)."""
    opened: list[MetadataStore] = []
    if request.param == "memory":
        shared = InMemoryMetadataStore()
        yield lambda: shared
        return
    from managed_ledger.metadata.sql import SqlMetadataStore

    schema = None
    if request.param == "sqlite":
        url = f"sqlite:///{tmp_path / 'metadata.db'}"
    else:
        base = request.getfixturevalue("postgres_url")
        url, schema = fresh_postgres_schema_url(base)

    def open_store() -> MetadataStore:
        store = SqlMetadataStore(url)
        opened.append(store)
        return store

    try:
        yield open_store
    finally:
        for store in opened:
            store.close()
        if schema is not None:
            drop_postgres_schema(request.getfixturevalue("postgres_url"), schema)


@pytest.fixture
def store(opener: Opener) -> MetadataStore:
    return opener()


# --- ledgers ---------------------------------------------------------------------------------
def test_ledger_ids_unique_and_increasing(store: MetadataStore) -> None:
    ids = [store.create_ledger(("b1:3181",), 1, 1, created_ms=i).ledger_id for i in range(5)]
    assert ids == sorted(ids) and len(set(ids)) == 5
    store.delete_ledger(ids[-1])
    # A deleted id is never handed out again (SQLite AUTOINCREMENT, PostgreSQL SEQUENCE).
    assert store.create_ledger(("b1:3181",), 1, 1, created_ms=9).ledger_id > ids[-1]


def test_ledger_ids_increase_across_store_instances(opener: Opener) -> None:
    a, b = opener(), opener()
    ids = []
    for _ in range(3):
        ids.append(a.create_ledger(("b:1",), 1, 1, 0).ledger_id)
        ids.append(b.create_ledger(("b:1",), 1, 1, 0).ledger_id)
    assert ids == sorted(ids) and len(set(ids)) == 6


def test_ledger_create_get_update(store: MetadataStore) -> None:
    created = store.create_ledger(("b1:1", "b2:2"), 2, 1, created_ms=123)
    assert created.state is LedgerState.OPEN
    assert (created.ensemble, created.write_quorum, created.ack_quorum) == (("b1:1", "b2:2"), 2, 1)
    assert (created.last_entry_id, created.length_bytes, created.created_ms) == (-1, 0, 123)
    assert created.closed_ms is None and created.version == 1
    assert store.get_ledger(created.ledger_id) == created

    closed = store.update_ledger(
        replace(created, state=LedgerState.CLOSED, last_entry_id=41, length_bytes=4200, closed_ms=999)
    )
    assert closed.version == 2
    assert store.get_ledger(created.ledger_id) == closed
    assert closed.state is LedgerState.CLOSED and closed.last_entry_id == 41
    assert [lg.ledger_id for lg in store.list_ledgers()] == [created.ledger_id]


def test_ledger_ensemble_history_round_trips(store: MetadataStore) -> None:
    created = store.create_ledger(("b1:1", "b2:2", "b3:3"), 2, 2, created_ms=1)
    assert created.ensembles == ((0, ("b1:1", "b2:2", "b3:3")),)
    assert ensemble_history(created) == created.ensembles
    history = ((0, ("b1:1", "b2:2", "b3:3")), (17, ("b1:1", "b4:4", "b3:3")), (40, ("b5:5", "b4:4", "b3:3")))
    changed = store.update_ledger(replace(created, ensembles=history))
    assert changed.ensembles == history and changed.ensemble == ("b1:1", "b2:2", "b3:3")
    assert store.get_ledger(created.ledger_id) == changed
    assert store.list_ledgers() == [changed]


def test_an_empty_ensemble_history_means_the_first_ensemble(store: MetadataStore) -> None:
    created = store.create_ledger(("b1:1", "b2:2"), 2, 1, created_ms=1)
    again = store.update_ledger(replace(created, ensembles=()))
    assert again.ensembles == ((0, ("b1:1", "b2:2")),)
    assert store.get_ledger(created.ledger_id).ensembles == ((0, ("b1:1", "b2:2")),)
    assert ensemble_history(replace(again, ensembles=())) == ((0, ("b1:1", "b2:2")),)


def test_ledger_cas_stale_version_fails_and_keeps_winner(store: MetadataStore) -> None:
    ledger = store.create_ledger(("b:1",), 1, 1, 0)
    winner = store.update_ledger(replace(ledger, state=LedgerState.IN_RECOVERY))
    with pytest.raises(BadVersionError):
        store.update_ledger(replace(ledger, state=LedgerState.CLOSED))
    assert store.get_ledger(ledger.ledger_id) == winner


def test_ledger_not_found(store: MetadataStore) -> None:
    ledger = store.create_ledger(("b:1",), 1, 1, 0)
    store.delete_ledger(ledger.ledger_id)
    with pytest.raises(NotFoundError):
        store.get_ledger(ledger.ledger_id)
    with pytest.raises(NotFoundError):
        store.update_ledger(ledger)
    with pytest.raises(NotFoundError):
        store.delete_ledger(ledger.ledger_id)
    assert store.list_ledgers() == []


def test_concurrent_updaters_on_two_instances_one_wins(opener: Opener) -> None:
    a, b = opener(), opener()
    ledger = a.create_ledger(("b:1",), 1, 1, 0)
    seen = b.get_ledger(ledger.ledger_id)
    outcomes: list[str] = []
    barrier = threading.Barrier(2)

    def race(s: MetadataStore, last: int) -> None:
        barrier.wait(timeout=10)
        try:
            s.update_ledger(replace(seen, state=LedgerState.CLOSED, last_entry_id=last))
            outcomes.append(f"won:{last}")
        except BadVersionError:
            outcomes.append("lost")

    threads = [threading.Thread(target=race, args=(s, n)) for s, n in ((a, 10), (b, 20))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=30)
    assert sorted(outcomes)[0] == "lost" and len(outcomes) == 2
    winner_last = int(next(o for o in outcomes if o.startswith("won")).split(":")[1])
    final = a.get_ledger(ledger.ledger_id)
    assert final.last_entry_id == winner_last and final.version == 2


# --- managed ledgers and cursors --------------------------------------------------------------
def test_managed_ledger_lifecycle(store: MetadataStore) -> None:
    assert store.get_managed_ledger("public/default/t") is None
    ml = store.create_managed_ledger("public/default/t")
    assert (ml.ledger_ids, dict(ml.properties), ml.version) == ((), {}, 1)
    with pytest.raises(AlreadyExistsError):
        store.create_managed_ledger("public/default/t")
    ml2 = store.update_managed_ledger(replace(ml, ledger_ids=(3, 7, 5), properties={"k": "v"}))
    assert ml2.ledger_ids == (3, 7, 5) and ml2.version == 2
    assert store.get_managed_ledger("public/default/t") == ml2
    with pytest.raises(BadVersionError):
        store.update_managed_ledger(replace(ml, ledger_ids=(1,)))
    store.delete_managed_ledger("public/default/t")
    assert store.get_managed_ledger("public/default/t") is None
    with pytest.raises(NotFoundError):
        store.update_managed_ledger(ml2)
    with pytest.raises(NotFoundError):
        store.delete_managed_ledger("public/default/t")


def _cursor(name: str, ml: str = "ml") -> CursorMetadata:
    return CursorMetadata(
        managed_ledger=ml,
        name=name,
        mark_delete=Position(4, -1),
        individually_deleted=(((4, 2), (4, 5)), ((6, 0), (6, 0))),
        properties={"type": "shared", "ack_timeout_ms": 30000, "nested": {"a": [1, 2]}},
    )


def test_cursor_round_trip_and_cas(store: MetadataStore) -> None:
    store.create_managed_ledger("ml")
    created = store.create_cursor(_cursor("sub"))
    assert created.version == 1
    assert created.mark_delete == (4, -1) and type(created.mark_delete) is tuple
    assert created.individually_deleted == (((4, 2), (4, 5)), ((6, 0), (6, 0)))
    assert created.properties == {"type": "shared", "ack_timeout_ms": 30000, "nested": {"a": (1, 2)}}
    with pytest.raises(AlreadyExistsError):
        store.create_cursor(_cursor("sub"))
    moved = store.update_cursor(replace(created, mark_delete=(6, 0), individually_deleted=()))
    assert moved.version == 2 and store.list_cursors("ml") == [moved]
    with pytest.raises(BadVersionError):
        store.update_cursor(replace(created, mark_delete=(9, 9)))
    store.delete_cursor("ml", "sub")
    assert store.list_cursors("ml") == []
    with pytest.raises(NotFoundError):
        store.delete_cursor("ml", "sub")
    with pytest.raises(NotFoundError):
        store.update_cursor(moved)


def test_cursor_delivery_state_is_kept_by_create_update_and_batch(store: MetadataStore) -> None:
    store.create_managed_ledger("ml")
    plain = store.create_cursor(_cursor("plain"))
    assert plain.delivery_state is None and store.list_cursors("ml")[0].delivery_state is None
    state: dict[str, Any] = {"v": 1, "entries": [[4, 3, 10, [0, 2], {"1": 0, "5": 2}]]}
    created = store.create_cursor(replace(_cursor("sub"), delivery_state=state))
    state["entries"].clear()  # the caller's later changes never reach the store
    assert created.delivery_state == {"v": 1, "entries": ((4, 3, 10, (0, 2), {"1": 0, "5": 2}),)}
    with pytest.raises(TypeError):
        created.delivery_state["v"] = 2  # type: ignore[index]
    assert store.list_cursors("ml")[1] == created
    # An update that does not name it keeps it; the batched flush writes it per cursor.
    moved = store.update_cursor(replace(created, mark_delete=(4, 0)))
    assert moved.delivery_state == created.delivery_state
    a, b = store.update_cursors(
        [replace(plain, delivery_state={"v": 1, "entries": []}), replace(moved, delivery_state=None)]
    )
    assert (a.delivery_state, b.delivery_state) == ({"v": 1, "entries": ()}, None)
    assert store.list_cursors("ml") == [a, b]
    assert json.loads(json.dumps(asdict(a)))["delivery_state"] == {"v": 1, "entries": []}
    # A stale batch writes no delivery state either.
    with pytest.raises(BadVersionError):
        store.update_cursors([replace(a, delivery_state=None), replace(moved, delivery_state={"x": 1})])
    assert store.list_cursors("ml") == [a, b]


def test_cursor_needs_its_managed_ledger(store: MetadataStore) -> None:
    with pytest.raises(NotFoundError):
        store.create_cursor(_cursor("sub", ml="missing"))


def test_update_cursors_batch_is_all_or_nothing(store: MetadataStore) -> None:
    store.create_managed_ledger("ml")
    a, b, c = (store.create_cursor(_cursor(n)) for n in ("a", "b", "c"))
    a2, b2 = store.update_cursors([replace(a, mark_delete=(5, 1)), replace(b, mark_delete=(5, 2))])
    assert (a2.version, b2.version) == (2, 2)
    assert store.update_cursors([]) == []
    # c is fine, a is stale: nothing of the batch is written.
    with pytest.raises(BadVersionError):
        store.update_cursors([replace(c, mark_delete=(7, 7)), replace(a, mark_delete=(8, 8))])
    by_name = {cur.name: cur for cur in store.list_cursors("ml")}
    assert by_name == {"a": a2, "b": b2, "c": c}
    store.delete_cursor("ml", "b")
    with pytest.raises(NotFoundError):
        store.update_cursors([replace(c, mark_delete=(7, 7)), b2])
    assert store.list_cursors("ml")[1] == c
    # A cursor named twice is refused as such before anything else, even beside a missing one
    # (the SQL and in-memory stores once answered this batch differently).
    with pytest.raises(BadVersionError, match="twice"):
        store.update_cursors([replace(c, mark_delete=(7, 7)), replace(c, mark_delete=(8, 8)), b2])
    assert store.list_cursors("ml")[1] == c


def test_cursors_listed_per_managed_ledger_in_name_order(store: MetadataStore) -> None:
    store.create_managed_ledger("ml")
    store.create_managed_ledger("other")
    for name in ("z", "a", "m"):
        store.create_cursor(_cursor(name))
    store.create_cursor(_cursor("x", ml="other"))
    assert [c.name for c in store.list_cursors("ml")] == ["a", "m", "z"]
    assert [c.name for c in store.list_cursors("other")] == ["x"]
    assert store.list_cursors("nothing") == []


# --- dedup -----------------------------------------------------------------------------------
def test_dedup_snapshot_create_update_cas(store: MetadataStore) -> None:
    store.create_managed_ledger("ml")
    assert store.get_dedup_snapshot("ml") is None
    first = store.put_dedup_snapshot(DedupSnapshot("ml", Position(3, 10), {"p1": 5, "p2": 9}))
    assert first.version == 1 and first.position == (3, 10) and first.sequences == {"p1": 5, "p2": 9}
    with pytest.raises(BadVersionError):
        store.put_dedup_snapshot(DedupSnapshot("ml", (3, 11), {"p1": 6}))  # version 0 but one exists
    second = store.put_dedup_snapshot(replace(first, position=(4, 0), sequences={"p1": 7}))
    assert store.get_dedup_snapshot("ml") == second and second.version == 2
    with pytest.raises(BadVersionError):
        store.put_dedup_snapshot(replace(first, position=(9, 9)))
    with pytest.raises(NotFoundError):
        store.put_dedup_snapshot(DedupSnapshot("missing", (0, 0), {}))


def test_delete_managed_ledger_cascades_to_cursors_and_dedup(store: MetadataStore) -> None:
    store.create_managed_ledger("ml")
    store.create_managed_ledger("keep")
    store.create_cursor(_cursor("sub"))
    kept = store.create_cursor(_cursor("sub", ml="keep"))
    store.put_dedup_snapshot(DedupSnapshot("ml", (1, 1), {"p": 1}))
    ledger = store.create_ledger(("b:1",), 1, 1, 0)
    store.delete_managed_ledger("ml")
    assert store.list_cursors("ml") == [] and store.get_dedup_snapshot("ml") is None
    assert store.list_cursors("keep") == [kept]
    assert store.get_ledger(ledger.ledger_id) == ledger  # ledgers are deleted by the caller
    store.create_managed_ledger("ml")  # the name is free again, with nothing left behind
    assert store.list_cursors("ml") == [] and store.get_dedup_snapshot("ml") is None


# --- tenants, namespaces, topics -------------------------------------------------------------
def test_public_default_exists_from_start(store: MetadataStore) -> None:
    assert "public" in store.list_tenants()
    assert store.list_namespaces("public") == ["public/default"]


def test_tenants_and_namespaces(store: MetadataStore) -> None:
    store.create_tenant("acme")
    with pytest.raises(AlreadyExistsError):
        store.create_tenant("acme")
    assert store.list_tenants() == ["acme", "public"]
    with pytest.raises(NotFoundError):
        store.create_namespace("nobody/ns")
    store.create_namespace("acme/b")
    store.create_namespace("acme/a")
    with pytest.raises(AlreadyExistsError):
        store.create_namespace("acme/a")
    assert store.list_namespaces("acme") == ["acme/a", "acme/b"]
    with pytest.raises(NotEmptyError):
        store.delete_tenant("acme")
    store.delete_namespace("acme/a")
    store.delete_namespace("acme/b")
    with pytest.raises(NotFoundError):
        store.delete_namespace("acme/b")
    store.delete_tenant("acme")
    with pytest.raises(NotFoundError):
        store.delete_tenant("acme")
    assert store.list_tenants() == ["public"]


def test_topics(store: MetadataStore) -> None:
    with pytest.raises(NotFoundError):
        store.create_topic(TopicMetadata("public/nowhere/t"))
    t = store.create_topic(TopicMetadata("public/default/t", partitions=0, created_ms=5))
    assert t == TopicMetadata("public/default/t", 0, 5, version=1)
    with pytest.raises(AlreadyExistsError):
        store.create_topic(TopicMetadata("public/default/t"))
    store.create_topic(TopicMetadata("public/default/a", partitions=3))
    assert [x.name for x in store.list_topics("public/default")] == ["public/default/a", "public/default/t"]
    assert store.get_topic("public/default/t") == t and store.get_topic("public/default/zz") is None
    t2 = store.update_topic(replace(t, partitions=4))
    assert t2.partitions == 4 and t2.version == 2
    with pytest.raises(BadVersionError):
        store.update_topic(replace(t, partitions=8))
    with pytest.raises(NotEmptyError):
        store.delete_namespace("public/default")
    store.delete_topic("public/default/t")
    assert store.get_topic("public/default/t") is None
    with pytest.raises(NotFoundError):
        store.delete_topic("public/default/t")
    with pytest.raises(NotFoundError):
        store.update_topic(t2)


def test_delete_topic_removes_its_policies_and_compaction_states(store: MetadataStore) -> None:
    store.create_topic(TopicMetadata("public/default/t", partitions=2))
    store.set_policies("public/default/t", {"retention": {"time": 5}})
    store.set_policies("public/default", {"dedup": True})
    for name in ("public/default/t", "public/default/t-partition-0", "public/default/tt"):
        store.put_compaction(CompactionState(topic=name, status=CompactionStatus.SUCCESS))
    store.delete_topic("public/default/t")
    assert store.get_policies("public/default/t") == {}
    assert store.get_policies("public/default") == {"dedup": True}
    assert [c.topic for c in store.list_compactions()] == ["public/default/tt"]


def test_delete_namespace_removes_its_policies(store: MetadataStore) -> None:
    store.create_namespace("public/ns")
    store.set_policies("public/ns", {"x": 1})
    store.delete_namespace("public/ns")
    store.create_namespace("public/ns")
    assert store.get_policies("public/ns") == {}


# --- policies ----------------------------------------------------------------------------------
def test_policies_round_trip(store: MetadataStore) -> None:
    assert store.get_policies("public/default/t") == {}
    value: dict[str, Any] = {
        "retention": {"retentionTimeInMinutes": -1, "retentionSizeInMB": 10},
        "compactionThreshold": 1024,
        "deduplicationEnabled": True,
        "list": [1, "two", None, 3.5],
    }
    store.set_policies("public/default/t", value)
    got = store.get_policies("public/default/t")
    assert got == value and type(got) is dict
    got["compactionThreshold"] = 0  # the caller's copy is its own
    value["deduplicationEnabled"] = False
    assert store.get_policies("public/default/t")["compactionThreshold"] == 1024
    assert store.get_policies("public/default/t")["deduplicationEnabled"] is True
    store.set_policies("public/default/t", {"only": 1})
    assert store.get_policies("public/default/t") == {"only": 1}


# --- compaction --------------------------------------------------------------------------------
def test_compaction_state_create_update(store: MetadataStore) -> None:
    fresh = store.get_compaction("public/default/t")
    assert fresh == CompactionState(topic="public/default/t") and fresh.version == 0
    assert store.list_compactions() == []
    running = store.put_compaction(
        replace(fresh, status=CompactionStatus.RUNNING, started_ms=1, run_ledger_id=9)
    )
    assert running.version == 1 and store.get_compaction("public/default/t") == running
    with pytest.raises(BadVersionError):
        store.put_compaction(replace(fresh, status=CompactionStatus.RUNNING))  # a second trigger loses
    done = store.put_compaction(
        replace(
            running,
            status=CompactionStatus.SUCCESS,
            compacted_ledger_id=9,
            horizon=(12, 40, 3),
            ended_ms=2,
            messages_in=100,
            messages_out=10,
            compacted_entries=10,
            compacted_size_bytes=1000,
            last_succeeded_ms=2,
            run_ledger_id=None,
        )
    )
    assert done.version == 2 and done.horizon == (12, 40, 3) and done.status is CompactionStatus.SUCCESS
    assert store.get_compaction("public/default/t") == done
    assert store.list_compactions() == [done]
    with pytest.raises(BadVersionError):
        store.put_compaction(replace(running, status=CompactionStatus.ERROR, last_error="late"))


def test_a_layered_view_round_trips(store: MetadataStore) -> None:
    """The layered view's fields (base, deltas in order, the rules they were written under, the
    layers a fold retired) come back as written, and a fold's clearing of them sticks."""
    fresh = store.get_compaction("public/default/t")
    layered = store.put_compaction(
        replace(
            fresh,
            status=CompactionStatus.SUCCESS,
            compacted_ledger_id=9,
            delta_ledger_ids=(31, 12, 40),  # the order is the layers' order, not the ids'
            delta_size_bytes=2_048,
            view_rules="keyless=drop;deleteRetentionMs=0",
            retired_ledger_ids=(3, 4),
        )
    )
    got = store.get_compaction("public/default/t")
    assert got == layered and got.layer_ledger_ids == (9, 31, 12, 40)
    folded = store.put_compaction(
        replace(got, compacted_ledger_id=41, delta_ledger_ids=(), delta_size_bytes=0, retired_ledger_ids=())
    )
    assert store.get_compaction("public/default/t") == folded and folded.layer_ledger_ids == (41,)


def test_compaction_run_lease_is_taken_and_renewed_by_cas(opener: Opener) -> None:
    broker, compactor = opener(), opener()  # two processes' stores on one database
    requested = broker.put_compaction(
        CompactionState(
            topic="public/default/t", status=CompactionStatus.RUNNING, requested=True, lease_expires_ms=5_000
        )
    )
    assert (requested.lease_holder, requested.lease_expires_ms) == ("", 5_000)
    taken = compactor.put_compaction(
        replace(requested, requested=False, lease_holder="compactor-1", lease_expires_ms=30_000)
    )
    assert broker.get_compaction("public/default/t") == taken
    with pytest.raises(BadVersionError):  # a second compactor taking the same request loses
        broker.put_compaction(replace(requested, requested=False, lease_holder="compactor-2"))
    renewed = compactor.put_compaction(replace(taken, lease_expires_ms=40_000))
    assert broker.get_compaction("public/default/t").lease_expires_ms == 40_000
    expired = broker.put_compaction(
        replace(renewed, status=CompactionStatus.ERROR, lease_holder="", lease_expires_ms=None)
    )
    with pytest.raises(BadVersionError):  # the holder's next renewal finds its lease gone
        compactor.put_compaction(replace(renewed, lease_expires_ms=50_000))
    assert compactor.list_compactions() == [expired]
    assert (expired.lease_holder, expired.lease_expires_ms) == ("", None)


# --- records -----------------------------------------------------------------------------------
def test_records_are_deep_immutable_and_plain(store: MetadataStore) -> None:
    store.create_managed_ledger("ml")
    props: dict[str, Any] = {"nested": {"a": [1]}}
    cursor = store.create_cursor(replace(_cursor("sub"), properties=props))
    props["nested"]["a"].append(2)  # the caller's later changes never reach the store
    assert cursor.properties == {"nested": {"a": (1,)}}
    with pytest.raises(TypeError):
        cursor.properties["x"] = 1  # type: ignore[index]
    with pytest.raises(TypeError):
        cursor.properties["nested"]["b"] = 2
    # Still plain data for json/pickle/asdict/copy users above.
    assert json.loads(json.dumps(asdict(cursor)))["properties"] == {"nested": {"a": [1]}}
    assert pickle.loads(pickle.dumps(cursor)) == cursor
    assert copy.deepcopy(cursor) == cursor
    assert store.list_cursors("ml") == [cursor]


def test_update_policies_merges_and_removes(store: MetadataStore) -> None:
    assert store.update_policies("public/default/t", {"a": 1, "b": {"x": [1]}}) == {"a": 1, "b": {"x": [1]}}
    assert store.update_policies("public/default/t", {"a": None, "c": True}) == {"b": {"x": [1]}, "c": True}
    assert store.get_policies("public/default/t") == {"b": {"x": [1]}, "c": True}
    assert store.update_policies("public/default/empty", {"gone": None}) == {}


def test_concurrent_update_policies_of_different_keys_lose_nothing(opener: Opener) -> None:
    stores = [opener(), opener()]
    barrier = threading.Barrier(4)

    def writer(s: MetadataStore, prefix: str) -> None:
        barrier.wait(timeout=10)
        for i in range(10):
            s.update_policies("public/default", {f"{prefix}{i}": i})

    threads = [threading.Thread(target=writer, args=(stores[n % 2], f"w{n}-")) for n in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    assert stores[0].get_policies("public/default") == {f"w{n}-{i}": i for n in range(4) for i in range(10)}


# --- bookies and cookies ---------------------------------------------------------------------
def test_bookie_registration_is_an_upsert_seen_by_every_instance(opener: Opener) -> None:
    first, second = opener(), opener()
    assert first.list_bookies() == []
    first.put_bookie(
        BookieRecord("b2:3181", "i2", BookieState.WRITABLE, heartbeat_ms=10, free_bytes=5, ledgers=1)
    )
    first.put_bookie(BookieRecord("b1:3181", "i1", BookieState.WRITABLE, heartbeat_ms=11))
    renewed = BookieRecord("b2:3181", "i2", BookieState.READ_ONLY, heartbeat_ms=20, free_bytes=3, ledgers=4)
    second.put_bookie(renewed)
    listed = first.list_bookies()
    assert [b.bookie_id for b in listed] == ["b1:3181", "b2:3181"]
    assert listed[1] == renewed


def test_bookie_heartbeat_keeps_a_decommissioning_state(store: MetadataStore) -> None:
    store.put_bookie(BookieRecord("b1:3181", "i1", BookieState.DECOMMISSIONING, heartbeat_ms=1))
    store.put_bookie(BookieRecord("b1:3181", "i1", BookieState.WRITABLE, heartbeat_ms=2, ledgers=7))
    (stored,) = store.list_bookies()
    assert (stored.state, stored.heartbeat_ms, stored.ledgers) == (BookieState.DECOMMISSIONING, 2, 7)


def test_bookie_down_is_not_a_stored_state(store: MetadataStore) -> None:
    with pytest.raises(ValueError, match="down"):
        store.put_bookie(BookieRecord("b1:3181", "i1", BookieState.DOWN, heartbeat_ms=1))
    with pytest.raises(ValueError, match="id"):
        store.put_bookie(BookieRecord("", "i1", BookieState.WRITABLE, heartbeat_ms=1))
    assert store.list_bookies() == []


def test_bookie_cookie_create_and_cas(opener: Opener) -> None:
    store, other = opener(), opener()
    assert store.get_bookie_cookie("b1:3181") is None
    created = store.put_bookie_cookie(BookieCookie("b1:3181", "i1", "/d", created_ms=5))
    assert created.version == 1 and other.get_bookie_cookie("b1:3181") == created
    with pytest.raises(BadVersionError):
        other.put_bookie_cookie(BookieCookie("b1:3181", "i-other", "/d"))
    replaced = other.put_bookie_cookie(replace(created, instance_id="i2"))
    assert replaced.version == 2 and store.get_bookie_cookie("b1:3181") == replaced
    with pytest.raises(BadVersionError):
        store.put_bookie_cookie(replace(created, instance_id="i3"))  # version 1 is stale now
    with pytest.raises(NotFoundError):
        store.put_bookie_cookie(BookieCookie("b9:3181", "i9", "/d", version=3))
    assert store.get_bookie_cookie("b1:3181") == replaced
