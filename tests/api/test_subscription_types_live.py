"""Subscriptions through the generated client against a real bookie and broker on PostgreSQL:
three key_shared consumers with one leaving and one joining, per-key order checked over every
delivery; a failover standby taking over when the active consumer goes silent; the consumer id
they need; the type and the redelivery counts kept over a broker restart; a poison message
reaching the dead-letter topic after exactly max_redeliveries + 1 deliveries; the backlog
admin (create at an id, peek, skip, expire, examine). The model-based checks are
tests/topics/test_subscription_types.py, test_dead_letters.py and test_backlog_ops.py."""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Iterator

import httpx
import pytest
from quire_client import Client
from quire_client.api.admin import (
    admin_create_subscription,
    create_partitioned_topic,
    examine_message,
    expire_messages,
    get_message_ttl,
    get_partitions,
    get_topic_stats,
    peek_message,
    set_message_ttl,
    skip_messages,
    update_partitioned_topic,
)
from quire_client.api.data import (
    ack_messages,
    create_subscription,
    nack_messages,
    produce,
    read_messages,
    receive,
)
from quire_client.models import (
    AckRequest,
    ExamineMessageInitialposition,
    MessageList,
    MessageOut,
    NackRequest,
    Problem,
    ProduceMessage,
    ProduceRequest,
    ReadPage,
    SubscriptionRequest,
    SubscriptionRequestInitialPosition,
    SubscriptionRequestType,
)

from tests.api.conftest import Stack, postgres_stack

NS = ("public", "default")
IDLE_MS = 1_500  # QUIRE_EXCLUSIVE_CONSUMER_IDLE_MS of the stack: a consumer silent this long leaves
BOUND_S = 30.0


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory, postgres_url: str) -> Iterator[Stack]:
    with postgres_stack(
        tmp_path_factory.mktemp("sub-types"),
        postgres_url,
        QUIRE_EXCLUSIVE_CONSUMER_IDLE_MS=str(IDLE_MS),
        QUIRE_DEFAULT_ACK_TIMEOUT_MS="60000",
        QUIRE_MESSAGE_TTL_CHECK_INTERVAL_MS="300",
    ) as s:
        yield s


@pytest.fixture
def client(stack: Stack) -> Iterator[Client]:
    with Client(base_url=stack.base_url, timeout=httpx.Timeout(BOUND_S)) as c:
        yield c


def _topic() -> str:
    return f"types-{uuid.uuid4().hex[:10]}"


def _subscribe(client: Client, topic: str, kind: SubscriptionRequestType, **options: object) -> None:
    body = SubscriptionRequest(
        type_=kind, initial_position=SubscriptionRequestInitialPosition.EARLIEST, **options
    )
    done = create_subscription.sync_detailed(*NS, topic, "s", client=client, body=body)
    assert done.status_code in (200, 201), done.content


def _produce(client: Client, topic: str, pairs: list[tuple[str, str]]) -> None:
    body = ProduceRequest(messages=[ProduceMessage(key=k, value=v) for k, v in pairs])
    done = produce.sync_detailed(*NS, topic, client=client, body=body)
    assert done.status_code == 200, done.content


def _receive(client: Client, topic: str, consumer: str, n: int = 100) -> list[MessageOut]:
    got = receive.sync_detailed(*NS, topic, "s", client=client, max_messages=n, consumer_id=consumer)
    assert got.status_code == 200 and isinstance(got.parsed, MessageList), got.content
    return list(got.parsed.messages)


def _ack(client: Client, topic: str, messages: list[MessageOut]) -> None:
    body = AckRequest(message_ids=[m.message_id for m in messages])
    assert ack_messages.sync_detailed(*NS, topic, "s", client=client, body=body).status_code == 204


def test_types_but_shared_refuse_a_receive_without_consumer_id(client: Client) -> None:
    topic = _topic()
    _produce(client, topic, [("k", "v")])
    _subscribe(client, topic, SubscriptionRequestType.KEY_SHARED)
    got = receive.sync_detailed(*NS, topic, "s", client=client)
    assert got.status_code == 422 and isinstance(got.parsed, Problem), got.content
    assert got.headers["content-type"] == "application/problem+json"
    assert "consumer_id" in (got.parsed.detail or "")


def test_key_shared_three_consumers_one_leaves_one_joins(client: Client) -> None:
    topic = _topic()
    _subscribe(client, topic, SubscriptionRequestType.KEY_SHARED)
    for c in ("c1", "c2", "c3"):
        assert _receive(client, topic, c) == []
    keys = [f"key-{i}" for i in range(24)]
    _produce(client, topic, [(k, f"{k}/{j}") for j in range(3) for k in keys])
    owner: dict[str, str] = {}
    seen: dict[str, list[int]] = {k: [] for k in keys}

    def take(consumer: str, ack: bool = True) -> list[MessageOut]:
        got = _receive(client, topic, consumer)
        for m in got:
            key = str(m.key)
            assert owner.setdefault(key, consumer) == consumer, (key, owner[key], consumer)
            seen[key].append(int(str(m.value).rsplit("/", 1)[1]))
        if ack and got:
            _ack(client, topic, got)
        return got

    held = take("c1", ack=False)  # c1 will leave with these unacked
    take("c2")
    take("c3")
    assert held and all(len(seen[k]) == 3 for k in keys)
    assert len(set(owner.values())) == 3
    for k in keys:
        assert seen[k] == [0, 1, 2]
    # c1 goes silent: after the idle time its keys (and its unacked messages, first) move to the
    # others; c2 and c3 keep asking meanwhile, so they stay.
    deadline = time.monotonic() + IDLE_MS / 1000 + BOUND_S
    moved: list[MessageOut] = []
    while len(moved) < len(held) and time.monotonic() < deadline:
        for c in ("c2", "c3"):
            got = _receive(client, topic, c)
            moved += got
            if got:
                _ack(client, topic, got)
        time.sleep(0.2)
    assert sorted(m.message_id for m in moved) == sorted(m.message_id for m in held)
    assert all(m.redelivery_count == 1 for m in moved)
    by_key: dict[str, list[int]] = {}
    for m in moved:
        by_key.setdefault(str(m.key), []).append(int(str(m.value).rsplit("/", 1)[1]))
    assert all(v == sorted(v) for v in by_key.values()), by_key
    # c4 joins: new messages of every key go to one consumer each, in order, c4 among them.
    assert _receive(client, topic, "c4") == []
    _produce(client, topic, [(k, f"{k}/{j}") for j in range(3, 6) for k in keys])
    late: dict[str, list[tuple[str, int]]] = {}
    for c in ("c2", "c3", "c4"):
        for m in _receive(client, topic, c):
            late.setdefault(str(m.key), []).append((c, int(str(m.value).rsplit("/", 1)[1])))
    assert set(late) == set(keys)
    assert all(len({c for c, _ in v}) == 1 and [j for _, j in v] == [3, 4, 5] for v in late.values())
    assert "c4" in {v[0][0] for v in late.values()}


def test_failover_standby_takes_over_and_the_type_survives_a_restart(client: Client, stack: Stack) -> None:
    topic = _topic()
    _subscribe(client, topic, SubscriptionRequestType.FAILOVER)
    _produce(client, topic, [(None, f"m{i}") for i in range(5)])  # type: ignore[misc]
    first = _receive(client, topic, "a-active", 3)
    assert [m.value for m in first] == ["m0", "m1", "m2"]
    assert _receive(client, topic, "b-standby") == []
    _ack(client, topic, first[:1])
    deadline = time.monotonic() + IDLE_MS / 1000 + BOUND_S
    taken: list[MessageOut] = []
    while not taken and time.monotonic() < deadline:
        time.sleep(0.3)
        taken = _receive(client, topic, "b-standby")
    assert [(m.value, m.redelivery_count) for m in taken] == [("m1", 1), ("m2", 1), ("m3", 0), ("m4", 0)]
    time.sleep(1.5)  # the cursor's batched flush stores the redelivery counts
    stack.kill_broker()
    stack.start_broker()
    # After the restart: still failover (one consumer gets all, the other nothing), with the
    # counts kept.
    again = _receive(client, topic, "b-standby")
    assert [(m.value, m.redelivery_count) for m in again] == [("m1", 2), ("m2", 2), ("m3", 1), ("m4", 1)]
    assert _receive(client, topic, "c-other") == []


def test_a_poison_message_reaches_the_dead_letter_topic_after_exactly_n_deliveries(client: Client) -> None:
    topic = _topic()
    _subscribe(client, topic, SubscriptionRequestType.SHARED, max_redeliveries=2)
    _produce(client, topic, [("k", "poison"), ("k", "fine")])
    counts = []
    for _ in range(4):
        got = _receive(client, topic, "c1")
        counts += [m.redelivery_count for m in got if m.value == "poison"]
        fine = [m for m in got if m.value != "poison"]
        if fine:
            _ack(client, topic, fine)
        poison = [m.message_id for m in got if m.value == "poison"]
        if poison:
            body = NackRequest(message_ids=poison)
            assert nack_messages.sync_detailed(*NS, topic, "s", client=client, body=body).status_code == 204
    assert counts == [0, 1, 2]  # max_redeliveries + 1 deliveries, then no more
    page = read_messages.sync_detailed(*NS, f"{topic}-s-DLQ", client=client, start="earliest")
    assert page.status_code == 200 and isinstance(page.parsed, ReadPage), page.content
    letters = page.parsed.messages
    assert [(m.value, m.key) for m in letters] == [("poison", "k")]
    props = letters[0].properties.to_dict()
    assert props["REAL_TOPIC"] == f"public/default/{topic}" and props["DEAD_LETTER_REASON"] == "nacked"
    stats = get_topic_stats.sync_detailed(*NS, topic, client=client)
    assert stats.status_code == 200 and stats.parsed is not None
    assert stats.parsed.to_dict()["subscriptions"]["s"]["msgBacklog"] == 0  # acked on the original


def test_backlog_admin_create_at_an_id_peek_skip_expire_examine(client: Client) -> None:
    topic = _topic()
    _produce(client, topic, [("k", f"m{i}") for i in range(6)])
    first = _receive_reader(client, topic)
    at = admin_create_subscription.sync_detailed(*NS, topic, "s", client=client, message_id=first[2])
    assert at.status_code == 204, at.content
    again = admin_create_subscription.sync_detailed(*NS, topic, "s", client=client)
    assert again.status_code == 409 and isinstance(again.parsed, Problem)

    def peek(n: int) -> str | None:
        r = peek_message.sync_detailed(*NS, topic, "s", n, client=client)
        if r.status_code == 404:
            return None
        assert r.status_code == 200 and isinstance(r.parsed, MessageOut), r.content
        return str(r.parsed.value)

    assert [peek(n) for n in (1, 2, 4, 5)] == ["m2", "m3", "m5", None]
    assert skip_messages.sync_detailed(*NS, topic, "s", 2, client=client).status_code == 204
    assert peek(1) == "m4"
    assert expire_messages.sync_detailed(*NS, topic, "s", 0, client=client).status_code == 204
    assert peek(1) is None
    latest = examine_message.sync_detailed(
        *NS, topic, client=client, initial_position=ExamineMessageInitialposition.LATEST, message_position=1
    )
    assert latest.status_code == 200 and isinstance(latest.parsed, MessageOut) and latest.parsed.value == "m0"
    bad = admin_create_subscription.sync_detailed(*NS, topic, "t", client=client, message_id="12:x")
    assert bad.status_code == 422 and isinstance(bad.parsed, Problem)  # and nothing was created:
    assert admin_create_subscription.sync_detailed(*NS, topic, "t", client=client).status_code == 204


def _receive_reader(client: Client, topic: str) -> list[str]:
    page = read_messages.sync_detailed(*NS, topic, client=client, start="earliest")
    assert page.status_code == 200 and isinstance(page.parsed, ReadPage), page.content
    return [m.message_id for m in page.parsed.messages]


def test_message_ttl_expires_old_messages_in_the_broker(client: Client) -> None:
    topic = _topic()
    _subscribe(client, topic, SubscriptionRequestType.SHARED)
    _produce(client, topic, [("k", "old")])
    assert set_message_ttl.sync_detailed(*NS, topic, client=client, message_ttl=1).status_code == 204
    ttl = get_message_ttl.sync_detailed(*NS, topic, client=client)
    assert ttl.status_code == 200 and ttl.parsed == 1
    deadline = time.monotonic() + BOUND_S
    while time.monotonic() < deadline:  # the broker's check runs every 300 ms; the TTL is 1 s
        if peek_message.sync_detailed(*NS, topic, "s", 1, client=client).status_code == 404:
            break
        time.sleep(0.2)
    assert peek_message.sync_detailed(*NS, topic, "s", 1, client=client).status_code == 404
    assert _receive(client, topic, "c1") == []
    bad = set_message_ttl.sync_detailed(*NS, topic, client=client, message_ttl=-1)
    assert bad.status_code == 422 and isinstance(bad.parsed, Problem)


def test_partitions_grow_while_producers_run_and_no_message_is_missed(client: Client, stack: Stack) -> None:
    topic = _topic()
    assert create_partitioned_topic.sync_detailed(*NS, topic, client=client, body=2).status_code == 204
    _subscribe(client, topic, SubscriptionRequestType.SHARED)
    acked: list[str] = []
    stop = threading.Event()

    def producer() -> None:
        with Client(base_url=stack.base_url, timeout=httpx.Timeout(BOUND_S)) as own:
            i = 0
            while not stop.is_set() and i < 2_000:
                batch = [(f"k{(i + j) % 50}", f"v{i + j}") for j in range(10)]
                body = ProduceRequest(messages=[ProduceMessage(key=k, value=v) for k, v in batch])
                done = produce.sync_detailed(*NS, topic, client=own, body=body)
                if done.status_code == 200:
                    acked.extend(v for _, v in batch)
                i += 10

    thread = threading.Thread(target=producer, name="producer")
    thread.start()
    try:
        time.sleep(0.5)
        grown = update_partitioned_topic.sync_detailed(*NS, topic, client=client, body=4)
        assert grown.status_code == 204, grown.content
        time.sleep(0.5)
    finally:
        stop.set()
        thread.join(timeout=BOUND_S)
    assert get_partitions.sync_detailed(*NS, topic, client=client).parsed.partitions == 4  # type: ignore[union-attr]
    got: set[str] = set()
    deadline = time.monotonic() + BOUND_S
    while len(got) < len(set(acked)) and time.monotonic() < deadline:
        batch = _receive(client, topic, "c1", 1_000)
        got |= {str(m.value) for m in batch}
        if batch:
            _ack(client, topic, batch)
    assert acked and set(acked) <= got
    fewer = update_partitioned_topic.sync_detailed(*NS, topic, client=client, body=3)
    assert fewer.status_code == 409 and isinstance(fewer.parsed, Problem)
