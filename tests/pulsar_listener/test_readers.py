"""Readers (non-durable subscriptions with a start message id, inclusive or not), SEEK by message
id and by publish time on consumers and readers, and multi-topic and regex consumers
(GET_TOPICS_OF_NAMESPACE), with `pulsar-client` against a real `quire standalone`."""

from __future__ import annotations

import re
import time
import uuid

import httpx
import pulsar
import pytest

from tests.pulsar_listener.support import Standalone
from tests.pulsar_listener.test_clients import topic

pytestmark = pytest.mark.timeout(300)
RECEIVE_MS = 10_000


def produce(client: pulsar.Client, name: str, values: list[str]) -> list[pulsar.MessageId]:
    producer = client.create_producer(name)
    try:
        return [producer.send(v.encode()) for v in values]
    finally:
        producer.close()


def read_all(reader: pulsar.Reader, n: int) -> list[bytes]:
    return [reader.read_next(RECEIVE_MS).data() for _ in range(n)]


def nothing_more(source: pulsar.Reader | pulsar.Consumer) -> bool:
    try:
        if isinstance(source, pulsar.Reader):
            source.read_next(1000)
        else:
            source.receive(1000)
    except pulsar.Timeout:
        return True
    return False


def test_readers_start_where_told(client: pulsar.Client) -> None:
    name, _ = topic()
    ids = produce(client, name, [f"m{i}" for i in range(5)])
    earliest = client.create_reader(name, pulsar.MessageId.earliest)
    assert read_all(earliest, 5) == [f"m{i}".encode() for i in range(5)]
    assert nothing_more(earliest)
    after = client.create_reader(name, ids[2])
    assert read_all(after, 2) == [b"m3", b"m4"]
    inclusive = client.create_reader(name, ids[2], start_message_id_inclusive=True)
    assert read_all(inclusive, 3) == [b"m2", b"m3", b"m4"]
    latest = client.create_reader(name, pulsar.MessageId.latest)
    assert not latest.has_message_available()
    produce(client, name, ["new"])
    assert latest.has_message_available()
    assert read_all(latest, 1) == [b"new"]
    assert nothing_more(latest)


def test_a_reader_at_latest_inclusive_reads_the_last_message(client: pulsar.Client) -> None:
    name, _ = topic()
    produce(client, name, ["a", "b"])
    reader = client.create_reader(name, pulsar.MessageId.latest, start_message_id_inclusive=True)
    assert reader.has_message_available()
    assert read_all(reader, 1) == [b"b"]


def test_a_reader_seeks_by_id_and_by_time(client: pulsar.Client) -> None:
    name, _ = topic()
    ids = produce(client, name, ["a", "b"])
    time.sleep(0.05)
    between = int(time.time() * 1000)
    time.sleep(0.05)
    produce(client, name, ["c", "d"])
    reader = client.create_reader(name, pulsar.MessageId.earliest)
    assert read_all(reader, 4) == [b"a", b"b", b"c", b"d"]
    reader.seek(ids[0])
    assert read_all(reader, 3) == [b"b", b"c", b"d"]  # exclusive of the id, as Pulsar's reader
    reader.seek(between)
    assert read_all(reader, 2) == [b"c", b"d"]
    assert nothing_more(reader)


def test_a_consumer_seeks_by_id_and_by_time(client: pulsar.Client) -> None:
    name, _ = topic()
    consumer = client.subscribe(name, "s", initial_position=pulsar.InitialPosition.Earliest)
    ids = produce(client, name, ["a", "b"])
    time.sleep(0.05)
    between = int(time.time() * 1000)
    time.sleep(0.05)
    produce(client, name, ["c", "d"])
    for _ in range(4):
        consumer.acknowledge(consumer.receive(RECEIVE_MS))
    # The client sends acks in groups every 100 ms and flushes what it holds when it seeks: an
    # ack sent after the seek acks again, as on a Pulsar broker. Let them go first.
    time.sleep(0.5)
    consumer.seek(ids[1])
    got = [consumer.receive(RECEIVE_MS) for _ in range(2)]
    # The broker delivers from the id's entry on; the client drops the id itself (C++ 4.2).
    assert [m.data() for m in got] == [b"c", b"d"]
    for m in got:
        consumer.acknowledge(m)
    assert nothing_more(consumer)
    time.sleep(0.5)
    consumer.seek(between)
    got = [consumer.receive(RECEIVE_MS) for _ in range(2)]
    assert [m.data() for m in got] == [b"c", b"d"]
    consumer.seek(pulsar.MessageId.earliest)
    assert [consumer.receive(RECEIVE_MS).data() for _ in range(4)] == [b"a", b"b", b"c", b"d"]


def test_multi_topic_and_regex_consumers(client: pulsar.Client, standalone: Standalone) -> None:
    stem = f"rx-{uuid.uuid4().hex[:8]}"
    names = [f"persistent://public/default/{stem}-{s}" for s in ("a", "b", "other")]
    for name in names:
        r = httpx.put(f"{standalone.http}/admin/v2/persistent/{name.split('://')[1]}", timeout=10)
        assert r.status_code in (200, 204), r.text
    pattern = re.compile(f"persistent://public/default/{stem}-[ab]")
    regex = client.subscribe(pattern, "rx", initial_position=pulsar.InitialPosition.Earliest)
    listed = client.subscribe(names[:2], "list", initial_position=pulsar.InitialPosition.Earliest)
    for name in names:
        produce(client, name, [name.rsplit("-", 1)[1]])
    for consumer in (regex, listed):
        got = sorted((m.topic_name(), m.data()) for m in (consumer.receive(RECEIVE_MS) for _ in range(2)))
        assert got == [(names[0], b"a"), (names[1], b"b")]
        assert nothing_more(consumer)
