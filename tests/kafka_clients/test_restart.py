"""Committed group offsets outlive a restart, with each of the four clients, on PostgreSQL:
N keyed records with headers are produced and read in a group that commits; the standalone is
stopped and started again on the same data directory, ports and database; after M more records,
a new consumer in the same group gets exactly the M new ones, at offsets N..N+M-1.

Group offsets do not hold data (no Quire subscription does): under the default retention (0, 0)
the ledger a restart closes goes at the next trim. A topic created with retention.ms=-1 keeps
all of it, which the last test checks."""

from __future__ import annotations

import time
from collections.abc import Iterator
from dataclasses import dataclass, field

import pytest

from tests.conftest import drop_postgres_schema, fresh_postgres_schema_url
from tests.kafka_clients.admin import create_topic
from tests.kafka_clients.clients import CLIENTS, Out, Record, produce, read
from tests.kafka_clients.groups import group_consume
from tests.kafka_clients.support import Standalone, standalone

N, M = 10, 5
KEPT = "kept-forever"
TRIM_PASSES_S = 3.0  # each open managed ledger trims at least once a second
pytestmark = pytest.mark.timeout(600)  # one module fixture starts, restarts and reads for all four


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


@pytest.fixture(scope="module")
def quire(tmp_path_factory: pytest.TempPathFactory, postgres_url: str) -> Iterator[Standalone]:
    url, schema = fresh_postgres_schema_url(postgres_url)
    try:
        with standalone(tmp_path_factory.mktemp("quire"), url) as s:
            yield s
    finally:
        drop_postgres_schema(postgres_url, schema)


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
