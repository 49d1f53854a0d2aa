"""The in-memory store and the SQLite store, driven by the same random calls, answer alike.

A Hypothesis state machine applies each call (often with a stale record, a missing key or a
duplicate) to both stores and asserts equal results, or errors of the same type. This is what
lets the managed-ledger unit tests trust the fake.
"""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Callable
from dataclasses import replace
from typing import Any

from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, precondition, rule

from managed_ledger.metadata.api import (
    CompactionState,
    CompactionStatus,
    CursorMetadata,
    DedupSnapshot,
    GroupOffset,
    LedgerMetadata,
    LedgerState,
    MetadataError,
    MetadataStore,
    TopicMetadata,
)
from managed_ledger.metadata.memory import InMemoryMetadataStore
from managed_ledger.metadata.sql import SqlMetadataStore
from tests.examples import examples

MLS = st.sampled_from(["ml-a", "ml-b"])
CURSOR_NAMES = st.sampled_from(["c1", "c2", "c3"])
TOPICS = st.sampled_from(["public/default/t", "public/default/t-partition-0"])
POSITIONS = st.tuples(st.integers(0, 5), st.integers(-1, 5))
SCOPES = st.sampled_from(["public/default", "public/default/t"])
DELIVERY_STATES = st.one_of(
    st.none(),
    st.fixed_dictionaries(
        {"v": st.just(1), "entries": st.lists(st.tuples(st.integers(0, 5), st.integers(0, 5)), max_size=2)}
    ),
)
GROUPS = st.sampled_from(["g1", "g2"])
POLICY_VALUES = st.one_of(
    st.none(), st.integers(-1, 3), st.booleans(), st.lists(st.integers(0, 2), max_size=2)
)


class StoresAgree(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.dir = tempfile.mkdtemp(prefix="quire-meta-")
        self.memory = InMemoryMetadataStore()
        self.sql = SqlMetadataStore(f"sqlite:///{self.dir}/m.db")
        self.seen: list[Any] = []  # records handed out, stale ones included

    def both(self, call: Callable[[MetadataStore], Any]) -> Any:
        outcomes = []
        for store in (self.memory, self.sql):
            try:
                outcomes.append(("ok", call(store)))
            except MetadataError as exc:
                outcomes.append(("error", type(exc).__name__))
        assert outcomes[0] == outcomes[1], outcomes
        kind, value = outcomes[0]
        if kind == "ok" and value is not None and hasattr(value, "version"):
            self.seen.append(value)
        return value

    def seen_of(self, kind: type) -> list[Any]:
        return [r for r in self.seen if isinstance(r, kind)]

    @rule(created=st.integers(0, 10))
    def create_ledger(self, created: int) -> None:
        self.both(lambda s: s.create_ledger(("b:1",), 1, 1, created))

    @precondition(lambda self: self.seen)
    @rule(data=st.data(), state=st.sampled_from(list(LedgerState)), last=st.integers(-1, 9))
    def update_ledger(self, data: st.DataObject, state: LedgerState, last: int) -> None:
        ledgers = self.seen_of(LedgerMetadata)
        if ledgers:
            ledger = data.draw(st.sampled_from(ledgers))
            self.both(lambda s: s.update_ledger(replace(ledger, state=state, last_entry_id=last)))

    @rule(ledger_id=st.integers(1, 6))
    def delete_or_get_ledger(self, ledger_id: int) -> None:
        self.both(lambda s: s.get_ledger(ledger_id))
        self.both(lambda s: s.delete_ledger(ledger_id))

    @rule(name=MLS)
    def create_managed_ledger(self, name: str) -> None:
        self.both(lambda s: s.create_managed_ledger(name))

    @rule(name=MLS)
    def delete_managed_ledger(self, name: str) -> None:
        self.both(lambda s: s.delete_managed_ledger(name))

    @rule(ml=MLS, name=CURSOR_NAMES, mark=POSITIONS)
    def create_cursor(self, ml: str, name: str, mark: tuple[int, int]) -> None:
        self.both(lambda s: s.create_cursor(CursorMetadata(ml, name, mark, properties={"k": [1]})))

    @rule(data=st.data(), mark=POSITIONS, delivery=DELIVERY_STATES)
    def update_cursors(self, data: st.DataObject, mark: tuple[int, int], delivery: Any) -> None:
        cursors = self.seen_of(CursorMetadata)
        batch = data.draw(st.lists(st.sampled_from(cursors), max_size=3)) if cursors else []
        changed = [replace(c, mark_delete=mark, delivery_state=delivery) for c in batch]
        result = self.both(lambda s: s.update_cursors(changed))
        self.seen.extend(result or [])

    @rule(ml=MLS, name=CURSOR_NAMES)
    def delete_cursor_and_list(self, ml: str, name: str) -> None:
        self.both(lambda s: s.delete_cursor(ml, name))
        self.both(lambda s: s.list_cursors(ml))

    @rule(data=st.data(), ml=MLS, pos=POSITIONS, seq=st.integers(0, 9))
    def put_dedup(self, data: st.DataObject, ml: str, pos: tuple[int, int], seq: int) -> None:
        snapshots = [DedupSnapshot(ml, (0, 0), {}), *self.seen_of(DedupSnapshot)]
        base = data.draw(st.sampled_from(snapshots))
        self.both(lambda s: s.put_dedup_snapshot(replace(base, position=pos, sequences={"p": seq})))
        self.both(lambda s: s.get_dedup_snapshot(base.managed_ledger))

    @rule(name=TOPICS, partitions=st.integers(0, 2))
    def create_or_update_topic(self, name: str, partitions: int) -> None:
        created = self.both(lambda s: s.create_topic(TopicMetadata(name, partitions)))
        if created is None:
            for topic in self.seen_of(TopicMetadata):
                if topic.name == name:
                    self.both(lambda s, t=topic: s.update_topic(replace(t, partitions=partitions)))

    @rule(name=TOPICS)
    def delete_topic(self, name: str) -> None:
        self.both(lambda s: s.delete_topic(name))
        self.both(lambda s: s.list_topics("public/default"))
        self.both(lambda s: s.get_policies(name))
        self.both(lambda s: s.list_compactions())
        self.both(lambda s: s.get_group_offsets("g1"))

    @rule(data=st.data(), topic=TOPICS, status=st.sampled_from(list(CompactionStatus)))
    def put_compaction(self, data: st.DataObject, topic: str, status: CompactionStatus) -> None:
        states = [CompactionState(topic), *self.seen_of(CompactionState)]
        base = data.draw(st.sampled_from(states))
        self.both(lambda s: s.put_compaction(replace(base, status=status, horizon=(1, 2, 3))))
        self.both(lambda s: s.list_compactions())

    @rule(scope=SCOPES, key=st.sampled_from(["a", "b"]), value=POLICY_VALUES)
    def policies(self, scope: str, key: str, value: Any) -> None:
        self.both(lambda s: s.update_policies(scope, {key: value}))
        if value is not None:
            self.both(lambda s: s.set_policies(scope, {"only": value}))
        self.both(lambda s: s.get_policies(scope))

    @rule(
        group=GROUPS,
        commits=st.lists(st.tuples(TOPICS, st.integers(0, 2), st.integers(-1, 9)), max_size=4),
    )
    def commit_group_offsets(self, group: str, commits: list[tuple[str, int, int]]) -> None:
        offsets = [GroupOffset(group, t, p, o, f"m{o}", commit_time_ms=o) for t, p, o in commits]
        self.both(lambda s: s.commit_group_offsets(offsets))
        self.both(lambda s: s.get_group_offsets(group))
        self.both(lambda s: s.get_group_offsets(group, ["public/default/t"]))
        self.both(lambda s: s.list_groups())

    @rule(group=GROUPS)
    def delete_group_offsets(self, group: str) -> None:
        self.both(lambda s: s.delete_group_offsets(group))
        self.both(lambda s: s.list_groups())

    @rule(namespace=st.sampled_from(["public/default", "public/x"]))
    def namespace(self, namespace: str) -> None:
        self.both(lambda s: s.create_namespace(namespace))
        self.both(lambda s: s.delete_namespace(namespace))
        self.both(lambda s: s.list_namespaces("public"))

    def teardown(self) -> None:
        assert self.memory.list_ledgers() == self.sql.list_ledgers()
        self.sql.close()
        shutil.rmtree(self.dir, ignore_errors=True)


StoresAgree.TestCase.settings = settings(max_examples=examples(40), stateful_step_count=40, deadline=None)
test_memory_and_sqlite_stores_agree = StoresAgree.TestCase
