"""The Spark job against the plain-Python reference, on a real bookie and the SQL store (SQLite).

One Spark session (local[2]) for the module. Hypothesis draws workloads — keys, tombstones,
key-less messages, batches, ledger rolls, time passing, several runs with writes in between,
tombstone retention (deleteRetentionMs) on or off — and after every
Spark run the compacted ledger it wrote must hold exactly what the reference rules compute from
the same inputs (the previous compacted ledger plus the topic's new messages), ids included, and
what the rules give over everything written (nothing is trimmed here).
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from bookie.client import BookieLedgerClient
from bookie.ledgers import ledger_spec
from compactor.config import CompactionRules, CompactorConfig
from compactor.errors import SparkJobError
from compactor.job import SparkEngine
from compactor.plan import build_plan
from compactor.reference import read_messages, survivors
from compactor.runner import CompactionRunner
from compactor.spark import stop_session
from managed_ledger.clock import ManualClock
from managed_ledger.entry_format import Message, StoredMessage, decode_compacted
from managed_ledger.metadata.api import CompactionStatus
from managed_ledger.metadata.sql import SqlMetadataStore
from managed_ledger.position import MessageId
from tests.compactor.conftest import Bookie
from tests.compactor.topic_writer import TopicWriter, model
from topics.compacted import CompactedView

pytestmark = pytest.mark.spark


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SqlMetadataStore]:
    path: Path = tmp_path_factory.mktemp("meta") / "metadata.db"
    s = SqlMetadataStore(f"sqlite:///{path}")
    yield s
    s.close()


@pytest.fixture(scope="module")
def session_engine(bookie: Bookie) -> Iterator[SparkEngine]:
    config = CompactorConfig(bookies=(bookie.address,), spark_master="local[2]", entry_max_messages=7)
    e = SparkEngine(config)
    e.warm_up()
    yield e
    stop_session()


@pytest.fixture(params=["one-task", "distributed"])
def engine(request: pytest.FixtureRequest, session_engine: SparkEngine) -> SparkEngine:
    """Both shapes of the job on the module's session: small inputs run as one task (the
    default), `single_task_max_bytes=0` forces the read -> shuffle -> pack job of big inputs."""
    if request.param == "one-task":
        return session_engine
    return SparkEngine(replace(session_engine.config, single_task_max_bytes=0))


async def compacted_view(store: SqlMetadataStore, client: BookieLedgerClient, ml: str) -> list[StoredMessage]:
    state = store.get_compaction(ml)
    if state.compacted_ledger_id is None:
        return []
    return await ledger_rows(store, client, state.compacted_ledger_id)


async def ledger_rows(
    store: SqlMetadataStore, client: BookieLedgerClient, ledger_id: int
) -> list[StoredMessage]:
    meta = store.get_ledger(ledger_id)
    if meta.last_entry_id < 0:
        return []
    payloads = await client.read_entries(ledger_spec(meta), 0, meta.last_entry_id)
    return [m for p in payloads for m in decode_compacted(p)]


keys = st.sampled_from(["a", "b", "c", "d", None])
values = st.sampled_from([b"", b"v", b"value-2", b"\x00\xff"])
batch = st.lists(st.tuples(keys, values), min_size=1, max_size=8)
step = st.one_of(
    st.lists(batch, min_size=1, max_size=15),  # several batches (entries) at once
    st.just("roll"),
    st.just("tick"),
    st.just("compact"),
    st.just("trim"),  # retention deletes the ledgers before the horizon's
)
TICK_MS = 40
RETENTION_MS = 100


# a fixed workload first: repeated keys inside a batch, across batches and ledgers, tombstones
# that delete and keys that come back, key-less messages, runs with writes in between
FIXED = [
    [[("a", b"1"), ("b", b"1"), ("a", b"2"), (None, b"k1")], [("c", b"1"), ("b", b"")]],
    "compact",
    [[("a", b""), ("c", b"2"), (None, b"k2")]],
    "roll",
    [[("a", b"3"), ("d", b"1")], [("d", b""), ("c", b"3")], [("b", b"2")]],
    "compact",
    [[("d", b"2")]],
]
# tombstones kept while young: a run keeps them, a later one (nothing new, or new writes) drops
# those that aged out, and a key that comes back replaces its kept tombstone
TOMBSTONES = [
    [[("a", b"1"), ("b", b"1"), ("c", b"1")], [("a", b""), (None, b"k")]],
    "tick",
    [[("b", b"")]],
    "compact",
    "tick",
    "tick",
    "compact",  # a's tombstone is 120 ms old: gone; b's (80 ms) stays
    [[("b", b"2"), ("c", b"")]],
    "tick",
    "tick",
    "tick",
]


# deltas (every share of the base allowed): a base, deltas with tombstones and key-less
# messages, the topic trimmed under them, one more delta (with retention they are all folds)
DELTAS = [
    [[("a", b"1"), ("b", b"1"), ("c", b"1"), ("d", b"1"), (None, b"k0")]],
    "compact",
    [[("a", b""), (None, b"k1")]],
    "compact",
    "roll",
    [[("b", b"2"), ("a", b"back")], [("c", b"")]],
    "compact",
    "trim",
    [[("a", b""), ("d", b"2")]],
]


@settings(max_examples=5, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    steps=st.lists(step, min_size=1, max_size=8),
    keyless=st.sampled_from(["drop", "keep"]),
    retention=st.sampled_from([0, RETENTION_MS]),
    ratio=st.sampled_from([0.25, 100.0]),
)
@example(steps=FIXED, keyless="drop", retention=0, ratio=0.25)
@example(steps=FIXED, keyless="keep", retention=0, ratio=100.0)
@example(steps=TOMBSTONES, keyless="keep", retention=RETENTION_MS, ratio=100.0)
@example(steps=DELTAS, keyless="keep", retention=0, ratio=100.0)
def test_spark_job_matches_reference(
    steps: list[object],
    keyless: str,
    retention: int,
    ratio: float,
    store: SqlMetadataStore,
    engine: SparkEngine,
    bookie: Bookie,
) -> None:
    """Each run's new ledger (a fold's base or a delta) holds what the reference rules compute
    from the same plan, and the layered view serves what the rules give over everything."""
    ml = f"public/default/t-{uuid.uuid4().hex[:8]}"

    async def go() -> None:
        client = BookieLedgerClient()
        clock = ManualClock()
        rules = CompactionRules(keyless, retention)  # type: ignore[arg-type]
        config = replace(engine.config, delta_max_ratio=ratio)
        runner = CompactionRunner(store, client, config, engine, clock)
        topic = TopicWriter(store, client, ml, (bookie.address,))
        view = CompactedView(store, client)
        runs = deltas = 0
        for s in [*steps, "compact"]:
            if s == "roll":
                await topic.roll()
            elif s == "tick":
                clock.advance(TICK_MS)
            elif s == "trim":
                await topic.trim(await view.horizon(ml))
            elif s == "compact":
                # The owner closes the ledger it writes when it requests a run (an open ledger
                # is read only up to its bookies' LAC): the run covers everything written.
                await topic.close_ledger()
                before = store.get_compaction(ml)
                now = replace(rules, now_ms=clock.now_ms())  # the runner's time: the clock stands still
                # both inputs read before the run (a fold deletes the layers it replaced)
                fold = await read_messages(client, await build_plan(store, client, ml, before))
                delta = await read_messages(client, await build_plan(store, client, ml, before, delta=True))
                state = await runner.run(ml, rules)
                runs += 1
                assert state.status == CompactionStatus.SUCCESS
                added = set(state.layer_ledger_ids) - set(before.layer_ledger_ids)
                new = added.pop() if added else None
                if new in state.delta_ledger_ids:  # a delta: the new messages alone, tombstones kept
                    assert state.compacted_ledger_id == before.compacted_ledger_id
                    kept = replace(now, keep_all_tombstones=True)
                    expected = survivors(delta, kept)
                    deltas += 1
                else:
                    expected = survivors(fold, now)
                if new is not None:
                    assert await ledger_rows(store, client, new) == expected
                horizon = MessageId(*state.horizon) if state.horizon else None
                got = await view.read(ml, MessageId(0, 0, 0), 100_000)
                assert got == model(topic.written, horizon, keyless, now.tombstones_after_ms)
                assert horizon == (topic.written[-1].message_id if topic.written else None)
            else:
                assert isinstance(s, list)
                for b in s:
                    batch = [Message(value=v, key=k, properties={"i": str(runs)}) for k, v in b]
                    await topic.append(batch, publish_time=clock.now_ms())
        await client.close()
        if steps == DELTAS:  # the first run writes the base, each of the three others a delta
            assert deltas == 3, deltas

    asyncio.run(go())


def test_failed_spark_job_keeps_the_previous_view(
    store: SqlMetadataStore, engine: SparkEngine, bookie: Bookie
) -> None:
    ml = f"public/default/bad-{uuid.uuid4().hex[:8]}"

    async def go() -> None:
        client = BookieLedgerClient()
        runner = CompactionRunner(store, client, engine.config, engine)
        topic = TopicWriter(store, client, ml, (bookie.address,))
        await topic.append([Message(value=b"1", key="a")])
        await topic.close_ledger()  # as the owner does when it requests a run
        good = await runner.run(ml)
        view = await compacted_view(store, client, ml)
        await topic.roll()
        assert topic.writer is not None
        await topic.writer.add_entry(b"not a quire entry")  # a task fails decoding this
        await topic.append([Message(value=b"2", key="a")])
        await topic.close_ledger()
        ledgers_before = {m.ledger_id for m in store.list_ledgers()}
        with pytest.raises(SparkJobError, match="not a Quire entry"):
            await runner.run(ml)
        state = store.get_compaction(ml)
        assert state.status == CompactionStatus.ERROR and "not a Quire entry" in state.last_error
        assert (state.compacted_ledger_id, state.horizon) == (good.compacted_ledger_id, good.horizon)
        assert await compacted_view(store, client, ml) == view
        assert {m.ledger_id for m in store.list_ledgers()} == ledgers_before  # run ledger deleted
        await client.close()

    asyncio.run(go())


def test_the_compactor_session_registers_format_quire(session_engine: SparkEngine) -> None:
    from pyspark.errors import PySparkException

    # registered: the source itself answers (a missing serviceUrl), not "data source not found"
    with pytest.raises(PySparkException, match="serviceUrl"):
        session_engine.session().read.format("quire").option("topic", "public/default/t").load()
