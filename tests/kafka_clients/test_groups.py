"""Consumer groups with each of the four clients: two members of one group on a two-partition
topic split the partitions; when one leaves (closes: LeaveGroup), the other is given both after
the rebalance and reads what is produced to both, from the offsets the first one committed."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from tests.kafka_clients.admin import create_topic
from tests.kafka_clients.clients import CLIENTS, Out, Record, produce
from tests.kafka_clients.groups import Member
from tests.kafka_clients.support import Standalone

BOTH = frozenset({0, 1})


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
