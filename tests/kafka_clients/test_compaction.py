"""A compacted topic with each of the four clients: created with cleanup.policy=compact (the
client's admin client; kcat's over REST's compactionPolicy), several values per key and a
tombstone produced over Kafka, one compaction run of the four topics over REST (the compactor
uses Spark: the first run takes a while, so one run serves every client), then a tail. A reader
from the beginning gets the latest value of each live key at its original offset, then the tail.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field

import pytest

from tests.kafka_clients.admin import create_topic
from tests.kafka_clients.clients import CLIENTS, Out, produce, read
from tests.kafka_clients.support import Standalone

KEYS = [b"apple", b"pear", b"plum"]
ROUNDS = 3
GONE = b"gone"  # written, then a tombstone: compaction drops the key


def history() -> list[Out]:
    """Offsets 0..8: three rounds over the keys; 9, 10: a value of GONE, then its tombstone."""
    out = [
        Out(key, b"%s-round-%d" % (key, r), (("round", b"%d" % r),)) for r in range(ROUNDS) for key in KEYS
    ]
    return [*out, Out(GONE, b"soon gone"), Out(GONE, None)]


# The compactor's Spark session can take minutes to warm up on a loaded machine.
pytestmark = pytest.mark.timeout(600)

TAIL = [Out(b"late-%d" % i, b"after compaction %d" % i, (("tail", b"yes"),)) for i in range(2)]


@dataclass
class Prepared:
    errors: dict[str, BaseException] = field(default_factory=dict)


def topic_of(client: str) -> str:
    return f"compacted-{client}"


@pytest.fixture(scope="module")
def prepared(quire: Standalone) -> Iterator[Prepared]:
    """Every client's topic written, compacted in one run, then given its tail; a client whose
    setup failed has its error kept for its own test."""
    state = Prepared()
    for client in CLIENTS:
        try:
            create_topic(client, quire, topic_of(client), configs={"cleanup.policy": "compact"})
            produce(client, quire.bootstrap, topic_of(client), history())
        except Exception as exc:
            state.errors[client] = exc
    ready = [c for c in CLIENTS if c not in state.errors]
    quire.compact([topic_of(c) for c in ready])
    for client in ready:
        try:
            produce(client, quire.bootstrap, topic_of(client), TAIL)
        except Exception as exc:
            state.errors[client] = exc
    yield state


@pytest.mark.parametrize("client", CLIENTS)
def test_a_reader_gets_the_latest_value_per_key_at_its_offset_then_the_tail(
    quire: Standalone, prepared: Prepared, client: str
) -> None:
    if client in prepared.errors:
        raise AssertionError(f"{client}: setting up its compacted topic failed") from prepared.errors[client]
    got = read(client, quire.bootstrap, topic_of(client), 0)
    last_round = ROUNDS - 1
    expected = [
        (last_round * len(KEYS) + i, key, b"%s-round-%d" % (key, last_round), {"round": b"%d" % last_round})
        for i, key in enumerate(KEYS)
    ]
    expected += [(11 + i, m.key, m.value, {"tail": b"yes"}) for i, m in enumerate(TAIL)]
    assert [(r.offset, r.key, r.value, dict(r.headers)) for r in got] == expected


def test_the_compacted_view_is_what_rest_reads_compacted(quire: Standalone, prepared: Prepared) -> None:
    """REST's read_compacted view of a Kafka-written topic agrees with what Kafka readers get."""
    client = next(c for c in CLIENTS if c not in prepared.errors)
    rows = quire.rest_read(topic_of(client), read_compacted="true")
    assert [(m["key"], m["properties"]) for m in rows] == [
        *[(key.decode(), {"round": str(ROUNDS - 1)}) for key in KEYS],
        *[(m.key.decode(), {"tail": "yes"}) for m in TAIL if m.key is not None],
    ]
