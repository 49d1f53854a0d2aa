"""Produce and consume load for the failover tests, and the checks of what it was told.

A producer per topic sends batches with a fixed producer name and consecutive sequence ids,
each batch retried by the careful client until the cluster accepts it (deduplication is on, so
a retry is never stored twice). A consumer per topic receives from one durable subscription and
acks what it is handed, except the messages `leave_unacked` picks, which it never acks. Each
keeps what the cluster told it (which broker answered, when), for the checks.
"""

from __future__ import annotations

import threading
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import httpx

from tests.cluster.harness import Accepted, CarefulClient, ack, data, id_key, produce, read_all
from tests.support import wait_until

BATCH = 5
SUB = "s"
BOUND_S = 60.0  # any one wait of the load tests


def never(seq: int) -> bool:
    return False


@dataclass(frozen=True)
class Delivery:
    message: dict[str, Any]
    served_by: str
    at: float

    @property
    def seq(self) -> int:
        return int(self.message["sequence_id"])

    @property
    def entry(self) -> tuple[int, int]:
        ledger, entry, _ = id_key(self.message["message_id"])
        return ledger, entry


@dataclass
class TopicLoad:
    topic: str
    urls: list[str]
    producer: str = ""
    leave_unacked: Callable[[int], bool] = never
    pause_s: float = 0.02  # between two batches of a producer
    timeout: httpx.Timeout | None = None  # of one attempt of the careful client
    accepted: list[Accepted] = field(default_factory=list)
    deliveries: list[Delivery] = field(default_factory=list)
    acked: set[str] = field(default_factory=set)
    retries: Counter[str] = field(default_factory=Counter)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def __post_init__(self) -> None:
        self.producer = self.producer or f"p-{self.topic}"

    def produce_loop(self, stop: threading.Event) -> None:
        """Batches until `stop`; a batch once started is finished (retried until accepted)."""
        with CarefulClient(self.urls, total_s=60, timeout=self.timeout) as client:
            seq = 0
            try:
                while not stop.is_set():
                    got = produce(client, self.topic, self.producer, list(range(seq, seq + BATCH)))
                    with self.lock:
                        self.accepted.extend(got)
                    seq += BATCH
                    time.sleep(self.pause_s)
            finally:
                self.retries.update(client.retries)

    def consume_loop(self, stop: threading.Event) -> None:
        with CarefulClient(self.urls, start=1, total_s=60, timeout=self.timeout) as client:
            try:
                while not stop.is_set():
                    self.consume_once(client)
            finally:
                self.retries.update({f"consumer {k}": n for k, n in client.retries.items()})

    def consume_once(self, client: CarefulClient) -> None:
        r = client.get(
            data(self.topic) + f"/subscriptions/{SUB}/messages",
            params={"max_messages": 50, "wait_ms": 200, "consumer_id": "c"},
        )
        assert r.status_code == 200, f"{r.status_code} {r.text}"
        served = f"{r.url.scheme}://{r.url.host}:{r.url.port}"
        now = time.monotonic()
        got = [Delivery(m, served, now) for m in r.json()["messages"]]
        with self.lock:
            self.deliveries.extend(got)
        ids = [d.message["message_id"] for d in got if not self.leave_unacked(d.seq)]
        ack(client, self.topic, SUB, ids)
        with self.lock:
            self.acked.update(ids)

    # --- what it was told --------------------------------------------------------------------
    def accepted_seqs(self) -> list[int]:
        with self.lock:
            return sorted(a.seq for a in self.accepted)

    def delivered_seqs(self) -> set[int]:
        with self.lock:
            return {d.seq for d in self.deliveries}

    def first_accept_by_other(self, victim: str, after: float) -> float | None:
        with self.lock:
            times = [a.at for a in self.accepted if a.served_by != victim and a.at > after]
        return min(times) if times else None


def check_stored(client: CarefulClient, load: TopicLoad) -> list[str]:
    """Read the topic from `earliest`: every accepted sequence id exactly once, in order, at the
    message id it was acknowledged with, and nothing else; the broken rules, if any."""
    messages = read_all(client, load.topic)
    problems: list[str] = []
    stored = [m["sequence_id"] for m in messages if m["producer_name"] == load.producer]
    accepted = load.accepted_seqs()
    counts = Counter(stored)
    twice = sorted(s for s, n in counts.items() if n > 1)
    if twice:
        problems.append(f"{load.topic}: {len(twice)} sequence ids stored twice, e.g. {twice[:5]}")
    lost = sorted(set(accepted) - set(stored))
    if lost:
        problems.append(
            f"{load.topic}: {len(lost)} of {len(accepted)} accepted messages lost, e.g. {lost[:5]}"
        )
    extra = sorted(set(stored) - set(accepted))
    if extra:
        problems.append(f"{load.topic}: {len(extra)} stored messages never accepted, e.g. {extra[:5]}")
    if stored != sorted(stored):
        problems.append(f"{load.topic}: sequence ids stored out of order")
    ids = [id_key(m["message_id"]) for m in messages]
    if ids != sorted(ids) or len(set(ids)) != len(ids):
        problems.append(f"{load.topic}: message ids not strictly increasing from earliest")
    at = {m["sequence_id"]: m["message_id"] for m in messages if m["producer_name"] == load.producer}
    moved = [
        (a.seq, a.message_id, at.get(a.seq))
        for a in load.accepted
        if a.message_id and at.get(a.seq) != a.message_id
    ]
    if moved:
        problems.append(
            f"{load.topic}: {len(moved)} messages not at the id they were acknowledged with, e.g. {moved[:3]}"
        )
    return problems


def served_after_moving(load: TopicLoad, old: str, start: float, end: float) -> list[str]:
    """Answers the broker at `old` gave for the topic between `start` and `end` (while it stopped)
    after another broker had already answered for it in that time: two brokers serving one
    topic at once. The margin covers answers crossing on the wire and load threads that note the
    time of an answer late on a busy machine."""
    margin = 1.0
    with load.lock:
        answers = [(a.at, a.served_by, f"produce seq {a.seq}") for a in load.accepted]
        answers += [(d.at, d.served_by, f"delivery seq {d.seq}") for d in load.deliveries]
    window = sorted(x for x in answers if start < x[0] < end)
    others = [at for at, url, _ in window if url != old]
    if not others:
        return []
    first_other = min(others)
    return [
        f"{load.topic}: {what} answered by {old} {at - first_other:.2f}s after another broker "
        "served the topic"
        for at, url, what in window
        if url == old and at > first_other + margin
    ]


def total_accepted(loads: list[TopicLoad]) -> int:
    return sum(len(x.accepted) for x in loads)


def wait_for_more(loads: list[TopicLoad], more: int, stop: threading.Event, what: str) -> None:
    """Until the producers had `more` messages accepted (or a load thread failed: `stop`)."""
    target = total_accepted(loads) + more
    wait_until(lambda: total_accepted(loads) >= target or stop.is_set(), BOUND_S, what)


def wait_all_delivered(loads: list[TopicLoad], stop: threading.Event) -> None:
    """Until every accepted message was handed to the subscription at least once."""
    wait_until(
        lambda: stop.is_set() or all(set(x.accepted_seqs()) <= x.delivered_seqs() for x in loads),
        BOUND_S,
        "every accepted message delivered",
    )


def all_retries(loads: list[TopicLoad]) -> dict[str, int]:
    return dict(sum((x.retries for x in loads), Counter[str]()))
