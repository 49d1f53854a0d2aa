"""Consumer groups with each of the four clients, on one standalone over PostgreSQL.

- Two members of one group on a two-partition topic split the partitions; when one leaves
  (closes: LeaveGroup), the other is given both after the rebalance and reads what is produced
  to both, from the offsets the first one committed.
- Committed offsets outlive a restart: N keyed records with headers are produced and read in a
  group that commits; the standalone is stopped and started again on the same data directory,
  ports and database; after M more records, a new consumer in the same group gets exactly the M
  new ones, at offsets N..N+M-1. One restart serves the four clients (the restart tests come
  last: the split tests run before it).

Group offsets do not hold data (no Quire subscription does): under the default retention (0, 0)
the ledger a restart closes goes at the next trim. A topic created with retention.ms=-1 keeps
all of it, which the last test checks."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

import pytest

from tests.conftest import drop_postgres_schema, fresh_postgres_schema_url
from tests.kafka_clients.admin import create_topic
from tests.kafka_clients.clients import CLIENTS, Out, Record, produce, read
from tests.kafka_clients.groups import Member, group_consume
from tests.kafka_clients.support import Standalone, standalone

N, M = 10, 5
KEPT = "kept-forever"
TRIM_PASSES_S = 3.0  # each open managed ledger trims at least once a second
BOTH = frozenset({0, 1})
pytestmark = pytest.mark.timeout(600)  # the restart fixture starts, restarts and reads for all four


@pytest.fixture(scope="module")
def quire(tmp_path_factory: pytest.TempPathFactory, postgres_url: str) -> Iterator[Standalone]:
    url, schema = fresh_postgres_schema_url(postgres_url)
    try:
        with standalone(tmp_path_factory.mktemp("quire"), url) as s:
            yield s
    finally:
        drop_postgres_schema(postgres_url, schema)


# --- two members split the partitions ---------------------------------------------------------


def wait_for(members: list[Member], predicate: Callable[[], bool], what: str) -> None:
    def settled() -> bool:
        for member in members:
            if member.error is not None:
                raise AssertionError(f"{member.client} member failed") from member.error
        return predicate()

    members[0].wait(settled, what)


def split(first: Member, second: Member) -> bool:
    a, b = first.assigned, second.assigned
    return a is not None and b is not None and len(a) == len(b) == 1 and a | b == BOTH


def to_both(tag: str, count: int) -> list[Out]:
    return [
        Out(b"key-%d" % i, b"%s-p%d-%d" % (tag.encode(), p, i), partition=p)
        for p in (0, 1)
        for i in range(count)
    ]


def seen(records: list[Record]) -> set[tuple[int, bytes | None]]:
    return {(r.partition, r.value) for r in records}


@pytest.mark.parametrize("client", CLIENTS)
def test_two_members_split_the_partitions_and_the_last_one_gets_both(quire: Standalone, client: str) -> None:
    topic = group = f"split-{client}"
    create_topic(client, quire, topic, partitions=2)
    first = Member(client, quire.bootstrap, group, topic)
    members = [first]
    try:
        wait_for(members, lambda: first.assigned == BOTH, "the first member given both partitions")
        second = Member(client, quire.bootstrap, group, topic)
        members.append(second)
        wait_for(members, lambda: split(first, second), "one partition each")
        before = to_both("before", 3)
        produce(client, quire.bootstrap, topic, before)
        wait_for(members, lambda: len(first.records) + len(second.records) >= 6, "the first six records")
        for member in members:  # each read its own partition only
            assert member.assigned is not None
            assert {r.partition for r in member.records} == set(member.assigned), member.client
        assert seen(first.records) | seen(second.records) == {(m.partition, m.value) for m in before}

        members.remove(first)
        first.close()  # leaves the group: a rebalance gives the second member both partitions
        wait_for(members, lambda: second.assigned == BOTH, "the second member given both partitions")
        read_before = len(second.records)
        after = to_both("after", 2)
        produce(client, quire.bootstrap, topic, after)
        wait_for(members, lambda: len(second.records) >= read_before + 4, "the four records after")
        new = second.records[read_before:]
        # what the first member read and committed is not read again; both partitions go on
        assert sorted(seen(new)) == sorted((m.partition, m.value) for m in after)
        assert len(new) == 4
        every = [(r.partition, r.offset) for r in first.records + second.records]
        assert len(every) == len(set(every)) == 10, "a record was read twice, or one was missed"
    finally:
        for member in members:
            member.close()


# --- committed offsets outlive a restart -------------------------------------------------------


def records(start: int, count: int) -> list[Out]:
    return [
        Out(b"key-%d" % (i % 4), b"value-%d" % i, (("n", b"%d" % i), ("src", b"restart")))
        for i in range(start, start + count)
    ]


def as_sent(got: list[Record]) -> list[tuple[int, bytes | None, bytes | None, tuple[tuple[str, bytes], ...]]]:
    return [(r.offset, r.key, r.value, r.headers) for r in got]


def expected(
    start: int, count: int
) -> list[tuple[int, bytes | None, bytes | None, tuple[tuple[str, bytes], ...]]]:
    return [(start + i, m.key, m.value, m.headers) for i, m in enumerate(records(start, count))]


@dataclass
class BeforeRestart:
    read: dict[str, list[Record]] = field(default_factory=dict)
    errors: dict[str, BaseException] = field(default_factory=dict)


@pytest.fixture(scope="module")
def restarted(quire: Standalone) -> BeforeRestart:
    """Each client's first N records produced and read in its group (committed), then one restart
    of the standalone for all four; a client that failed before the restart keeps its error."""
    state = BeforeRestart()
    try:
        create_topic("kafka-python", quire, KEPT, configs={"retention.ms": "-1"})
        produce("kafka-python", quire.bootstrap, KEPT, records(0, N))
    except Exception as exc:
        state.errors[KEPT] = exc
    for client in CLIENTS:
        try:
            produce(client, quire.bootstrap, f"resume-{client}", records(0, N))
            state.read[client] = group_consume(
                client, quire.bootstrap, f"resume-{client}", f"resume-{client}", N
            )
        except Exception as exc:
            state.errors[client] = exc
    quire.restart()
    return state


@pytest.mark.parametrize("client", CLIENTS)
def test_a_group_resumes_from_its_committed_offset_after_a_restart(
    quire: Standalone, restarted: BeforeRestart, client: str
) -> None:
    if client in restarted.errors:
        raise AssertionError(f"{client}: before the restart") from restarted.errors[client]
    assert as_sent(restarted.read[client]) == expected(0, N)
    topic = group = f"resume-{client}"
    produce(client, quire.bootstrap, topic, records(N, M))
    assert as_sent(group_consume(client, quire.bootstrap, group, topic, M)) == expected(N, M)


def test_a_topic_with_unlimited_retention_keeps_every_record_across_a_restart(
    quire: Standalone, restarted: BeforeRestart
) -> None:
    if KEPT in restarted.errors:
        raise AssertionError("before the restart") from restarted.errors[KEPT]
    produce("kafka-python", quire.bootstrap, KEPT, records(N, M))  # the topic opens and trims again
    time.sleep(TRIM_PASSES_S)
    assert as_sent(read("kafka-python", quire.bootstrap, KEPT, 0)) == expected(0, N + M)
