"""The checker: the history against what the cluster holds once the load stopped and the cluster
is healthy again (every topic read from `earliest`, and each keyed topic's compacted view after a
final compaction).

Violations (each must be 0):

- **acknowledged message missing**: a produce answered with a message id, and the topic has no
  message there from that producer and sequence id;
- **stored twice**: one producer's sequence id stored more than once (dedup is on and producers
  retry with the same ids);
- **duplicate answer not stored**: a message answered `duplicate` whose producer and sequence id
  the topic does not hold;
- **per-producer order**: a producer's sequence ids not increasing in the topic's order;
- **redelivered after a durable ack**: see `durable_ack_times`;
- **compacted view differs**: the compacted view against a reference compaction (per key the
  message with the highest id, a key whose newest value is empty dropped) of the acknowledged
  history; messages whose batch was never answered (the campaign ended while it was retried) but
  that are stored count as acknowledged here, since compaction sees them;
- **read, then gone**: a message a reader or consumer got during the run that the topic no longer
  holds at that id (or holds with other content);
- **never delivered**: a stored message a subscription (created at `earliest` before the first
  produce) never delivered, after the consumers drained it;
- **not readable to its end**: reading a topic (or its compacted view) from `earliest` failed
  with a definite error, or stopped before the last message id; every acknowledged message past
  that point then counts as missing too;
- **key_shared per-key order**: see `check_key_order`;
- the Kafka load's violations: see `kafka_checks.py`.

The checks that are per subscription (never delivered, redelivered after a durable ack) cover
every subscription the load made: shared, exclusive, failover and key_shared alike.
"""

from __future__ import annotations

import bisect
from collections import Counter, defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from bench.chaos.history import Fault, History, Sent
from bench.chaos.kafka_checks import KAFKA_VIOLATIONS, check_kafka
from bench.chaos.kafka_load import KafkaLog

Message = dict[str, Any]
MAX_EXAMPLES = 5
VIOLATIONS = (
    "acknowledged message missing",
    "stored twice (retried produce, dedup on)",
    "answered duplicate, not stored",
    "per-producer order violation",
    "redelivered after a durable ack",
    "compacted view differs from reference",
    "read during the run, then gone",
    "stored, never delivered to a subscription",
    "topic not readable to its end",
    "key_shared per-key order violation",
    *KAFKA_VIOLATIONS,  # the Kafka load's (kafka_checks.py)
)
# check_key_order: a fault or a fenced topic this close to a span counts as in it (log times are
# to the millisecond and the client's times are its own, so a little slack on both sides).
ORDER_MARGIN_S = 1.0


@dataclass
class Verdict:
    """Violations by kind, with examples. A violation on a topic that `known_topics` names (a
    bug the campaign found before, still open: `bench/chaos/known.py`) is counted in `known`
    too, and does not fail the campaign; every other one does."""

    known_topics: dict[str, str] = field(default_factory=dict)  # topic -> the known bug
    counts: dict[str, int] = field(default_factory=lambda: dict.fromkeys(VIOLATIONS, 0))
    known: dict[str, int] = field(default_factory=lambda: dict.fromkeys(VIOLATIONS, 0))
    examples: dict[str, list[str]] = field(default_factory=lambda: defaultdict(list))
    # (entry, subscription) pairs acked, and those whose acks became durable by the rule
    acked_entries: int = 0
    durable_entries: int = 0
    order_compared: int = 0  # key_shared deliveries compared by check_key_order

    def add(self, kind: str, topic: str, example: str, n: int = 1) -> None:
        self.counts[kind] += n
        bug = self.known_topics.get(topic)
        if bug is not None:
            self.known[kind] += n
            example = f"{example} [known bug: {bug}]"
        if len(self.examples[kind]) < MAX_EXAMPLES:
            self.examples[kind].append(example)

    @property
    def failed(self) -> bool:
        return any(self.counts[k] > self.known[k] for k in VIOLATIONS)


def id_key(message_id: str) -> tuple[int, ...]:
    return tuple(int(p) for p in message_id.split(":"))


def entry_of(message_id: str) -> str:
    return message_id.rsplit(":", 1)[0]


def check_stored(history: History, logs: dict[str, list[Message]], verdict: Verdict) -> None:
    """Missing acks, double stores, unstored duplicates and per-producer order, per topic."""
    by_topic: dict[str, list[Sent]] = defaultdict(list)
    for sent in history.sent:
        by_topic[sent.topic].append(sent)
    for topic, log in logs.items():
        stored = Counter((m.get("producer_name"), m.get("sequence_id")) for m in log)
        for (producer, seq), n in stored.items():
            if n > 1 and producer is not None:
                verdict.add(VIOLATIONS[1], topic, f"{topic}: {producer} seq {seq} stored {n} times", n - 1)
        _check_answers(topic, by_topic[topic], log, stored, verdict)
        _check_order(topic, log, verdict)


def _check_answers(
    topic: str, sent: list[Sent], log: list[Message], stored: Counter[tuple[Any, Any]], verdict: Verdict
) -> None:
    by_id = {m["message_id"]: m for m in log}
    for m in sent:
        if m.answered_at is None:
            continue
        what = f"{topic}: {m.producer} seq {m.seq}"
        if m.duplicate:
            if stored[m.producer, m.seq] == 0:
                verdict.add(VIOLATIONS[2], topic, f"{what} answered duplicate at {m.answered_at:.3f}")
            continue
        found = by_id.get(m.message_id or "")
        if found is None or (found.get("producer_name"), found.get("sequence_id")) != (m.producer, m.seq):
            verdict.add(
                VIOLATIONS[0], topic, f"{what} acked as {m.message_id} at {m.answered_at:.3f}, found {found}"
            )


def _check_order(topic: str, log: list[Message], verdict: Verdict) -> None:
    last: dict[str, tuple[int, str]] = {}
    for m in log:
        producer, seq, mid = m.get("producer_name"), m.get("sequence_id"), m["message_id"]
        if producer is None or seq is None:
            continue
        before = last.get(producer)
        if before is not None and seq <= before[0]:
            verdict.add(
                VIOLATIONS[3],
                topic,
                f"{topic}: {producer} seq {seq} at {mid} after seq {before[0]} at {before[1]}",
            )
        last[producer] = (seq, mid)


def reference_compaction(history: History, topic: str, log: list[Message]) -> dict[str, tuple[str, str]]:
    """key -> (message id, value) of the newest message per key, tombstoned keys dropped."""
    by_seq = {(m.get("producer_name"), m.get("sequence_id")): m["message_id"] for m in log}
    newest: dict[str, tuple[tuple[int, ...], str, str]] = {}
    for m in history.sent:
        if m.topic != topic or m.key is None:
            continue
        mid = (
            m.message_id if m.answered_at is not None and not m.duplicate else by_seq.get((m.producer, m.seq))
        )
        if mid is None:
            continue  # never answered and not stored
        k = id_key(mid)
        if m.key not in newest or k > newest[m.key][0]:
            newest[m.key] = (k, mid, m.value)
    return {key: (mid, value) for key, (_k, mid, value) in newest.items() if value != ""}


def check_compacted(
    history: History, logs: dict[str, list[Message]], views: dict[str, list[Message]], verdict: Verdict
) -> None:
    for topic, view in views.items():
        want = reference_compaction(history, topic, logs[topic])
        got: dict[str, tuple[str, str]] = {}
        for m in view:
            if m.get("key") in got:
                verdict.add(VIOLATIONS[5], topic, f"{topic}: key {m.get('key')} twice in the compacted view")
            got[m.get("key") or ""] = (m["message_id"], m.get("value") or "")
        for key in sorted(set(want) | set(got)):
            if want.get(key) != got.get(key):
                verdict.add(
                    VIOLATIONS[5],
                    topic,
                    f"{topic}: key {key}: reference {want.get(key)}, compacted view {got.get(key)}",
                )


def check_sightings(history: History, logs: dict[str, list[Message]], verdict: Verdict) -> None:
    for topic, log in logs.items():
        by_id = {m["message_id"]: (m.get("producer_name"), m.get("sequence_id"), m.get("value")) for m in log}
        for mid, seen in history.sightings.get(topic, {}).items():
            if by_id.get(mid) != (seen.producer, seen.seq, seen.value):
                verdict.add(
                    VIOLATIONS[6], topic, f"{topic}: reader read {mid} = {seen}, now {by_id.get(mid)}"
                )
        delivered = {(d.message_id, d.producer, d.seq) for d in history.deliveries if d.topic == topic}
        for mid, producer, seq in delivered:
            if mid not in by_id or by_id[mid][:2] != (producer, seq):
                verdict.add(
                    VIOLATIONS[6],
                    topic,
                    f"{topic}: consumer got {mid} = {producer}/{seq}, now {by_id.get(mid)}",
                )
    for topic, mid, first, later in history.changed_sightings:
        verdict.add(VIOLATIONS[6], topic, f"{topic}: {mid} read as {first}, later as {later}")


def check_delivered(
    logs: dict[str, list[Message]], delivered: dict[tuple[str, str], set[str]], verdict: Verdict
) -> None:
    for (topic, sub), seen in delivered.items():
        for m in logs.get(topic, []):
            if m["message_id"] not in seen:
                verdict.add(VIOLATIONS[7], topic, f"{topic}/{sub}: {m['message_id']} never delivered")


class FaultWindows:
    """The faults as intervals, for questions about a span of time."""

    def __init__(self, faults: Iterable[Fault], until: float) -> None:
        spans = sorted((f.started, f.ended or until) for f in faults)
        self.starts = [s for s, _e in spans]
        self.spans = spans

    def any_in(self, lo: float, hi: float) -> bool:
        """A fault in progress at some time in [lo, hi]."""
        i = bisect.bisect_right(self.starts, hi)
        return any(end >= lo for _start, end in self.spans[:i])

    def last_end_before(self, t: float) -> float:
        i = bisect.bisect_right(self.starts, t)
        return max((end for _s, end in self.spans[:i]), default=float("-inf"))


def durable_ack_times(
    acks: list[tuple[str, float, float]], entry_ids: list[str], windows: FaultWindows, settle_s: float
) -> float | None:
    """When the acks of one entry on one subscription became durable, or None if they never did.

    `acks` are (message id, sent at, answered at). Candidate moments C are the answers' times in
    order. At C the entry is complete if every message of it has an ack sent after the end of the
    last fault before C and answered by C (acks of a batch are kept per message in the broker's
    memory until the batch is whole, and lost with it). The entry is then durable at
    C + settle_s (a cursor flush interval plus a margin) if no fault is in progress anywhere in
    [C, C + settle_s]; the first C that qualifies gives the answer."""
    wanted = set(entry_ids)
    for c in sorted(answered for _mid, _sent, answered in acks):
        if windows.any_in(c, c + settle_s):
            continue
        lo = windows.last_end_before(c)
        covered = {mid for mid, sent, answered in acks if sent >= lo and answered <= c}
        if wanted <= covered:
            return c + settle_s
    return None


def check_redelivery(
    history: History, logs: dict[str, list[Message]], faults: list[Fault], settle_s: float, verdict: Verdict
) -> None:
    windows = FaultWindows(faults, until=float("inf"))
    entries: dict[str, dict[str, list[str]]] = {}
    for topic, log in logs.items():
        per_entry: dict[str, list[str]] = defaultdict(list)
        for m in log:
            per_entry[entry_of(m["message_id"])].append(m["message_id"])
        entries[topic] = per_entry
    acks: dict[tuple[str, str, str], list[tuple[str, float, float]]] = defaultdict(list)
    for a in history.acks:
        for mid in a.message_ids:
            acks[a.topic, a.subscription, entry_of(mid)].append((mid, a.sent_at, a.answered_at))
    durable: dict[tuple[str, str, str], float | None] = {}
    for (topic, sub, entry), entry_acks in acks.items():
        ids = entries.get(topic, {}).get(entry)
        durable[topic, sub, entry] = (
            None if not ids else durable_ack_times(entry_acks, ids, windows, settle_s)
        )
    verdict.durable_entries = sum(1 for at in durable.values() if at is not None)
    verdict.acked_entries = len(durable)
    for d in history.deliveries:
        at = durable.get((d.topic, d.subscription, entry_of(d.message_id)))
        if at is not None and d.sent_at > at:
            verdict.add(
                VIOLATIONS[4],
                d.topic,
                f"{d.topic}/{d.subscription}: {d.message_id} delivered to {d.consumer} (receive sent at "
                f"{d.sent_at:.3f}, redelivery_count {d.redelivery_count}) after its entry's acks were "
                f"durable at {at:.3f}",
            )


# check_key_order: on key_shared subscriptions, within one consumer's stream, a key's messages must not go
# backwards (in the topic's order, as read back) between two events that may reorder them;
# how many deliveries were checked (pairs with an earlier delivery of the key to the consumer).
#
# Per (topic, subscription, consumer, key), in the order the consumer received them, each
# delivery is compared with the furthest message of the key that consumer got so far:
#
# - **a fault or a move of the topic** anywhere from the moment the previous delivery of the
# key to this consumer was asked for to the moment this one arrived (`faults`: every injected
# fault of any kind and every lease a broker lost on its own; `moves`: a managed ledger of the
# topic fenced, in a broker's log, e.g. by auto-recovery, which makes the broker reopen the
# topic): the subscription may have been built afresh from its durable cursor (consumers
# start afresh, unacked and not-yet-flushed acked messages come again, possibly with a
# lower redelivery count, since the counts are flushed with the cursor, maybe to other
# consumers), so the delivery starts the key's stream anew and is not compared;
# - **a redelivery** (`redelivery_count` > 0: an ack timeout, a consumer that left, or a key
# that moved with its unacked messages): it may go back, and is not compared, but it does
# not lower the furthest message either;
# - **any other delivery** is the first delivery of that message by the subscription as it is
# now built, and those are handed out in the topic's order per key, so one before the
# furthest message of its key is a violation.
#
# What this does not claim, because it would not be sound: order across consumers (a key's
# messages redelivered to the consumer it moved to may be older than what the previous one
# got), order across a fault (a broker restart or failover rebuilds the subscription from
# its cursor), and that a redelivery comes in order. Deliveries the read-back does not hold
# are left to `check_sightings`. A key move itself is not a reset: the messages that move
# with a key are redelivered (count > 0), and new messages after it are still in order.
def check_key_order(
    history: History,
    logs: dict[str, list[Message]],
    faults: list[Fault],
    moves: list[Fault],
    verdict: Verdict,
    margin_s: float = ORDER_MARGIN_S,
) -> int:
    """key_shared per-key order within each consumer's stream (see the comment above); returns
    how many deliveries were compared."""
    windows = FaultWindows(faults, until=float("inf"))
    topic_moves: dict[str, list[Fault]] = defaultdict(list)
    for move in moves:
        topic_moves[move.target].append(move)
    moved = {topic: FaultWindows(ms, until=float("inf")) for topic, ms in topic_moves.items()}
    order = {
        topic: {m["message_id"]: (i, m.get("key") or "") for i, m in enumerate(log)}
        for topic, log in logs.items()
    }
    # (topic, sub, consumer, key) -> (furthest position so far, its message id, when the last
    # delivery of the key to the consumer was asked for)
    furthest: dict[tuple[str, str, str, str], tuple[int, str, float]] = {}
    compared = 0
    for d in history.deliveries:
        if history.subscription_types.get(d.subscription) != "key_shared":
            continue
        found = order.get(d.topic, {}).get(d.message_id)
        if found is None:
            continue
        position, key = found
        k = (d.topic, d.subscription, d.consumer, key)
        before = furthest.get(k)
        lo, hi = (before[2] if before else d.sent_at) - margin_s, d.received_at + margin_s
        topic_windows = moved.get(d.topic)
        if (
            before is None
            or windows.any_in(lo, hi)
            or (topic_windows is not None and topic_windows.any_in(lo, hi))
        ):
            furthest[k] = (position, d.message_id, d.sent_at)
            continue
        if d.redelivery_count == 0:
            compared += 1
            if position < before[0]:
                verdict.add(
                    VIOLATIONS[9],
                    d.topic,
                    f"{d.topic}/{d.subscription}: {d.consumer} got {d.message_id} (key {key!r}, "
                    f"redelivery_count 0, receive sent at {d.sent_at:.3f}) after {before[1]} of the "
                    f"same key, with no fault or move of the topic in between",
                )
        if position > before[0]:
            furthest[k] = (position, d.message_id, d.sent_at)
        else:
            furthest[k] = (before[0], before[1], d.sent_at)
    verdict.order_compared = compared
    return compared


def check(
    history: History,
    logs: dict[str, list[Message]],
    views: dict[str, list[Message]],
    delivered: dict[tuple[str, str], set[str]],
    faults: list[Fault],
    settle_s: float,
    known_topics: dict[str, str] | None = None,
    moves: list[Fault] | None = None,
    kafka: KafkaLog | None = None,
) -> Verdict:
    """`moves`: per topic (a fault whose target is the topic's name), the times it may have been
    reopened without a fault of `faults` (a managed ledger of it fenced, from the brokers' logs).
    `kafka`: what the Kafka topics hold at the end, for the Kafka load's checks."""
    verdict = Verdict(known_topics=known_topics or {})
    check_stored(history, logs, verdict)
    check_redelivery(history, logs, faults, settle_s, verdict)
    check_compacted(history, logs, views, verdict)
    check_sightings(history, logs, verdict)
    check_delivered(logs, delivered, verdict)
    check_key_order(history, logs, faults, moves or [], verdict)
    for topic, failure in history.unreadable:
        verdict.add(VIOLATIONS[8], topic, failure)
    if kafka is not None:
        check_kafka(history, kafka, verdict)
    return verdict
