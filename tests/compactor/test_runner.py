"""Run semantics with the reference engine on the in-memory store and client (fast)."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from bookie.errors import BookieError, ErrorCode
from bookie.memory import InMemoryLedgerClient
from compactor.config import CompactionRules, CompactorConfig
from compactor.errors import CompactionError
from compactor.plan import CompactionPlan
from compactor.reference import EntrySink, ReferenceEngine
from compactor.runner import CompactionRunner
from managed_ledger.clock import ManualClock
from managed_ledger.entry_format import Message, StoredMessage, decode_compacted
from managed_ledger.metadata.api import CompactionStatus, NotFoundError
from managed_ledger.metadata.memory import InMemoryMetadataStore
from managed_ledger.position import MessageId
from tests.compactor.topic_writer import TopicWriter, model
from topics.compacted import CompactedView

ML = "public/default/prices"


def make(
    keyless: str = "drop",
    entry_max_messages: int = 3,
    delete_retention_ms: int = 0,
    delta_max_ratio: float = 0.25,
) -> tuple[InMemoryMetadataStore, InMemoryLedgerClient, CompactionRunner]:
    store, client = InMemoryMetadataStore(), InMemoryLedgerClient()
    config = CompactorConfig(
        bookies=("b:1",),
        keyless_policy=keyless,  # type: ignore[arg-type]
        delete_retention_ms=delete_retention_ms,
        delta_max_ratio=delta_max_ratio,
    )
    engine = ReferenceEngine(client, entry_max_messages=entry_max_messages)
    return store, client, CompactionRunner(store, client, config, engine, ManualClock())


async def compacted_messages(
    store: InMemoryMetadataStore, client: InMemoryLedgerClient
) -> list[StoredMessage]:
    """The whole compacted view, read back from the compacted ledger itself."""
    state = store.get_compaction(ML)
    if state.compacted_ledger_id is None:
        return []
    entries = client.ledgers[state.compacted_ledger_id].entries
    return [m for payload in entries for m in decode_compacted(payload)]


def msg(key: str | None, value: bytes) -> Message:
    return Message(value=value, key=key, properties={"k": key or "-"}, event_time=7)


# one step: a batch of (key, value) messages, a ledger roll, time passing, or a compaction run
batches = st.lists(
    st.tuples(st.sampled_from(["a", "b", "c", "d", None]), st.sampled_from([b"", b"x", b"yy"])),
    min_size=1,
    max_size=5,
)
steps = st.lists(
    st.one_of(batches, st.just("roll"), st.just("tick"), st.just("compact")),
    min_size=1,
    max_size=25,
)
TICK_MS = 40


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    steps=steps,
    keyless=st.sampled_from(["drop", "keep"]),
    retention=st.sampled_from([0, 50, 100]),
    ratio=st.sampled_from([0.0, 0.25, 100.0]),
)
def test_incremental_runs_equal_the_rules_over_everything(
    steps: list[object], keyless: str, retention: int, ratio: float
) -> None:
    """Tombstones stay while younger than `retention` at each run (0: never), so each run's view
    is the rules over everything written with that run's time, whatever earlier runs kept, and
    whether the runs folded or wrote deltas (ratio 0: never a delta; 100: while under 8)."""

    async def go() -> None:
        store, client, runner = make(keyless, delete_retention_ms=retention, delta_max_ratio=ratio)
        clock = runner.clock
        assert isinstance(clock, ManualClock)
        topic = TopicWriter(store, client, ML)
        view = CompactedView(store, client)
        for step in [*steps, "compact"]:
            if step == "roll":
                await topic.roll()
            elif step == "tick":
                clock.advance(TICK_MS)
            elif step == "compact":
                before = store.get_compaction(ML)
                state = await runner.run(ML, CompactionRules(keyless, retention))  # type: ignore[arg-type]
                assert state.status == CompactionStatus.SUCCESS
                assert len(state.delta_ledger_ids) <= 8 and not state.retired_ledger_ids
                if state.delta_ledger_ids:  # a delta run leaves the base and older deltas alone
                    assert retention == 0 and ratio > 0
                    assert state.compacted_ledger_id == before.compacted_ledger_id
                    assert state.delta_ledger_ids[: len(before.delta_ledger_ids)] == before.delta_ledger_ids
                horizon = MessageId(*state.horizon) if state.horizon else None
                after = clock.now_ms() - retention if retention else None
                expected = model(topic.written, horizon, keyless, after)
                assert await view_all(view, MessageId(0, 0, 0), 3) == expected
                assert await view.last_message_id(ML) == (expected[-1].message_id if expected else None)
                assert horizon == (topic.written[-1].message_id if topic.written else None)
            else:
                assert isinstance(step, list)
                await topic.append([msg(k, v) for k, v in step], publish_time=clock.now_ms())
        # only the current layers are left besides the topic's own ledgers
        ml = store.get_managed_ledger(ML)
        assert ml is not None
        layers = set(store.get_compaction(ML).layer_ledger_ids)
        others = {m.ledger_id for m in store.list_ledgers()} - set(ml.ledger_ids)
        assert others == layers
        assert set(client.ledgers) - set(ml.ledger_ids) == others

    asyncio.run(go())


async def test_success_records_counts_and_deletes_previous_ledger() -> None:
    store, client, runner = make()
    topic = TopicWriter(store, client, ML)
    await topic.append([msg("a", b"1"), msg("b", b"1"), msg(None, b"k")])
    first = await runner.run(ML)
    assert (first.messages_in, first.messages_out, first.status) == (3, 2, CompactionStatus.SUCCESS)
    assert first.last_succeeded_ms is not None and first.started_ms is not None
    await topic.append([msg("a", b"2"), msg("b", b"")])
    second = await runner.run(ML)
    assert (second.messages_in, second.messages_out) == (4, 1)  # 2 compacted + 2 new
    assert second.compacted_ledger_id != first.compacted_ledger_id
    assert first.compacted_ledger_id not in client.ledgers
    with pytest.raises(NotFoundError):
        store.get_ledger(first.compacted_ledger_id or -1)
    assert [m.value for m in await compacted_messages(store, client)] == [b"2"]


class FailingEngine:
    """Writes some entries, then fails: as a Spark job dying half way would."""

    name = "failing"

    def __init__(self, inner: ReferenceEngine) -> None:
        self.inner = inner

    async def compute(self, plan: CompactionPlan, rules: CompactionRules, sink: EntrySink) -> int:
        await sink(b"\x51\x01\x01\x90", 0)
        raise BookieError(ErrorCode.UNAVAILABLE, "bookie went away")


async def test_failed_run_leaves_previous_view_and_deletes_its_ledger() -> None:
    store, client, runner = make()
    topic = TopicWriter(store, client, ML)
    await topic.append([msg("a", b"1")])
    good = await runner.run(ML)
    before = await compacted_messages(store, client)
    ledgers_before = set(client.ledgers)
    await topic.append([msg("a", b"2")])
    runner.engine = FailingEngine(ReferenceEngine(client))
    with pytest.raises(CompactionError, match="bookie went away"):
        await runner.run(ML)
    state = store.get_compaction(ML)
    assert state.status == CompactionStatus.ERROR
    assert "bookie went away" in state.last_error
    assert state.last_failed_ms is not None and state.run_ledger_id is None
    assert (state.compacted_ledger_id, state.horizon) == (good.compacted_ledger_id, good.horizon)
    assert await compacted_messages(store, client) == before
    assert set(client.ledgers) == ledgers_before  # the half-written ledger is gone
    runner.engine = ReferenceEngine(client)
    assert (await runner.run(ML)).status == CompactionStatus.SUCCESS
    assert [m.value for m in await compacted_messages(store, client)] == [b"2"]


async def test_write_failure_mid_run_reports_error() -> None:
    store, client, runner = make(entry_max_messages=1)
    topic = TopicWriter(store, client, ML)
    await topic.append([msg("a", b"1"), msg("b", b"1")])
    await topic.close_ledger()
    client.fail_adds = BookieError(ErrorCode.READ_ONLY, "disk full")
    with pytest.raises(CompactionError):
        await runner.run(ML)
    state = store.get_compaction(ML)
    assert state.status == CompactionStatus.ERROR and "disk full" in state.last_error
    assert state.compacted_ledger_id is None
    ml = store.get_managed_ledger(ML)
    assert ml is not None and set(client.ledgers) == set(ml.ledger_ids)


def runner_spec(ledger_id: int):  # type: ignore[no-untyped-def]
    from bookie.types import LedgerSpec

    return LedgerSpec(ledger_id, ("b:1",))


async def test_compacted_view_keeps_keys_after_topic_ledgers_are_trimmed() -> None:
    store, client, runner = make()
    topic = TopicWriter(store, client, ML)
    await topic.append([msg("a", b"1"), msg("b", b"1")])
    await topic.roll()
    await topic.append([msg("c", b"1")])
    await runner.run(ML)
    # retention deletes the first ledger (metadata, then bookie)
    ml = store.get_managed_ledger(ML)
    assert ml is not None
    from dataclasses import replace

    trimmed = ml.ledger_ids[0]
    store.update_managed_ledger(replace(ml, ledger_ids=ml.ledger_ids[1:]))
    store.delete_ledger(trimmed)
    await client.delete_ledger(runner_spec(trimmed))
    await topic.append([msg("c", b"2")])
    await runner.run(ML)
    assert [(m.key, m.value) for m in await compacted_messages(store, client)] == [
        ("a", b"1"),
        ("b", b"1"),
        ("c", b"2"),
    ]


async def test_nothing_new_keeps_the_view() -> None:
    store, client, runner = make()
    with pytest.raises(CompactionError, match="does not exist"):
        await runner.run(ML)
    topic = TopicWriter(store, client, ML)
    assert (await runner.run(ML)).compacted_ledger_id is None  # empty topic
    await topic.append([msg("a", b"1")])
    first = await runner.run(ML)
    again = await runner.run(ML)
    assert (again.compacted_ledger_id, again.horizon, again.messages_out) == (
        first.compacted_ledger_id,
        first.horizon,
        1,
    )


async def view_all(view: CompactedView, start: MessageId, page: int) -> list[StoredMessage]:
    out: list[StoredMessage] = []
    while True:
        got = await view.read(ML, start, page)
        out.extend(got)
        if len(got) < page:
            return out
        last = got[-1].message_id
        start = MessageId(last.ledger_id, last.entry_id, last.batch_index + 1)


@given(
    keys=st.lists(st.sampled_from("abcdefghij"), min_size=1, max_size=40),
    batch=st.integers(1, 4),
    page=st.integers(1, 7),
    starts=st.lists(st.tuples(st.integers(0, 4), st.integers(0, 30), st.integers(0, 4)), max_size=5),
)
@settings(max_examples=40, deadline=None)
def test_compacted_view_reads_from_any_id(
    keys: list[str], batch: int, page: int, starts: Sequence[tuple[int, int, int]]
) -> None:
    async def go() -> None:
        store, client, runner = make(entry_max_messages=2)
        topic = TopicWriter(store, client, ML)
        for i in range(0, len(keys), batch):
            await topic.append([msg(k, b"v%d" % i) for k in keys[i : i + batch]])
        state = await runner.run(ML)
        view = CompactedView(store, client)
        everything = await compacted_messages(store, client)
        assert await view.horizon(ML) == MessageId(*(state.horizon or (0, 0, 0)))
        assert await view_all(view, MessageId(0, 0, 0), page) == everything
        assert await view.last_message_id(ML) == everything[-1].message_id
        for s in starts:
            start = MessageId(*s)
            expected = [m for m in everything if m.message_id >= start][:page]
            assert await view.read(ML, start, page) == expected
            # bounded by a horizon read earlier: nothing past it
            until = everything[len(everything) // 2].message_id
            bounded = [m for m in expected if m.message_id <= until]
            assert await view.read(ML, start, page, until=until) == bounded

    asyncio.run(go())


async def test_compacted_view_of_a_topic_never_compacted_or_all_deleted() -> None:
    store, client, runner = make()
    view = CompactedView(store, client)
    assert await view.horizon(ML) is None
    assert await view.read(ML, MessageId(0, 0, 0), 10) == []
    assert await view.last_message_id(ML) is None
    topic = TopicWriter(store, client, ML)
    ids = await topic.append([msg("a", b"1"), msg("a", b"")])
    await runner.run(ML)
    assert await view.horizon(ML) == ids[-1]
    assert await view.read(ML, MessageId(0, 0, 0), 10) == []
    assert await view.last_message_id(ML) is None


async def test_a_tombstone_stays_for_its_retention_then_goes() -> None:
    store, client, runner = make(delete_retention_ms=1_000)
    clock = runner.clock
    assert isinstance(clock, ManualClock)
    topic = TopicWriter(store, client, ML)
    await topic.append([msg("a", b"1"), msg("b", b"1")], publish_time=clock.now_ms())
    clock.advance(10)
    (deleted,) = await topic.append([msg("a", b"")], publish_time=clock.now_ms())
    first = await runner.run(ML)
    view = await compacted_messages(store, client)
    assert [(m.key, m.value, m.message_id) for m in view] == [
        ("b", b"1", view[0].message_id),
        ("a", b"", deleted),
    ]
    assert first.messages_out == 2
    clock.advance(999)  # 999 ms old: it stays, also through a run with nothing new
    assert [m.key for m in await compacted_messages(store, client)] == ["b", "a"]
    again = await runner.run(ML)
    assert [m.key for m in await compacted_messages(store, client)] == ["b", "a"]
    assert again.horizon == first.horizon
    clock.advance(1)  # deleteRetentionMs after it was published: the next run drops it
    last = await runner.run(ML)
    assert [m.key for m in await compacted_messages(store, client)] == ["b"]
    assert (last.horizon, last.messages_out) == (first.horizon, 1)
    assert first.compacted_ledger_id not in client.ledgers  # each rewrite replaced the view


async def test_without_tombstone_retention_a_run_with_nothing_new_writes_nothing() -> None:
    store, client, runner = make()
    topic = TopicWriter(store, client, ML)
    await topic.append([msg("a", b"1"), msg("b", b"")])
    first = await runner.run(ML)
    assert [m.key for m in await compacted_messages(store, client)] == ["a"]  # Pulsar's rule
    assert (await runner.run(ML)).compacted_ledger_id == first.compacted_ledger_id


def test_the_rules_come_from_the_compaction_policy() -> None:
    from compactor.service import rules_for

    store = InMemoryMetadataStore()
    config = CompactorConfig(keyless_policy="keep", delete_retention_ms=7)
    assert rules_for(store, ML, config) == CompactionRules("keep", 7)
    store.update_policies("public/default", {"compactionPolicy": {"deleteRetentionMs": 60_000}})
    store.update_policies(ML, {"compactionPolicy": {"keylessPolicy": "drop", "maxLagMs": 5}})
    assert rules_for(store, ML, config) == CompactionRules("drop", 60_000)
    assert rules_for(store, ML + "-partition-3", config) == CompactionRules("drop", 60_000)
    store.update_policies(ML, {"compactionPolicy": None, "keylessCompactionPolicy": "drop"})
    assert rules_for(store, ML, config) == CompactionRules("drop", 60_000)  # the legacy key, read
    # the broker resolves the very same policy (one source of truth)
    from topics import policies
    from topics.config import TopicsConfig

    broker = policies.resolve(
        policies.defaults(TopicsConfig(keyless_compaction_policy="keep", compaction_delete_retention_ms=7)),
        store.get_policies("public/default"),
        store.get_policies(ML),
    )
    assert (broker.compaction.keyless_policy, broker.compaction.delete_retention_ms) == ("drop", 60_000)
