"""What a compaction runner counts for the compactor's metrics (reference engine, in memory): runs
by result with a duration each, the messages of successful runs, none for a conflict."""

from __future__ import annotations

import asyncio

import pytest

from bookie.errors import BookieError, ErrorCode
from bookie.memory import InMemoryLedgerClient
from compactor.config import CompactionRules, CompactorConfig
from compactor.errors import CompactionError, CompactionRunConflictError
from compactor.plan import CompactionPlan
from compactor.reference import EntrySink, ReferenceEngine
from compactor.runner import CompactionRunner
from managed_ledger.entry_format import Message
from managed_ledger.metadata.memory import InMemoryMetadataStore
from tests.compactor.topic_writer import TopicWriter

ML = "public/default/prices"


class BrokenEngine:
    name = "broken"

    async def compute(self, plan: CompactionPlan, rules: CompactionRules, sink: EntrySink) -> int:
        raise BookieError(ErrorCode.UNAVAILABLE, "bookie went away")


class PausedEngine(ReferenceEngine):
    """Waits for `go` before computing: a run that stays RUNNING while the test looks."""

    def __init__(self, client: InMemoryLedgerClient) -> None:
        super().__init__(client)
        self.started = asyncio.Event()
        self.go = asyncio.Event()

    async def compute(self, plan: CompactionPlan, rules: CompactionRules, sink: EntrySink) -> int:
        self.started.set()
        await self.go.wait()
        return await super().compute(plan, rules, sink)


def make() -> tuple[InMemoryMetadataStore, InMemoryLedgerClient, CompactionRunner]:
    store, client = InMemoryMetadataStore(), InMemoryLedgerClient()
    runner = CompactionRunner(store, client, CompactorConfig(bookies=("b:1",)), ReferenceEngine(client))
    return store, client, runner


def messages(*keys: str) -> list[Message]:
    return [Message(value=b"v", key=key) for key in keys]


async def test_success_and_error_runs_are_counted_with_their_durations_and_messages() -> None:
    store, client, runner = make()
    topic = TopicWriter(store, client, ML)
    await topic.append(messages("a", "b", "a", "c", "a"))
    await runner.run(ML)  # reads 5, keeps a, b, c
    await topic.append(messages("b", "d"))
    await runner.run(ML)  # reads the 3 compacted and 2 new, keeps a, b, c, d
    await runner.run(ML)  # nothing new: a success that reads nothing
    runner.engine = BrokenEngine()
    await topic.append(messages("e"))
    with pytest.raises(CompactionError):
        await runner.run(ML)
    stats = runner.stats
    assert (stats.succeeded, stats.failed, stats.running) == (3, 1, 0)
    assert (stats.messages_read, stats.messages_kept) == (10, 7)
    durations = stats.duration_seconds.snapshot()
    assert durations.count == 4 and durations.sum >= 0


async def test_a_run_in_progress_is_running_and_a_conflict_is_no_run() -> None:
    store, client, runner = make()
    engine = PausedEngine(client)
    runner.engine = engine
    await TopicWriter(store, client, ML).append(messages("a"))
    first = asyncio.create_task(runner.run(ML))
    await asyncio.wait_for(engine.started.wait(), 10)
    assert runner.stats.running == 1
    other = CompactionRunner(store, client, CompactorConfig(bookies=("b:1",)), ReferenceEngine(client))
    with pytest.raises(CompactionRunConflictError):
        await other.run(ML)
    assert (other.stats.succeeded, other.stats.failed, other.stats.duration_seconds.snapshot().count) == (
        0,
        0,
        0,
    )
    engine.go.set()
    await asyncio.wait_for(first, 10)
    assert (runner.stats.running, runner.stats.succeeded, runner.stats.messages_kept) == (0, 1, 1)
