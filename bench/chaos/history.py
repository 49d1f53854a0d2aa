"""What the campaign saw, kept in memory for the checker: every produce attempt and its answer,
every message's final answer, every delivery and ack, what readers read, and every fault.

Times are wall-clock seconds (`time.time()`), the clock the processes' logs use too, so faults
found in a broker's log (a lease it lost on its own) line up with the client's events.
"""

from __future__ import annotations

import json
import time
from collections import Counter
from dataclasses import asdict, dataclass, field
from pathlib import Path


@dataclass(slots=True)
class Sent:
    """One message a producer sent, and the answer it finally got (a 200 for its batch)."""

    topic: str
    producer: str
    seq: int
    key: str | None
    value: str
    message_id: str | None = None
    duplicate: bool = False
    answered_at: float | None = None  # None: never answered (the campaign ended first)
    abandoned: bool = False  # a fickle producer gave up on it (and went on with other messages)


@dataclass(slots=True)
class Attempt:
    """One HTTP attempt of a produce batch: its broker and status, or the error it got."""

    producer: str
    first_seq: int
    count: int
    broker: str
    status: int | None
    error: str
    at: float


@dataclass(slots=True)
class Delivery:
    topic: str
    subscription: str
    consumer: str
    message_id: str
    producer: str | None
    seq: int | None
    redelivery_count: int
    sent_at: float  # when the receive request that returned it was sent
    received_at: float
    key: str | None = None


@dataclass(slots=True)
class Silence:
    """A consumer that asked for nothing from `started` to `ended` (longer than the idle time)."""

    topic: str
    subscription: str
    consumer: str
    started: float
    ended: float


@dataclass(slots=True)
class Ack:
    topic: str
    subscription: str
    message_ids: tuple[str, ...]
    sent_at: float
    answered_at: float  # the 204


@dataclass(slots=True)
class Fault:
    kind: str
    target: str
    started: float
    ended: float = 0.0  # when the target was back (or the fault lifted); 0 while in progress
    detail: str = ""
    injected: bool = True  # False: seen in a log (a broker that lost its lease on its own)
    part_of: str = ""  # the compound fault (its kind) this one is a part of


@dataclass(slots=True)
class Sighting:
    """A message a reader read during the run, by id."""

    producer: str | None
    seq: int | None
    value: str | None


@dataclass(slots=True)
class KafkaEpochBump:
    """A Kafka producer's client bumped its idempotent producer epoch (librdkafka's log line "All
    partitions drained, bumped epoch to PID{Id:..,Epoch:..}", seen when the client is polled):
    its unacknowledged messages are sent again under the new epoch, with sequences from 0."""

    producer: str
    at: float
    producer_id: int
    epoch: int


@dataclass(slots=True)
class KafkaSend:
    """One message a Kafka producer (idempotent, acks=all) handed to its client, and the delivery
    report it got: the partition and offset it was acknowledged at, or the error."""

    topic: str
    producer: str  # one client instance: a producer that hit a fatal error is replaced by a new one
    index: int  # the order the producer sent in
    key: str
    value: str  # unique in the campaign
    sent_at: float
    partition: int | None = None
    offset: int | None = None
    error: str = ""
    reported_at: float | None = None  # None: no delivery report (the campaign ended first)


@dataclass(slots=True)
class KafkaDelivery:
    """One message a member of the Kafka consumer group got."""

    member: str
    topic: str
    partition: int
    offset: int
    value: str
    at: float


@dataclass(slots=True)
class KafkaCommit:
    """A committed offset of the Kafka group: one partition of a commit a member made and got
    answered (`sent_at` to `answered_at`), or one the offset poller read (`member` "poll")."""

    member: str
    topic: str
    partition: int
    offset: int
    sent_at: float
    answered_at: float


@dataclass
class History:
    sent: list[Sent] = field(default_factory=list)
    attempts: list[Attempt] = field(default_factory=list)
    deliveries: list[Delivery] = field(default_factory=list)
    acks: list[Ack] = field(default_factory=list)
    silences: list[Silence] = field(default_factory=list)
    subscription_types: dict[str, str] = field(default_factory=dict)  # subscription -> its type
    faults: list[Fault] = field(default_factory=list)
    # topic -> message id -> what a reader saw there (the first sighting)
    sightings: dict[str, dict[str, Sighting]] = field(default_factory=dict)
    # the same id read later with different content: (topic, id, first, later)
    changed_sightings: list[tuple[str, str, Sighting, Sighting]] = field(default_factory=list)
    # (topic, what happened): read-backs from earliest that failed or stopped short
    unreadable: list[tuple[str, str]] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)  # what the campaign could not do, and why
    notes: list[str] = field(default_factory=list)  # things worth saying that are not violations
    note_times: dict[str, list[float]] = field(default_factory=dict)  # note -> when it was said
    restarts: Counter[str] = field(default_factory=Counter)  # per role kind: bookie, broker, ...
    compactions_requested: int = 0
    kafka_sent: list[KafkaSend] = field(default_factory=list)
    kafka_deliveries: list[KafkaDelivery] = field(default_factory=list)
    kafka_commits: list[KafkaCommit] = field(default_factory=list)  # members' commits, answered
    kafka_polled: list[KafkaCommit] = field(default_factory=list)  # committed offsets as polled
    kafka_commit_failures: Counter[str] = field(default_factory=Counter)  # error name -> count
    kafka_epoch_bumps: list[KafkaEpochBump] = field(default_factory=list)
    load_started: float = 0.0
    load_ended: float = 0.0

    def note(self, text: str) -> None:
        """A note; one said again is kept once, with every time it was said."""
        times = self.note_times.setdefault(text, [])
        if not times:
            self.notes.append(text)
        times.append(time.time())

    def sight(self, topic: str, message_id: str, seen: Sighting) -> None:
        by_id = self.sightings.setdefault(topic, {})
        first = by_id.get(message_id)
        if first is None:
            by_id[message_id] = seen
        elif first != seen:
            self.changed_sightings.append((topic, message_id, first, seen))


def dump(history: History, path: Path) -> None:
    """The history as JSON lines (one record per line, `record` first), for a look afterwards."""
    with open(path, "w") as f:
        for kind, records in (
            ("sent", history.sent),
            ("attempt", history.attempts),
            ("delivery", history.deliveries),
            ("ack", history.acks),
            ("silence", history.silences),
            ("fault", history.faults),
            ("kafka-send", history.kafka_sent),
            ("kafka-delivery", history.kafka_deliveries),
            ("kafka-commit", history.kafka_commits),
            ("kafka-polled", history.kafka_polled),
            ("kafka-epoch-bump", history.kafka_epoch_bumps),
        ):
            for record in records:
                f.write(json.dumps({"record": kind, **asdict(record)}) + "\n")
