"""kill -9 of the broker that owns several topics, under produce and consume load (real
processes, PostgreSQL, deduplication on, short leases).

- Another broker serves the topics within two leases plus some slack (measured per topic, from
  the kill to the first produce another broker accepted; printed).
- Nothing acknowledged is lost: every accepted sequence id is read once from `earliest`, at the
  message id it was acknowledged with.
- Consumers: a message whose ack the dead broker had persisted (its cursor in the metadata store
  at the kill) is not delivered again by the new owner; a message handed out and never acked
  comes back.
"""

from __future__ import annotations

import time

import pytest

from app.settings import Settings
from managed_ledger.metadata.api import CursorMetadata
from managed_ledger.metadata.sql import SqlMetadataStore
from tests.cluster.conftest import StartCluster
from tests.cluster.harness import (
    KEEP_ALL,
    LEASE_MS,
    NS,
    Broker,
    CarefulClient,
    Cluster,
    owner_url,
    subscribe,
    threads_running,
)
from tests.cluster.load import (
    BOUND_S,
    SUB,
    TopicLoad,
    all_retries,
    check_stored,
    total_accepted,
    wait_all_delivered,
)
from tests.support import wait_until

TOPICS = [f"kill-{i}" for i in range(6)]
ACK_TIMEOUT_MS = 5_000
SLACK_S = 6.0  # a loaded two-core machine: the new owner recovers the ledgers, opens the cursors


def leave_unacked(seq: int) -> bool:
    return seq % 10 == 3


def covered(cursor: CursorMetadata, entry: tuple[int, int]) -> bool:
    """True when the persisted cursor has `entry` acked (mark-delete or an acked range)."""
    return entry <= cursor.mark_delete or any(a <= entry <= b for a, b in cursor.individually_deleted)


@pytest.mark.parametrize(
    "short_leases",
    [
        pytest.param(True, id="short-lease"),
        pytest.param(False, id="default-lease", marks=pytest.mark.slow),  # the failover users get
    ],
)
def test_kill9_of_an_owner_under_load(start_cluster: StartCluster, short_leases: bool) -> None:
    default = Settings.model_fields["broker_lease_ms"].default
    lease_ms = LEASE_MS if short_leases else int(default)
    cluster = start_cluster(3, short_leases, QUIRE_DEDUPLICATION_ENABLED="true", **KEEP_ALL)
    store = SqlMetadataStore(cluster.database_url, auto_upgrade=False)
    try:
        _kill_under_load(cluster, store, lease_ms)
    finally:
        store.close()


def _kill_under_load(cluster: Cluster, store: SqlMetadataStore, lease_ms: int) -> None:
    loads = {t: TopicLoad(t, cluster.urls, leave_unacked=leave_unacked) for t in TOPICS}
    with CarefulClient(cluster.urls) as client:
        for topic in TOPICS:
            subscribe(client, topic, SUB, ack_timeout_ms=ACK_TIMEOUT_MS)
        owners = {t: owner_url(client, t) for t in TOPICS}
    victim = max(cluster.brokers, key=lambda b: list(owners.values()).count(b.url))
    moved = [loads[t] for t in TOPICS if owners[t] == victim.url]
    assert len(moved) >= 2, f"no broker owns several topics: {owners}"
    with threads_running([x.consume_loop for x in loads.values()]) as consumers:
        with threads_running([x.produce_loop for x in loads.values()]) as producers:
            wait_until(
                lambda: all(len(x.acked) >= 20 for x in loads.values()) or producers.is_set(),
                BOUND_S,
                "load on every topic",
            )
            wait_until(
                lambda: producers.is_set() or all(acks_persisted(store, x, victim) for x in moved),
                BOUND_S,
                "the owner persisting acks of each of its topics",
            )
            killed_at = time.monotonic()
            cluster.kill9(victim)
            killed_at = (killed_at + time.monotonic()) / 2
            cursors = {x.topic: persisted_cursor(store, x.topic) for x in moved}
            wait_until(
                lambda: (
                    all(x.first_accept_by_other(victim.url, killed_at) for x in moved) or producers.is_set()
                ),
                BOUND_S,
                "another broker accepting the dead broker's topics",
            )
            time.sleep(1.0)  # a little more load on the new owners
        wait_until(
            lambda: consumers.is_set() or not unacked_not_back(moved, victim),
            ACK_TIMEOUT_MS / 1000 + BOUND_S,
            "unacked messages delivered again",
        )
        wait_all_delivered(list(loads.values()), consumers)
    failover = {x.topic: (x.first_accept_by_other(victim.url, killed_at) or 0) - killed_at for x in moved}
    print(
        f"\nkill -9 of {victim.broker_id} (owner of {len(moved)} topics): served again by another "
        f"broker after {', '.join(f'{t} {s:.2f}s' for t, s in sorted(failover.items()))} "
        f"(lease {lease_ms} ms); accepted {total_accepted(list(loads.values()))} messages; "
        f"client retries {all_retries(list(loads.values()))}"
    )
    assert max(failover.values()) < 2 * lease_ms / 1000 + SLACK_S, failover
    with CarefulClient(cluster.urls) as client:
        problems = [p for x in loads.values() for p in check_stored(client, x)]
    problems += check_consumers(moved, victim, cursors)
    assert not problems, "\n".join(problems) + "\n" + cluster.logs()


def unacked_not_back(moved: list[TopicLoad], victim: Broker) -> dict[str, set[int]]:
    """Per topic, the messages the dead broker handed out, never acked, and no other broker has
    handed out again yet."""
    out: dict[str, set[int]] = {}
    for x in moved:
        with x.lock:
            left = {d.seq for d in x.deliveries if d.served_by == victim.url and leave_unacked(d.seq)}
            again = {d.seq for d in x.deliveries if d.served_by != victim.url}
        if left - again:
            out[x.topic] = left - again
    return out


def check_consumers(moved: list[TopicLoad], victim: Broker, cursors: dict[str, CursorMetadata]) -> list[str]:
    problems = [
        f"{t}: unacked, never delivered again: {sorted(s)[:5]}"
        for t, s in unacked_not_back(moved, victim).items()
    ]
    for x in moved:
        cursor = cursors[x.topic]
        before = [d for d in x.deliveries if d.served_by == victim.url]
        after = [d for d in x.deliveries if d.served_by != victim.url]
        again = sorted({d.seq for d in after if covered(cursor, d.entry)})
        if again:
            problems.append(
                f"{x.topic}: {len(again)} messages acked durably before the kill delivered again: {again[:5]}"
            )
        if not any(leave_unacked(d.seq) for d in before):
            problems.append(f"{x.topic}: the dead broker handed out no message that was left unacked")
    return problems


def persisted_cursor(store: SqlMetadataStore, topic: str) -> CursorMetadata:
    """The subscription's cursor of the topic as the metadata store holds it now."""
    return next(c for c in store.list_cursors(f"{NS}/{topic}") if c.name == SUB)


def acks_persisted(store: SqlMetadataStore, load: TopicLoad, owner: Broker) -> bool:
    """The persisted cursor has acked at least one entry the owner handed out (so that the
    check of durable acks after the kill is not empty)."""
    cursor = persisted_cursor(store, load.topic)
    with load.lock:
        return any(covered(cursor, d.entry) for d in load.deliveries if d.served_by == owner.url)
