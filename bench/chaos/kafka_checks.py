"""The checker's Kafka half: the Kafka load's history (`kafka_load.py`) against what the Kafka
topics hold at the end (read from offset 0 over Kafka) and the group's committed offsets then.

Violations (each must be 0):

- **Kafka: acknowledged message missing**: a delivery report gave a partition and offset, and
  the partition holds another value (or nothing) there; or, acknowledged without an offset (a
  retry answered DUPLICATE_SEQUENCE_NUMBER, which the client takes as success), the partition
  does not hold the value at all;
- **Kafka: stored more than once**: a value (unique per send) at two offsets, unless it is a
  resend under a bumped epoch (`epoch_resends`: Kafka's broker would store it twice as well);
- **Kafka: read a phantom**: a member of the group got a value no producer sent, or a value at
  an offset that does not hold it at the end (read, then gone or changed); or the topic holds a
  value no producer sent;
- **Kafka: per-producer order**: per producer and partition, acknowledged messages not at
  increasing offsets in the order sent (the idempotent producer's promise);
- **Kafka: committed offset moved back**: per partition, a commit sent after another commit was
  answered got a lower offset accepted; or the poller read a committed offset lower than one it
  read before;
- **Kafka: committed past the end**: the group's committed offset at the end beyond the
  partition's high watermark;
- **Kafka: below the committed offset, never delivered**: a stored offset below the group's
  committed offset that no member ever got (at least once);
- **Kafka: not readable to its end**: a partition that could not be read from offset 0 to its high
  watermark.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from typing import Protocol

from bench.chaos.history import History, KafkaCommit
from bench.chaos.kafka_load import KafkaLog, Partition


class Verdict(Protocol):
    """What the checker's `Verdict` offers these checks (it imports this module)."""

    def add(self, kind: str, topic: str, example: str, n: int = 1) -> None: ...


KAFKA_VIOLATIONS = (
    "Kafka: acknowledged message missing",
    "Kafka: stored more than once",
    "Kafka: read a phantom",
    "Kafka: per-producer order violation",
    "Kafka: committed offset moved back",
    "Kafka: committed past the end",
    "Kafka: below the committed offset, never delivered",
    "Kafka: not readable to its end",
)
(MISSING, TWICE, PHANTOM, ORDER, BACK, PAST_END, UNDELIVERED, UNREADABLE) = KAFKA_VIOLATIONS


def no_offset(history: History) -> set[str]:
    """Values acknowledged without a real offset. A batch answered DUPLICATE_SEQUENCE_NUMBER
    (stored before: a retry after an owner change) comes with base offset -1, and librdkafka then
    reports its messages at -1, 0, 1, ...: the first message of such a batch has a negative
    offset, and the batch's others follow it (same producer and partition, consecutive offsets,
    in send order). No time bound is put on the chain: on a loaded machine one batch's reports
    reach Python tens of milliseconds apart. A real batch that happens to follow at the next
    offset (only possible while a partition is nearly empty) is then only held to "stored
    somewhere in its partition": weaker there, never a false alarm."""
    out: set[str] = set()
    last: dict[tuple[str, int], int] = {}  # in a batch reported from -1: the offset reached
    for s in sorted(history.kafka_sent, key=lambda s: (s.producer, s.index)):
        if s.error or s.reported_at is None or s.partition is None:
            continue
        k, before = (s.producer, s.partition), last.get((s.producer, s.partition))
        if s.offset is None or s.offset < 0 or (before is not None and s.offset == before + 1):
            out.add(s.value)
            last[k] = -1 if s.offset is None else s.offset
        else:
            last.pop(k, None)
    return out


BUMP_SEEN_WITHIN_S = 1.0  # a bump's log line reaches Python at the client's next poll


def epoch_resends(history: History, where: dict[str, list[tuple[str, int, int]]]) -> set[str]:
    """Values stored more than once because the client sent them again under a new producer
    epoch, which Kafka's idempotence does not cover (a new epoch starts its sequences at 0, so no
    broker can tell a resend from a new message): n copies in one partition, the producer's client
    bumped its epoch at least n - 1 times after the message was sent and before its delivery
    report (within BUMP_SEEN_WITHIN_S of it: one copy per epoch at most), and, when the report is
    a success, the copies are in the partition it names and the acknowledged one is the last
    (the earlier ones are tries whose answers were lost). A report of failure (a message timed
    out in flight) makes no claim on any copy."""
    sends = {s.value: s for s in history.kafka_sent}
    bumps: dict[str, list[float]] = defaultdict(list)
    for b in history.kafka_epoch_bumps:
        bumps[b.producer].append(b.at)
    out: set[str] = set()
    for value, places in where.items():
        s = sends.get(value)
        if len(places) < 2 or s is None or s.reported_at is None:
            continue
        ordered = sorted(places, key=lambda x: x[2])
        if len({(t, p) for t, p, _ in ordered}) != 1:
            continue
        t, p, last = ordered[-1]
        if not s.error and ((t, p) != (s.topic, s.partition) or s.offset != last):
            continue
        reported = s.reported_at
        in_flight = sum(1 for at in bumps[s.producer] if s.sent_at <= at <= reported + BUMP_SEEN_WITHIN_S)
        if in_flight >= len(places) - 1:
            out.add(value)
    return out


def stored_at(log: KafkaLog) -> dict[str, list[tuple[str, int, int]]]:
    """Each stored value's (topic, partition, offset) places."""
    where: dict[str, list[tuple[str, int, int]]] = defaultdict(list)
    for (topic, partition), messages in log.stored.items():
        for offset, value in messages:
            where[value].append((topic, partition, offset))
    return where


def check_kafka_stored(history: History, log: KafkaLog, verdict: Verdict) -> None:
    """Acknowledged messages stored exactly once where acknowledged; no value stored twice or
    stored without a send."""
    at = {(t, p, off): v for (t, p), msgs in log.stored.items() for off, v in msgs}
    where = stored_at(log)
    resent = epoch_resends(history, where)
    for value, places in where.items():
        if len(places) > 1 and value not in resent:
            verdict.add(TWICE, places[0][0], f"{value} stored at {places}", len(places) - 1)
        elif len(places) > 1:
            history.note(f"Kafka: {value} stored at {places}: sent again under a bumped producer epoch")
    sent = {s.value for s in history.kafka_sent}
    for value, places in where.items():
        if value not in sent:
            verdict.add(PHANTOM, places[0][0], f"{value} stored at {places[0]}, and no producer sent it")
    unknown = no_offset(history)
    for s in history.kafka_sent:
        if s.reported_at is None or s.error:
            continue
        if s.offset is not None and s.offset >= 0 and s.value not in unknown:
            found = at.get((s.topic, s.partition or 0, s.offset))
            if found != s.value:
                verdict.add(
                    MISSING, s.topic,
                    f"{s.value} acknowledged at {s.topic}/{s.partition}@{s.offset}, which holds {found}",
                )  # fmt: skip
        elif not any(
            t == s.topic and (s.partition is None or p == s.partition) for t, p, _o in where[s.value]
        ):
            verdict.add(
                MISSING, s.topic, f"{s.value} acknowledged (no offset) on {s.topic}/{s.partition}, not stored"
            )


def check_kafka_reads(history: History, log: KafkaLog, verdict: Verdict) -> None:
    """Every value the group got was sent, and is where it was read."""
    sent = {s.value for s in history.kafka_sent}
    at = {(t, p, off): v for (t, p), msgs in log.stored.items() for off, v in msgs}
    seen: set[tuple[str, int, int, str]] = set()
    for d in history.kafka_deliveries:
        k = (d.topic, d.partition, d.offset, d.value)
        if k in seen:
            continue
        seen.add(k)
        if d.value not in sent:
            verdict.add(
                PHANTOM,
                d.topic,
                f"{d.member} got {d.value} at {d.topic}/{d.partition}@{d.offset}; never sent",
            )
        elif at.get(k[:3]) != d.value:
            verdict.add(
                PHANTOM, d.topic,
                f"{d.member} got {d.value} at {d.topic}/{d.partition}@{d.offset} at {d.at:.3f}, "
                f"which now holds {at.get(k[:3])}",
            )  # fmt: skip


def check_kafka_order(history: History, verdict: Verdict) -> None:
    """Per producer and partition, acknowledged offsets increase in the order sent."""
    last: dict[tuple[str, int], tuple[int, int]] = {}  # (producer, partition) -> (index, offset)
    unknown = no_offset(history)
    for s in sorted(history.kafka_sent, key=lambda s: (s.producer, s.index)):
        if s.error or s.reported_at is None or s.offset is None or s.offset < 0 or s.partition is None:
            continue
        if s.value in unknown:
            continue
        before = last.get((s.producer, s.partition))
        if before is not None and s.offset <= before[1]:
            verdict.add(
                ORDER, s.topic,
                f"{s.producer} message {s.index} at {s.topic}/{s.partition}@{s.offset}, "
                f"after message {before[0]} at offset {before[1]}",
            )  # fmt: skip
        last[s.producer, s.partition] = (s.index, s.offset)


def check_commits(history: History, verdict: Verdict) -> None:
    """Committed offsets never move back per partition: among the members' commits, one sent
    after another was answered must not be lower (two in flight at once are not compared); among
    the poller's readings, none lower than one read before."""
    by_partition: dict[Partition, list[KafkaCommit]] = defaultdict(list)
    for c in history.kafka_commits:
        by_partition[c.topic, c.partition].append(c)
    for (topic, partition), commits in by_partition.items():
        answered = sorted(commits, key=lambda c: c.answered_at)
        i, best = 0, None
        for c in sorted(commits, key=lambda c: c.sent_at):
            while i < len(answered) and answered[i].answered_at < c.sent_at:
                if best is None or answered[i].offset > best.offset:
                    best = answered[i]
                i += 1
            if best is not None and c.offset < best.offset:
                verdict.add(
                    BACK, topic,
                    f"{topic}/{partition}: {c.member} committed {c.offset} (sent {c.sent_at:.3f}) after "
                    f"{best.member}'s commit of {best.offset} was answered at {best.answered_at:.3f}",
                )  # fmt: skip
    highest: dict[Partition, KafkaCommit] = {}
    for c in history.kafka_polled:
        before = highest.get((c.topic, c.partition))
        if before is not None and c.offset < before.offset:
            verdict.add(
                BACK, c.topic,
                f"{c.topic}/{c.partition}: the committed offset read {c.offset} at {c.answered_at:.3f}, "
                f"after {before.offset} at {before.answered_at:.3f}",
            )  # fmt: skip
        if before is None or c.offset > before.offset:
            highest[c.topic, c.partition] = c


def check_at_least_once(history: History, log: KafkaLog, verdict: Verdict) -> None:
    """The group's final committed offsets: within the partitions' ends, and everything stored
    below them delivered to some member."""
    delivered: dict[Partition, set[int]] = defaultdict(set)
    for d in history.kafka_deliveries:
        delivered[d.topic, d.partition].add(d.offset)
    for (topic, partition), offset in log.committed.items():
        end = log.ends.get((topic, partition), 0)
        if offset > end:
            verdict.add(PAST_END, topic, f"{topic}/{partition}: committed {offset}, the end is {end}")
        gaps = [
            o
            for o, _v in log.stored.get((topic, partition), [])
            if o < offset and o not in delivered[topic, partition]
        ]
        if gaps:
            verdict.add(
                UNDELIVERED, topic,
                f"{topic}/{partition}: committed {offset}, never delivered: offsets {gaps[:10]}"
                f"{' ...' if len(gaps) > 10 else ''}",
                len(gaps),
            )  # fmt: skip


def check_kafka(history: History, log: KafkaLog, verdict: Verdict) -> None:
    check_kafka_stored(history, log, verdict)
    check_kafka_reads(history, log, verdict)
    check_kafka_order(history, verdict)
    check_commits(history, verdict)
    check_at_least_once(history, log, verdict)
    for topic, failure in log.unreadable:
        verdict.add(UNREADABLE, topic, failure)


def kafka_figures(history: History, log: KafkaLog | None) -> dict[str, int]:
    """The report's numbers for the Kafka load."""
    reports = [s for s in history.kafka_sent if s.reported_at is not None]
    acked = [s for s in reports if not s.error]
    errors = Counter(s.error for s in reports if s.error)
    return {
        "sent": len(history.kafka_sent),
        "acked": len(acked),
        "acked without an offset": len(no_offset(history)),
        "delivery errors": sum(errors.values()),
        "never reported": len(history.kafka_sent) - len(reports),
        "stored": sum(len(m) for m in (log.stored.values() if log else [])),
        "stored again after an epoch bump": len(epoch_resends(history, stored_at(log))) if log else 0,
        "epoch bumps": len(history.kafka_epoch_bumps),
        "deliveries": len(history.kafka_deliveries),
        "distinct delivered": len({(d.topic, d.partition, d.offset) for d in history.kafka_deliveries}),
        "commits": len(history.kafka_commits),
        "commit failures": sum(history.kafka_commit_failures.values()),
        "polled changes": len(history.kafka_polled),
    }
