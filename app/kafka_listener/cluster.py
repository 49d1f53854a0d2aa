"""Which broker coordinates a Kafka consumer group, and the seam that lists the brokers.

The choice: every broker picks a group's coordinator the same way from the same list of live
brokers, by rendezvous hashing (the node with the highest hash of group id and node id). Each
broker's answer needs no coordination, and when a broker joins or leaves only the groups that
hash to it move. The list comes from the metadata store's broker registrations (the topics
layer's `brokers()`, refreshed at most every `refresh_ms`), so two brokers may disagree for
that long after a change; a group then briefly has two coordinators. What is lost is only
membership: committed offsets live in the shared metadata store, and the members of a group
whose coordinator moved get NOT_COORDINATOR, find the new one and join it anew.

A `ClusterView` lists the live brokers' Kafka listeners and names this one. `SingleNode` is
the standalone broker's (it is the only one); `BrokerListView` reads the registered brokers
(`BrokerRecord.kafka_url`, "host:port" with an optional scheme), and falls back to this
broker alone while nothing is registered (a single broker without ownership). Kafka node ids
are int32s: `node_id_for` derives one from a broker id, and Metadata responses must use the
same function so that FindCoordinator and Metadata name the same node.
"""

from __future__ import annotations

import hashlib
import logging
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Protocol

from managed_ledger.metadata.api import BrokerRecord

log = logging.getLogger("quire.kafka")


@dataclass(frozen=True, slots=True)
class KafkaNode:
    """A broker's Kafka listener as Kafka clients see it."""

    node_id: int
    host: str
    port: int


class ClusterView(Protocol):
    @property
    def me(self) -> KafkaNode:
        """This broker's node."""
        ...

    async def nodes(self) -> Sequence[KafkaNode]:
        """The live brokers' Kafka listeners; empty when none is known now."""
        ...


def node_id_for(broker_id: str) -> int:
    """A broker's Kafka node id: a stable non-negative int32 derived from its broker id."""
    digest = hashlib.blake2b(broker_id.encode(), digest_size=4).digest()
    return int.from_bytes(digest, "big") & 0x7FFFFFFF


def _weight(group_id: str, node: KafkaNode) -> bytes:
    return hashlib.blake2b(f"{group_id}\x00{node.node_id}".encode(), digest_size=8).digest()


def choose_coordinator(group_id: str, nodes: Sequence[KafkaNode]) -> KafkaNode | None:
    """The group's coordinator among `nodes` (rendezvous hashing); None when there is none."""
    if not nodes:
        return None
    return max(nodes, key=lambda n: (_weight(group_id, n), n.node_id))


def parse_kafka_url(url: str) -> tuple[str, int] | None:
    """(host, port) of "host:port", "[v6]:port" or "scheme://host:port"; None when malformed."""
    rest = url.split("://", 1)[-1].rstrip("/")
    host, sep, port = rest.rpartition(":")
    if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
        return None
    return host.strip("[]"), int(port)


class SingleNode:
    """The cluster of one broker: this one coordinates every group."""

    def __init__(self, me: KafkaNode) -> None:
        self._me = me

    @property
    def me(self) -> KafkaNode:
        return self._me

    async def nodes(self) -> Sequence[KafkaNode]:
        return (self._me,)


class BrokerListView:
    """The live brokers registered in the metadata store, read through `brokers` (the topics
    layer's `TopicsApi.brokers`) at most every `refresh_ms`; a failed read keeps the last list."""

    def __init__(
        self, me: KafkaNode, brokers: Callable[[], Awaitable[list[BrokerRecord]]], refresh_ms: int = 1_000
    ) -> None:
        self._me = me
        self._brokers = brokers
        self._refresh_s = refresh_ms / 1000
        self._nodes: tuple[KafkaNode, ...] = ()
        self._read_at: float | None = None

    @property
    def me(self) -> KafkaNode:
        return self._me

    async def nodes(self) -> Sequence[KafkaNode]:
        now = time.monotonic()
        if self._read_at is None or now - self._read_at >= self._refresh_s:
            self._read_at = now  # one reader at a time: the others use the last list meanwhile
            try:
                records = await self._brokers()
            except Exception:  # the store is down: the last list is the best guess
                log.warning("listing brokers failed; the last list stands", exc_info=True)
                return self._nodes or (self._me,)
            self._nodes = tuple(_nodes(records))
        return self._nodes or (self._me,)


def _nodes(records: list[BrokerRecord]) -> list[KafkaNode]:
    out = []
    for r in records:
        address = parse_kafka_url(r.kafka_url) if r.kafka_url else None
        if address is not None:  # a broker without a Kafka listener coordinates nothing
            out.append(KafkaNode(node_id_for(r.broker_id), *address))
    return out
