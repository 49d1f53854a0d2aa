"""What the listener adds to a topic's stats (`GET .../stats`): for each Pulsar producer and
consumer, the connection it came on -- its `address` (the client's host:port) and its
`clientVersion` (CONNECT's, e.g. "Pulsar-CPP-v4.2.0") -- as Pulsar's topic stats show them.

The topics service counts producers by name and consumers by their Quire consumer id; the
listener matches its own by those and adds the connection's details. A Pulsar producer that has
not sent yet is listed too (with zero counters), as Pulsar lists a connected producer.
"""

from __future__ import annotations

from typing import Any

from .registry import Registry


def add_connections(registry: Registry, topic: str, stats: dict[str, Any]) -> None:
    producers = dict(registry.producers.get(topic, {}))
    publishers = stats.setdefault("publishers", [])
    for entry in publishers:
        producer = producers.pop(entry.get("producerName"), None)
        if producer is not None:
            _describe(entry, producer.conn, producer.connected_ms)
    for name, producer in sorted(producers.items()):
        entry = {"producerName": name, "msgRateIn": 0.0, "msgThroughputIn": 0.0, **_ZERO}
        publishers.append(_describe(entry, producer.conn, producer.connected_ms))
    for subscription, sub_stats in stats.get("subscriptions", {}).items():
        mine = {c.quire_id: c for c in registry.consumers.get((topic, subscription), [])}
        for entry in sub_stats.get("consumers", []):
            consumer = mine.get(entry.get("consumerName"))
            if consumer is not None:
                _describe(entry, consumer.conn, None)


_ZERO = {"msgCounter": 0, "bytesCounter": 0, "averageMsgSize": 0.0, "lastSeenTimestamp": 0}


def _describe(entry: dict[str, Any], conn: Any, connected_ms: int | None) -> dict[str, Any]:
    entry["address"] = conn.peer
    entry["clientVersion"] = conn.client_version
    if connected_ms is not None and not entry.get("connectedSince"):
        entry["connectedSince"] = connected_ms
    return entry
