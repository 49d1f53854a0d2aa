"""Compaction through the generated client (quire_client) on a live stack: a `quire bookie`, a
`quire broker` and a `quire compactor` (local Spark) as separate processes on free ports, sharing
one SQLite metadata store. The module shares one stack; each test uses its own topic.

Covered (issue 5): trigger (204) and status NOT_RUN -> RUNNING -> SUCCESS, RUNNING from the
moment a trigger is accepted, 409 while a run is requested or RUNNING, readers and a
read_compacted subscription from earliest and from ids inside and after the horizon,
last-message-id of the compacted view (null when every key was deleted), restarts of the broker
and the compactor between runs (status kept), retention trimming before and after compaction,
auto-trigger by threshold, and a compactor killed with -9 mid-run: its run is ERROR once its
lease lapses, with no compactor running, and a request nobody takes expires the same way.

Runs of topics named `slow-*` pause before closing their ledger (the compactor's test-only hook
QUIRE_COMPACTOR_TEST_RUN_DELAY_MS), so the tests can see RUNNING, get a 409 and kill -9 mid-run.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
import uuid
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import httpx
import pytest
from quire_client import Client
from quire_client.api.admin import (
    get_compaction_status,
    get_internal_stats,
    set_compaction_threshold,
    set_retention,
    trigger_compaction,
    unload_topic,
)
from quire_client.api.data import (
    ack_messages,
    create_subscription,
    get_last_message_id,
    produce,
    read_messages,
    receive,
)
from quire_client.models import (
    AckRequest,
    CompactionStatus,
    InternalStats,
    MessageOut,
    ProduceMessage,
    ProduceRequest,
    ReadPage,
    RetentionPolicy,
    SubscriptionRequest,
)
from quire_client.models.subscription_request_initial_position import SubscriptionRequestInitialPosition

from bookie.client import BookieLedgerClient
from bookie.errors import NoSuchEntryError, NoSuchLedgerError
from bookie.types import LedgerSpec
from managed_ledger.metadata.api import CompactionState, LedgerMetadata
from managed_ledger.metadata.sql import SqlMetadataStore
from tests.api.conftest import Stack, start_stack
from tests.support import QuireProcess, wait_until

pytestmark = [pytest.mark.spark]
NS = ("public", "default")
RUN_BOUND_S = 180.0  # a run on a loaded 2-core machine (first Spark job of a cold session)
WAIT_BOUND_S = 30.0
DELAY_MS = 4_000
LEASE_MS = 12_000  # short, so a dead run's lease lapses soon (6 s lapsed under load on 2 cores)
PAUSED = "test hook: compaction of"  # the compactor's log line when a run reaches the pause


class Live:
    """The module's stack plus its compactor process (restartable, killable)."""

    def __init__(self, stack: Stack, root: Path) -> None:
        self.stack = stack
        self.root = root
        self.starts = 0
        self.compactor = self.start_compactor()

    def start_compactor(self) -> QuireProcess:
        self.starts += 1
        log = self.root / f"compactor-{self.starts}.log"
        self.compactor = QuireProcess(["compactor"], self.stack.env(), log).start()
        return self.compactor

    def api(self) -> Client:
        return Client(base_url=self.stack.base_url, timeout=httpx.Timeout(30.0))

    def store(self) -> SqlMetadataStore:
        return SqlMetadataStore(self.stack.database_url)


@pytest.fixture(scope="module")
def live(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Live]:
    root = tmp_path_factory.mktemp("compaction-api")
    stack = start_stack(
        root / "stack",
        QUIRE_COMPACTION_POLL_INTERVAL_MS="200",
        QUIRE_CURSOR_FLUSH_INTERVAL_MS="200",
        QUIRE_COMPACTION_CHECK_INTERVAL_MS="300",
        QUIRE_SPARK_MASTER="local[2]",
        QUIRE_COMPACTOR_TEST_RUN_DELAY_MS=str(DELAY_MS),
        QUIRE_COMPACTOR_TEST_RUN_DELAY_MATCH="/slow-",
        QUIRE_COMPACTION_LEASE_MS=str(LEASE_MS),
    )
    live = None
    try:
        live = Live(stack, root)
        yield live
    finally:
        if live is not None:
            live.compactor.stop(timeout_s=30)
        stack.stop()


@pytest.fixture
def api(live: Live) -> Iterator[Client]:
    with live.api() as client:
        yield client


# --- helpers over the generated client ---------------------------------------------------------
def new_topic(prefix: str = "t") -> str:
    return f"{prefix}-{uuid.uuid4().hex[:10]}"


def send(api: Client, topic: str, messages: Sequence[tuple[str | None, str]]) -> list[str]:
    body = ProduceRequest(messages=[ProduceMessage(key=k, value=v) for k, v in messages])
    r = produce.sync_detailed(*NS, topic, client=api, body=body)
    assert r.status_code == 200, r.content
    assert r.parsed is not None and hasattr(r.parsed, "results")
    return [str(x.message_id) for x in r.parsed.results]


def status(api: Client, topic: str) -> CompactionStatus:
    r = get_compaction_status.sync_detailed(*NS, topic, client=api)
    assert r.status_code == 200, r.content
    assert isinstance(r.parsed, CompactionStatus)
    return r.parsed


def trigger(api: Client, topic: str) -> int:
    return int(trigger_compaction.sync_detailed(*NS, topic, client=api).status_code)


def wait_status(api: Client, topic: str, live: Live, *wanted: str) -> CompactionStatus:
    """Wait until no run is requested and the status is one of `wanted` (or the compactor died)."""
    seen: list[CompactionStatus] = []

    def reached() -> bool:
        seen.append(status(api, topic))
        if not live.compactor.alive():
            raise AssertionError(f"the compactor died:\n{live.compactor.log()[-3000:]}")
        return not seen[-1]["requested"] and str(seen[-1].status) in wanted

    wait_until(reached, RUN_BOUND_S, f"compaction status {wanted} of {topic}", interval_s=0.2)
    return seen[-1]


def compact(api: Client, topic: str, live: Live) -> CompactionStatus:
    assert trigger(api, topic) == 204
    done = wait_status(api, topic, live, "SUCCESS", "ERROR")
    assert str(done.status) == "SUCCESS", (done.to_dict(), live.compactor.log()[-3000:])
    return done


def read_page(api: Client, topic: str, start: str, compacted: bool, n: int = 7) -> ReadPage:
    r = read_messages.sync_detailed(
        *NS, topic, client=api, start=start, max_messages=n, read_compacted=compacted
    )
    assert r.status_code == 200, r.content
    assert isinstance(r.parsed, ReadPage)
    return r.parsed


def read_all(api: Client, topic: str, start: str = "earliest", compacted: bool = True) -> list[MessageOut]:
    out: list[MessageOut] = []
    deadline = time.monotonic() + WAIT_BOUND_S
    while time.monotonic() < deadline:
        page = read_page(api, topic, start, compacted)
        out += page.messages
        if not page.messages or page.next_ is None:
            return out
        start = page.next_
    raise TimeoutError("the reader did not reach the end")


def pairs(messages: list[MessageOut]) -> list[tuple[Any, str]]:
    return [(m.key, m.value) for m in messages]


def ids(messages: list[MessageOut]) -> list[str]:
    return [m.message_id for m in messages]


def last_id(api: Client, topic: str, compacted: bool) -> str | None:
    r = get_last_message_id.sync_detailed(*NS, topic, client=api, read_compacted=compacted)
    assert r.status_code == 200 and r.parsed is not None and hasattr(r.parsed, "message_id"), r.content
    mid = r.parsed.message_id
    return mid if isinstance(mid, str) else None


def subscribe(api: Client, topic: str, sub: str, read_compacted: bool) -> None:
    body = SubscriptionRequest(
        initial_position=SubscriptionRequestInitialPosition.EARLIEST, read_compacted=read_compacted
    )
    r = create_subscription.sync_detailed(*NS, topic, sub, client=api, body=body)
    assert r.status_code == 201, r.content


def drain(api: Client, topic: str, sub: str, ack: bool) -> list[MessageOut]:
    """Pull until an empty pull; ack each pull when asked to."""
    got: list[MessageOut] = []
    deadline = time.monotonic() + WAIT_BOUND_S
    while time.monotonic() < deadline:
        r = receive.sync_detailed(*NS, topic, sub, client=api, max_messages=50, wait_ms=300)
        assert r.status_code == 200 and r.parsed is not None and hasattr(r.parsed, "messages"), r.content
        page = list(r.parsed.messages)
        if not page:
            return got
        got += page
        if ack:
            body = AckRequest(message_ids=[m.message_id for m in page])
            assert ack_messages.sync_detailed(*NS, topic, sub, client=api, body=body).status_code == 204
    raise TimeoutError("the subscription did not drain")


def internal_stats(api: Client, topic: str) -> InternalStats:
    r = get_internal_stats.sync_detailed(*NS, topic, client=api)
    assert r.status_code == 200 and isinstance(r.parsed, InternalStats), r.content
    return r.parsed


def ledger_ids(api: Client, topic: str) -> list[int]:
    return [info.ledger_id for info in internal_stats(api, topic).ledgers]


# --- tests -------------------------------------------------------------------------------------
def test_compacted_view_from_every_position(live: Live, api: Client) -> None:
    topic = new_topic()
    written = send(api, topic, [(f"k{i % 5}", f"v{i}") for i in range(20)])
    assert str(status(api, topic).status) == "NOT_RUN"
    deleted = send(api, topic, [("k0", ""), (None, "key-less")])
    done = compact(api, topic, live)
    assert done["horizon"] == deleted[1] and done["messagesIn"] == 22 and done["messagesOut"] == 4

    view = read_all(api, topic)
    assert pairs(view) == [(f"k{i}", f"v{15 + i}") for i in range(1, 5)]  # k0 deleted, key-less dropped
    assert ids(view) == written[16:20]  # original ids kept
    assert ids(read_all(api, topic, written[18])) == written[18:20]  # an id of the view
    assert ids(read_all(api, topic, written[3])) == written[16:20]  # an id compacted away
    assert ids(read_all(api, topic, f"after:{written[17]}")) == written[18:20]
    assert last_id(api, topic, compacted=True) == written[19]
    assert last_id(api, topic, compacted=False) == deleted[1]

    after = send(api, topic, [("k1", "new"), ("k1", "newer")])  # past the horizon: read as written
    assert pairs(read_all(api, topic, written[19])) == [("k4", "v19"), ("k1", "new"), ("k1", "newer")]
    assert ids(read_all(api, topic, after[1])) == after[1:]  # an id after the horizon
    assert last_id(api, topic, compacted=True) == after[1]
    assert len(read_all(api, topic, compacted=False)) == 24  # the topic itself is untouched

    subscribe(api, topic, "compacted", read_compacted=True)
    subscribe(api, topic, "raw", read_compacted=False)
    assert ids(drain(api, topic, "compacted", ack=True)) == written[16:20] + after
    assert len(drain(api, topic, "raw", ack=True)) == 24


def test_last_message_id_is_null_when_every_key_was_deleted(live: Live, api: Client) -> None:
    topic = new_topic()
    send(api, topic, [("a", "1"), ("b", "2"), (None, "key-less"), ("a", ""), ("b", "")])
    compact(api, topic, live)
    assert read_all(api, topic) == []
    assert last_id(api, topic, compacted=True) is None
    assert last_id(api, topic, compacted=False) is not None
    later = send(api, topic, [("c", "3")])
    assert last_id(api, topic, compacted=True) == later[0]


def test_broker_restart_between_runs_keeps_status_and_view(live: Live, api: Client) -> None:
    topic = new_topic()
    first = send(api, topic, [("a", "1"), ("b", "2"), ("a", "3")])
    compact(api, topic, live)
    assert live.stack.broker is not None
    live.stack.broker.stop()
    live.stack.start_broker()
    with live.api() as fresh:
        kept = status(fresh, topic)
        assert str(kept.status) == "SUCCESS" and kept["horizon"] == first[2]
        assert ids(read_all(fresh, topic)) == [first[1], first[2]]
        second = send(fresh, topic, [("b", "4"), ("c", "5")])
        compact(fresh, topic, live)
        assert pairs(read_all(fresh, topic)) == [("a", "3"), ("b", "4"), ("c", "5")]
        assert ids(read_all(fresh, topic)) == [first[2], *second]


def test_auto_trigger_by_threshold(live: Live, api: Client) -> None:
    topic = new_topic()
    first = send(api, topic, [("a", "1")])
    written = send(api, topic, [(f"k{i % 3}", "x" * 50) for i in range(30)])
    assert str(status(api, topic).status) == "NOT_RUN"
    r = set_compaction_threshold.sync_detailed(*NS, topic, client=api, body=100)
    assert r.status_code == 204, r.content
    # no trigger: the broker's threshold check (every compaction_check_interval_ms) requests it
    done = wait_status(api, topic, live, "SUCCESS", "ERROR")
    assert str(done.status) == "SUCCESS" and done["horizon"] == written[-1]
    assert ids(read_all(api, topic)) == first + written[27:]  # the newest of each key


@pytest.mark.slow
def test_retention_trims_before_and_after_compaction(live: Live, api: Client) -> None:
    topic = new_topic()
    send(api, topic, [("gone", "trimmed before any compaction read it")])
    policy = RetentionPolicy(retention_size_in_mb=0, retention_time_in_minutes=0)
    assert set_retention.sync_detailed(*NS, topic, client=api, body=policy).status_code == 204
    subscribe(api, topic, "durable", read_compacted=False)
    assert len(drain(api, topic, "durable", ack=True)) == 1
    first_ledger = ledger_ids(api, topic)[0]
    assert unload_topic.sync_detailed(*NS, topic, client=api).status_code == 204
    kept = send(api, topic, [(f"k{i}", f"v{i}") for i in range(5)] + [("k0", "v0'")])
    wait_until(lambda: first_ledger not in ledger_ids(api, topic), WAIT_BOUND_S, "the first ledger trimmed")
    compact(api, topic, live)
    assert pairs(read_all(api, topic)) == [(f"k{i}", f"v{i}") for i in range(1, 5)] + [("k0", "v0'")]
    assert ids(read_all(api, topic)) == kept[1:]

    # consume everything, roll: retention deletes the compacted-over ledgers; the view stays
    assert len(drain(api, topic, "durable", ack=True)) == 6
    compacted_over = ledger_ids(api, topic)
    assert unload_topic.sync_detailed(*NS, topic, client=api).status_code == 204
    tail = send(api, topic, [("k9", "after")])
    wait_until(
        lambda: not set(compacted_over) & set(ledger_ids(api, topic)), WAIT_BOUND_S, "the old ledgers trimmed"
    )
    assert ids(read_all(api, topic, compacted=False)) == tail  # the raw topic lost them
    assert ids(read_all(api, topic)) == kept[1:] + tail  # every live key, then after the horizon


def test_trigger_is_running_at_once_and_a_second_one_conflicts(live: Live, api: Client) -> None:
    topic = new_topic("slow")
    send(api, topic, [("a", "1"), ("a", "2")])
    assert trigger(api, topic) == 204
    accepted = status(api, topic)
    assert str(accepted.status) == "RUNNING", accepted.to_dict()  # never the previous run's result
    assert trigger(api, topic) == 409  # requested, not yet taken
    wait_status(api, topic, live, "RUNNING")  # taken by the compactor, paused by the test hook
    assert trigger(api, topic) == 409  # running
    assert str(wait_status(api, topic, live, "SUCCESS", "ERROR").status) == "SUCCESS"


@pytest.mark.slow
def test_kill9_mid_run_is_error_within_the_lease_and_a_new_run_succeeds(live: Live, api: Client) -> None:
    topic = new_topic("slow")
    filler = [(f"k{i:02d}", "x" * 40) for i in range(40)]  # a base big enough that 2 more are a delta
    first = send(api, topic, [("a", "1"), ("b", "2"), ("a", "3"), *filler])
    compact(api, topic, live)
    view = ids(read_all(api, topic))
    assert view == first[1:]
    view_ledger = internal_stats(api, topic).compacted_ledger.ledger_id

    # a second run (a delta), killed with -9 while paused with its ledger written and not closed
    more = send(api, topic, [("b", "4"), ("c", "5")])
    paused_before = live.compactor.log().count(PAUSED)
    assert trigger(api, topic) == 204
    wait_until(
        lambda: live.compactor.log().count(PAUSED) > paused_before, RUN_BOUND_S, "the run to reach its pause"
    )
    run_ledger = run_ledger_of(live, topic)
    assert run_ledger is not None and ledger_on_bookie(live, run_ledger)
    live.compactor.kill9()
    live.compactor.stop()
    assert not live.compactor.alive()

    # no compactor is running: the broker itself reports the dead run once its lease lapses
    errored = wait_without_compactor(api, topic, "ERROR")
    assert "lost its lease" in str(errored.last_error), errored.to_dict()
    assert internal_stats(api, topic).compacted_ledger.ledger_id == view_ledger != run_ledger
    assert ids(read_all(api, topic)) == view + more  # the old view, then the topic after it
    assert ids(read_all(api, topic, first[2])) == [*first[2:], *more]
    assert run_ledger_of(live, topic) == run_ledger  # kept for a compactor to delete

    # a request that no compactor takes expires too
    assert trigger(api, topic) == 204
    assert str(status(api, topic).status) == "RUNNING"
    assert trigger(api, topic) == 409
    unclaimed = wait_without_compactor(api, topic, "ERROR")
    assert "no compactor took the run" in str(unclaimed.last_error), unclaimed.to_dict()

    # a new request is accepted, and a restarted compactor deletes the dead run's ledger and runs it
    assert trigger(api, topic) == 204
    live.start_compactor()
    done = wait_status(api, topic, live, "SUCCESS", "ERROR")
    assert str(done.status) == "SUCCESS", (done.to_dict(), live.compactor.log()[-3000:])
    assert pairs(read_all(api, topic)) == [("a", "3"), *filler, ("b", "4"), ("c", "5")]
    assert internal_stats(api, topic).compacted_ledger.ledger_id == view_ledger  # the base, untouched
    assert len(state_of(live, topic).delta_ledger_ids) == 1  # and the new messages' delta
    assert not ledger_on_bookie(live, run_ledger)
    assert run_ledger not in {m.ledger_id for m in ledgers_in_store(live)}
    assert_no_orphaned_ledgers(live)


def wait_without_compactor(api: Client, topic: str, wanted: str) -> CompactionStatus:
    """Wait (bounded: the lease plus slack) for a status while no compactor runs."""
    seen: list[CompactionStatus] = []

    def reached() -> bool:
        seen.append(status(api, topic))
        return str(seen[-1].status) == wanted

    wait_until(
        reached, LEASE_MS / 1000 + WAIT_BOUND_S, f"compaction status {wanted} of {topic}", interval_s=0.2
    )
    return seen[-1]


# --- the metadata store and the bookie, for orphaned ledgers -----------------------------------
def state_of(live: Live, topic: str) -> CompactionState:
    store = live.store()
    try:
        (state,) = [s for s in store.list_compactions() if s.topic.endswith(f"/{topic}")]
        return state
    finally:
        store.close()


def run_ledger_of(live: Live, topic: str) -> int | None:
    return state_of(live, topic).run_ledger_id


def ledgers_in_store(live: Live) -> list[LedgerMetadata]:
    store = live.store()
    try:
        return store.list_ledgers()
    finally:
        store.close()


def ledger_on_bookie(live: Live, ledger_id: int) -> bool:
    spec = LedgerSpec(ledger_id, (f"127.0.0.1:{live.stack.bookie_port}",), 1, 1)

    async def probe() -> bool:
        client = BookieLedgerClient()
        try:
            await client.read_entries(spec, 0, 0)
            return True
        except (NoSuchLedgerError, NoSuchEntryError):
            return False
        finally:
            await client.close()

    return asyncio.run(probe())


def stray_ledgers(live: Live) -> list[int]:
    """Ledgers in the metadata store that are neither a topic's nor a compacted view."""
    store = live.store()
    try:
        referenced: set[int] = set()
        for topic in store.list_topics("/".join(NS)):
            ml = store.get_managed_ledger(topic.name)  # non-partitioned: one ML named after it
            referenced.update(ml.ledger_ids if ml is not None else ())
        for state in store.list_compactions():
            assert state.run_ledger_id is None, state  # no run is in progress or left behind
            referenced.update(state.layer_ledger_ids)
        return [m.ledger_id for m in store.list_ledgers() if m.ledger_id not in referenced]
    finally:
        store.close()


def assert_no_orphaned_ledgers(live: Live) -> None:
    # a retention trim of another test's topic may be between its list update and its metadata
    # delete (DESIGN §5 order): give it a bounded moment, then the store must be clean
    with contextlib.suppress(TimeoutError):
        wait_until(lambda: not stray_ledgers(live), WAIT_BOUND_S, "no stray ledgers", interval_s=0.5)
    assert stray_ledgers(live) == []
