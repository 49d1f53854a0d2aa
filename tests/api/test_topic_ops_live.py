"""Terminate, truncate and truncateBefore through the generated client against a real bookie,
broker and compactor on PostgreSQL: produce refused with 409 `topic-terminated` and
`end_of_topic` for a subscription and a reader, kept over a broker restart; truncate leaves no
backlog and nothing to read; truncateBefore moves a reader, a subscription and a later
compaction's view to the log start. The model-based checks are tests/topics/test_topic_ops.py."""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator

import httpx
import pytest
from quire_client import Client
from quire_client.api.admin import (
    get_compaction_status,
    get_topic_stats,
    terminate_topic,
    trigger_compaction,
    truncate_topic,
    truncate_topic_before,
)
from quire_client.api.data import ack_messages, create_subscription, produce, read_messages, receive
from quire_client.models import (
    AckRequest,
    CompactionStatus,
    MessageIdBody,
    MessageList,
    Problem,
    ProduceMessage,
    ProduceRequest,
    ReadPage,
    SubscriptionRequest,
    SubscriptionRequestInitialPosition,
    TerminateResult,
)
from quire_client.models.compaction_status_status import CompactionStatusStatus

from tests.api.conftest import Stack, start_stack
from tests.conftest import drop_postgres_schema, fresh_postgres_schema_url
from tests.support import QuireProcess, wait_until

NS = ("public", "default")
BOUND_S = 30.0
RUN_BOUND_S = 180.0  # a compaction run on a loaded 2-core machine (a cold Spark session)


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory, postgres_url: str) -> Iterator[Stack]:
    url, schema = fresh_postgres_schema_url(postgres_url)
    root = tmp_path_factory.mktemp("topic-ops")
    s = start_stack(
        root,
        url,
        QUIRE_COMPACTION_POLL_INTERVAL_MS="200",
        QUIRE_CURSOR_FLUSH_INTERVAL_MS="200",
        QUIRE_SPARK_MASTER="local[1]",
    )
    compactor = None
    try:
        compactor = QuireProcess(["compactor"], s.env(), root / "compactor.log").start()
        yield s
    finally:
        if compactor is not None:
            compactor.stop(timeout_s=30)
        s.stop()
        drop_postgres_schema(postgres_url, schema)


@pytest.fixture
def client(stack: Stack) -> Iterator[Client]:
    with Client(base_url=stack.base_url, timeout=httpx.Timeout(BOUND_S)) as c:
        yield c


def _topic() -> str:
    return f"ops-{uuid.uuid4().hex[:10]}"


def _produce(client: Client, topic: str, pairs: list[tuple[str | None, str]]) -> httpx.Response:
    body = ProduceRequest(messages=[ProduceMessage(key=k, value=v) for k, v in pairs])
    done = produce.sync_detailed(*NS, topic, client=client, body=body)
    return httpx.Response(done.status_code, content=done.content)


def _ids(client: Client, topic: str, pairs: list[tuple[str | None, str]]) -> list[str]:
    done = _produce(client, topic, pairs)
    assert done.status_code == 200, done.content
    return [r["message_id"] for r in done.json()["results"]]


def _subscribe(client: Client, topic: str, sub: str, **options: object) -> None:
    body = SubscriptionRequest(initial_position=SubscriptionRequestInitialPosition.EARLIEST, **options)
    done = create_subscription.sync_detailed(*NS, topic, sub, client=client, body=body)
    assert done.status_code in (200, 201), done.content


def _receive(client: Client, topic: str, sub: str, wait_ms: int = 0) -> MessageList:
    got = receive.sync_detailed(*NS, topic, sub, client=client, max_messages=100, wait_ms=wait_ms)
    assert isinstance(got.parsed, MessageList), got.content
    return got.parsed


def _read(client: Client, topic: str, start: str = "earliest", compacted: bool = False) -> ReadPage:
    got = read_messages.sync_detailed(
        *NS, topic, client=client, start=start, max_messages=100, read_compacted=compacted
    )
    assert isinstance(got.parsed, ReadPage), got.content
    return got.parsed


def _terminate(client: Client, topic: str) -> str | None:
    done = terminate_topic.sync_detailed(*NS, topic, client=client)
    assert isinstance(done.parsed, TerminateResult), done.content
    return done.parsed.message_id


def test_terminate_refuses_produce_and_says_end_of_topic_across_a_restart(
    client: Client, stack: Stack
) -> None:
    topic = _topic()
    _subscribe(client, topic, "s")
    ids = _ids(client, topic, [(None, "a"), (None, "b"), (None, "c")])
    assert _terminate(client, topic) == ids[-1]
    refused = _produce(client, topic, [(None, "late")])
    assert refused.status_code == 409 and refused.json()["type"].endswith("/topic-terminated")
    got = _receive(client, topic, "s")
    assert [m.message_id for m in got.messages] == ids and not got.end_of_topic
    ack = AckRequest(message_ids=ids)
    assert ack_messages.sync_detailed(*NS, topic, "s", client=client, body=ack).status_code == 204
    assert _receive(client, topic, "s", wait_ms=1_000).end_of_topic
    assert _read(client, topic).end_of_topic and _read(client, topic, "latest").end_of_topic
    time.sleep(1.0)  # acks are stored by the next cursor flush (every 200 ms here), then kill -9
    stack.kill_broker()
    stack.start_broker()
    refused = _produce(client, topic, [(None, "after restart")])
    assert refused.status_code == 409 and refused.json()["type"].endswith("/topic-terminated")
    assert _terminate(client, topic) == ids[-1]
    assert _receive(client, topic, "s").end_of_topic


def test_truncate_leaves_no_backlog_and_nothing_to_read(client: Client) -> None:
    topic = _topic()
    _subscribe(client, topic, "s")
    _ids(client, topic, [(None, f"m{i}") for i in range(5)])
    assert truncate_topic.sync_detailed(*NS, topic, client=client).status_code == 204
    assert _read(client, topic).messages == []
    stats = get_topic_stats.sync_detailed(*NS, topic, client=client).parsed
    assert stats is not None and not isinstance(stats, Problem)
    assert stats.subscriptions["s"].msg_backlog == 0
    later = _ids(client, topic, [(None, "new")])
    assert [m.message_id for m in _receive(client, topic, "s").messages] == later


def test_truncate_before_moves_a_reader_a_subscription_and_the_compacted_view(client: Client) -> None:
    topic = _topic()
    _subscribe(client, topic, "s")
    old = _ids(client, topic, [("only-old", "x"), ("both", "old")])
    new = _ids(client, topic, [("both", "new"), ("fresh", "y")])
    body = MessageIdBody(message_id=new[0])
    assert truncate_topic_before.sync_detailed(*NS, topic, client=client, body=body).status_code == 204
    assert [m.message_id for m in _read(client, topic).messages] == new
    assert [m.message_id for m in _read(client, topic, old[0]).messages] == new
    assert [m.message_id for m in _receive(client, topic, "s").messages] == new
    beyond = MessageIdBody(message_id="999999999:0:0")
    refused = truncate_topic_before.sync_detailed(*NS, topic, client=client, body=beyond)
    assert refused.status_code == 422, refused.content
    assert trigger_compaction.sync_detailed(*NS, topic, client=client).status_code == 204

    def compacted() -> bool:
        state = get_compaction_status.sync_detailed(*NS, topic, client=client).parsed
        assert isinstance(state, CompactionStatus)
        assert state.status != CompactionStatusStatus.ERROR, state.last_error
        return state.status == CompactionStatusStatus.SUCCESS

    wait_until(compacted, RUN_BOUND_S, "the compaction run")
    view = _read(client, topic, compacted=True)
    assert {(m.key, m.value) for m in view.messages} == {("both", "new"), ("fresh", "y")}
