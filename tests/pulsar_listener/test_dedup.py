"""Deduplication over the Pulsar door: the producer's `last_sequence_id` comes from the dedup
state Quire's produce keeps (the same the REST produce uses), a producer reconnecting under its
name continues its sequence, and a resent message is stored once, answered with the id (-1, -1)
as a Pulsar broker answers a duplicate."""

from __future__ import annotations

import httpx
import pulsar
import pytest

from tests.pulsar_listener.support import Standalone
from tests.pulsar_listener.test_clients import rest_read, topic

pytestmark = pytest.mark.timeout(300)


def dedup_on(standalone: Standalone, quire_name: str) -> None:
    r = httpx.put(f"{standalone.http}/admin/v2/persistent/{quire_name}", timeout=10)
    assert r.status_code in (200, 204), r.text
    r = httpx.post(
        f"{standalone.http}/admin/v2/persistent/{quire_name}/deduplicationEnabled", json=True, timeout=10
    )
    assert r.status_code == 204, r.text


def test_a_producer_reconnecting_under_its_name_continues_its_sequence(
    client: pulsar.Client, standalone: Standalone
) -> None:
    name, quire_name = topic()
    dedup_on(standalone, quire_name)
    first = client.create_producer(name, producer_name="dd")
    assert first.last_sequence_id() == -1
    for i in range(3):
        first.send(f"m{i}".encode())
    first.close()
    again = client.create_producer(name, producer_name="dd")
    assert again.last_sequence_id() == 2  # from the topic's stored dedup state
    again.send(b"m3")
    rest = rest_read(standalone, quire_name)
    assert [(r["value"], r["sequence_id"]) for r in rest] == [(f"m{i}", i) for i in range(4)]


def test_a_resend_is_stored_once_and_answered_as_a_duplicate(
    client: pulsar.Client, standalone: Standalone
) -> None:
    name, quire_name = topic()
    dedup_on(standalone, quire_name)
    producer = client.create_producer(name, producer_name="rs")
    stored = producer.send(b"a", sequence_id=5)
    duplicate = producer.send(b"a", sequence_id=5)
    older = producer.send(b"b", sequence_id=4)
    assert stored.ledger_id() >= 0
    assert (duplicate.ledger_id(), duplicate.entry_id()) == (-1, -1)
    assert (older.ledger_id(), older.entry_id()) == (-1, -1)
    producer.send(b"c", sequence_id=6)
    rest = rest_read(standalone, quire_name)
    assert [(r["value"], r["sequence_id"]) for r in rest] == [("a", 5), ("c", 6)]


def test_without_dedup_nothing_is_remembered(client: pulsar.Client, standalone: Standalone) -> None:
    name, quire_name = topic()
    producer = client.create_producer(name, producer_name="nd")
    producer.send(b"a", sequence_id=5)
    producer.send(b"a", sequence_id=5)
    producer.close()
    assert client.create_producer(name, producer_name="nd").last_sequence_id() == -1
    assert [r["value"] for r in rest_read(standalone, quire_name)] == ["a", "a"]
