"""The campaign's Kafka load, over the brokers' Kafka listeners with confluent-kafka
(librdkafka), beside the REST load (`load.py`); everything it sees goes into the `History`.

- Kafka topics (`KafkaLoadConfig.topics`, two partitions each) are made with CreateTopics,
  with the cluster's unlimited retention.
- A producer per Kafka topic, idempotent with acks=all, sends keyed messages whose values are
  unique in the campaign (`<producer>/<index>/<random>`), a few at a time, and records every send
  and its delivery report: the partition and offset it was acknowledged at, or the error. A
  producer that hits a fatal error (librdkafka's idempotence gives up, e.g. on a sequence gap it
  cannot mend) is replaced by a new one under a new name, so "per producer" is per client
  instance.
- A consumer group of two members subscribes to every Kafka topic from the earliest offset,
  records every message it gets (topic, partition, offset, value), and commits its position
  every `commit_every_s` (synchronously, so each commit's answer is known), recording every
  partition of every commit that succeeded, with when it was sent and answered.
- A poller reads the group's committed offsets (OffsetFetch, not a member) every
  `poll_every_s` and records each change.

librdkafka's clients block, so each runs in a thread of its own; the campaign's event loop
only starts them, and runs the blocking end steps (`flush`, `read_back`, `committed`) in
worker threads.
"""

from __future__ import annotations

import logging
import random
import re
import threading
import time
import uuid
from collections import Counter
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

from confluent_kafka import Consumer, KafkaError, KafkaException, Message, Producer, TopicPartition
from confluent_kafka.admin import AdminClient
from confluent_kafka.cimpl import NewTopic

from bench.chaos.history import History, KafkaCommit, KafkaDelivery, KafkaEpochBump, KafkaSend

GROUP = "chaos-group"
CLIENT_TIMEOUT_S = 15.0
Partition = tuple[str, int]


@dataclass(frozen=True)
class KafkaLoadConfig:
    topics: int = 2
    partitions: int = 2
    members: int = 2
    keys: int = 40
    max_batch: int = 8
    pause_s: float = 0.05
    max_in_flight: int = 500  # messages a producer has sent and not had reported
    message_timeout_ms: int = 60_000  # librdkafka's message.timeout.ms: retried this long
    commit_every_s: float = 1.0
    poll_every_s: float = 0.5


@dataclass
class KafkaLog:
    """What the Kafka topics hold once the load stopped, read from offset 0 over Kafka."""

    stored: dict[Partition, list[tuple[int, str]]] = field(default_factory=dict)  # (offset, value)
    ends: dict[Partition, int] = field(default_factory=dict)  # the high watermark
    committed: dict[Partition, int] = field(default_factory=dict)  # the group's, at the end
    unreadable: list[tuple[str, str]] = field(default_factory=list)  # (topic, what happened)


class KafkaLoad:
    def __init__(
        self, bootstrap: str, history: History, seed: int, config: KafkaLoadConfig, log: Path | None = None
    ) -> None:
        """`log`: where the clients' own logs go (the producers' with librdkafka's `eos` debug
        context: producer ids and epochs acquired, resets, retries), kept with the processes'."""
        self.bootstrap = bootstrap
        self.logger = logging.getLogger(f"chaos.kafka.{id(self)}")
        self.logger.propagate = False
        self.logger.setLevel(logging.DEBUG)
        if log is not None:
            handler = logging.FileHandler(log)
            handler.setFormatter(logging.Formatter("%(asctime)s %(message)s"))
            self.logger.addHandler(handler)
        else:
            self.logger.addHandler(logging.NullHandler())
        self.logger.addHandler(_EpochBumps(history))
        self.history = history
        self.seed = seed
        self.config = config
        self.topics = [f"kafka-{i}" for i in range(config.topics)]
        self.stop_producing = threading.Event()
        self.stop_consuming = threading.Event()
        self.errors: Counter[str] = Counter()  # client errors (not fatal), by name
        self._lock = threading.Lock()
        self._producers: list[threading.Thread] = []
        self._others: list[threading.Thread] = []

    def _base(self, name: str) -> dict[str, Any]:
        return {
            "bootstrap.servers": self.bootstrap,
            "client.id": name,
            "logger": self.logger,  # not the campaign's output
            "error_cb": self._error,
            "topic.metadata.refresh.interval.ms": 5000,
        }

    def _error(self, err: KafkaError) -> None:
        with self._lock:
            self.errors[err.name()] += 1

    def note(self, text: str) -> None:
        with self._lock:
            self.history.note(text)

    def partitions(self) -> list[Partition]:
        return [(t, p) for t in self.topics for p in range(self.config.partitions)]

    def setup(self) -> None:
        """The Kafka topics (blocking)."""
        admin = AdminClient(self._base("chaos-admin"))
        # No configs: the cluster's retention (unlimited) applies. (A config makes the broker set
        # a policy on the new topic, which fails with NOT_LEADER_OR_FOLLOWER on a broker that
        # does not own it.)
        new = [NewTopic(t, num_partitions=self.config.partitions, replication_factor=1) for t in self.topics]
        for topic, future in admin.create_topics(new, request_timeout=CLIENT_TIMEOUT_S).items():
            try:
                future.result(timeout=120)
            except KafkaException as exc:
                if exc.args[0].code() != KafkaError.TOPIC_ALREADY_EXISTS:
                    raise RuntimeError(f"creating Kafka topic {topic}: {exc}") from exc

    def start(self) -> None:
        for topic in self.topics:
            self._producers.append(self._thread(self._producer, topic))
        for i in range(self.config.members):
            self._others.append(self._thread(self._member, f"m{i}"))
        self._others.append(self._thread(self._poller))

    def _thread(self, target: Any, *args: Any) -> threading.Thread:
        thread = threading.Thread(target=target, args=args, daemon=True, name=f"kafka-{target.__name__}")
        thread.start()
        return thread

    # --- producers ------------------------------------------------------------------------------

    def _producer(self, topic: str) -> None:
        rng = random.Random(f"{self.seed}:kafka-producer:{topic}")
        generation = 0
        while not self.stop_producing.is_set():
            name = f"{topic}-kp{generation}"
            fatal = threading.Event()

            def on_error(err: KafkaError, fatal: threading.Event = fatal) -> None:
                self._error(err)
                if err.fatal():
                    fatal.set()

            producer = Producer({
                **self._base(name),
                "error_cb": on_error,
                "enable.idempotence": True,
                "acks": "all",
                "linger.ms": 5,
                "message.timeout.ms": self.config.message_timeout_ms,
                # eos: producer ids and epochs (epoch bumps go into the history); msg and protocol:
                # every batch sent and its outcome, to follow a message in kafka-clients.log
                "debug": "msg,eos,protocol",
            })  # fmt: skip
            self._send(producer, topic, name, rng, fatal)
            left = producer.flush(self.config.message_timeout_ms / 1000 + 30)
            if fatal.is_set():
                self.note(f"Kafka producer {name} hit a fatal error; a new one goes on")
            if left:
                self.note(f"Kafka producer {name}: {left} messages never reported")
            generation += 1

    def _send(
        self, producer: Producer, topic: str, name: str, rng: random.Random, fatal: threading.Event
    ) -> None:
        index = 0
        while not self.stop_producing.is_set() and not fatal.is_set():
            for _ in range(rng.randint(1, self.config.max_batch)):
                key = f"k{rng.randrange(self.config.keys)}"
                value = f"{name}/{index}/{rng.getrandbits(32):08x}"
                send = KafkaSend(topic, name, index, key, value, time.time())
                self.history.kafka_sent.append(send)
                while True:
                    try:
                        producer.produce(
                            topic, value=value.encode(), key=key.encode(), on_delivery=partial(_report, send)
                        )
                        break
                    except BufferError:
                        producer.poll(0.1)
                    except KafkaException as exc:  # fatal: this producer is done
                        send.error, send.reported_at = f"not sent: {exc.args[0].name()}", time.time()
                        fatal.set()
                        return
                index += 1
            producer.poll(0)
            while len(producer) > self.config.max_in_flight and not fatal.is_set():
                producer.poll(0.1)
            time.sleep(rng.uniform(0, self.config.pause_s))

    def producers_done(self, timeout_s: float) -> int:
        """Stop producing and wait for every delivery report (blocking); how many producers are
        still flushing."""
        self.stop_producing.set()
        deadline = time.monotonic() + timeout_s
        for thread in self._producers:
            thread.join(max(0.0, deadline - time.monotonic()))
        return sum(1 for t in self._producers if t.is_alive())

    # --- the group ------------------------------------------------------------------------------

    def _member(self, member: str) -> None:
        consumer = Consumer({
            **self._base(f"chaos-{member}"),
            "group.id": GROUP,
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
            "session.timeout.ms": 6000,
            "heartbeat.interval.ms": 1000,
            # also the rebalance timeout: a member lost in a fault holds a rebalance this long at most
            "max.poll.interval.ms": 15000,
        })  # fmt: skip
        consumer.subscribe(self.topics)
        last_commit, dirty = time.monotonic(), False
        try:
            while not self.stop_consuming.is_set():
                for m in consumer.consume(num_messages=200, timeout=0.5):
                    err = m.error()
                    if err is not None:
                        self._error(err)
                        continue
                    value = (m.value() or b"").decode(errors="replace")
                    self.history.kafka_deliveries.append(
                        KafkaDelivery(
                            member, m.topic() or "", m.partition() or 0, m.offset() or 0, value, time.time()
                        )
                    )
                    dirty = True
                if dirty and time.monotonic() - last_commit >= self.config.commit_every_s:
                    dirty = not self._commit(consumer, member)
                    last_commit = time.monotonic()
            if dirty:
                self._commit(consumer, member)
        finally:
            consumer.close()

    def _commit(self, consumer: Consumer, member: str) -> bool:
        """Commit the member's position (synchronously) and record what was committed."""
        sent = time.time()
        try:
            parts = consumer.commit(asynchronous=False)
        except KafkaException as exc:
            with self._lock:
                self.history.kafka_commit_failures[exc.args[0].name()] += 1
            return False
        answered = time.time()
        for tp in parts or []:
            if tp.error is not None:
                with self._lock:
                    self.history.kafka_commit_failures[tp.error.name()] += 1
            elif tp.offset >= 0:
                commit = KafkaCommit(member, tp.topic, tp.partition, tp.offset, sent, answered)
                self.history.kafka_commits.append(commit)
        return True

    def _poller(self) -> None:
        """The group's committed offsets every so often, as a client that is not a member reads
        them; each change is recorded."""
        consumer = Consumer({**self._base("chaos-poller"), "group.id": GROUP, "enable.auto.commit": False})
        last: dict[Partition, int] = {}
        try:
            while not self.stop_consuming.is_set():
                sent = time.time()
                try:
                    got = consumer.committed(
                        [TopicPartition(t, p) for t, p in self.partitions()], timeout=CLIENT_TIMEOUT_S
                    )
                except KafkaException:
                    got = []
                answered = time.time()
                for tp in got:
                    if (
                        tp.error is None
                        and tp.offset >= 0
                        and last.get((tp.topic, tp.partition)) != tp.offset
                    ):
                        last[tp.topic, tp.partition] = tp.offset
                        self.history.kafka_polled.append(
                            KafkaCommit("poll", tp.topic, tp.partition, tp.offset, sent, answered)
                        )
                self.stop_consuming.wait(self.config.poll_every_s)
        finally:
            consumer.close()

    def delivered(self) -> dict[Partition, set[int]]:
        out: dict[Partition, set[int]] = {p: set() for p in self.partitions()}
        for d in list(self.history.kafka_deliveries):
            out.setdefault((d.topic, d.partition), set()).add(d.offset)
        return out

    def drain(self, log: KafkaLog, timeout_s: float) -> int:
        """Until the group got every stored message (bounded), then its last commits, and the
        members leave (blocking); how many stored messages it never got."""
        deadline = time.monotonic() + timeout_s
        while True:
            got = self.delivered()
            missing = sum(
                1 for tp, msgs in log.stored.items() for off, _v in msgs if off not in got.get(tp, ())
            )
            if missing == 0 or time.monotonic() > deadline:
                break
            time.sleep(0.5)
        time.sleep(self.config.commit_every_s + 1)  # a commit round after the last delivery
        self.stop()
        return missing

    def stop(self) -> None:
        self.stop_producing.set()
        self.stop_consuming.set()
        for thread in [*self._producers, *self._others]:
            thread.join(CLIENT_TIMEOUT_S)

    # --- the end --------------------------------------------------------------------------------

    def committed(self) -> dict[Partition, int]:
        """The group's committed offsets now (blocking); partitions without one are left out."""
        consumer = Consumer({**self._base("chaos-final"), "group.id": GROUP, "enable.auto.commit": False})
        try:
            got = consumer.committed([TopicPartition(t, p) for t, p in self.partitions()], timeout=60)
        finally:
            consumer.close()
        return {(tp.topic, tp.partition): tp.offset for tp in got if tp.error is None and tp.offset >= 0}

    def read_back(self, timeout_s: float) -> KafkaLog:
        """Every partition from offset 0 to its high watermark, over Kafka (blocking)."""
        log = KafkaLog()
        consumer = Consumer({
            **self._base("chaos-readback"),
            "group.id": f"chaos-readback-{uuid.uuid4().hex}",
            "enable.auto.commit": False,
            "enable.partition.eof": True,
        })  # fmt: skip
        try:
            for tp in self.partitions():
                low, high = _watermarks(consumer, tp, time.monotonic() + 60)
                log.ends[tp], log.stored[tp] = high, []
                if low != 0:
                    log.unreadable.append((tp[0], f"{tp[0]}/{tp[1]} starts at offset {low}, not 0"))
            consumer.assign([TopicPartition(t, p, 0) for t, p in self.partitions()])
            self._read_to_ends(consumer, log, time.monotonic() + timeout_s)
        finally:
            consumer.close()
        return log

    def _read_to_ends(self, consumer: Consumer, log: KafkaLog, deadline: float) -> None:
        position = dict.fromkeys(self.partitions(), 0)
        while any(position[tp] < log.ends[tp] for tp in position) and time.monotonic() < deadline:
            for m in consumer.consume(num_messages=500, timeout=1.0):
                if m.error() is not None:
                    continue  # end of a partition, or a transient error (retried by the client)
                tp = (m.topic() or "", m.partition() or 0)
                offset = m.offset() or 0
                log.stored[tp].append((offset, (m.value() or b"").decode(errors="replace")))
                position[tp] = offset + 1
        for tp, at in position.items():
            if at < log.ends[tp]:
                log.unreadable.append(
                    (tp[0], f"{tp[0]}/{tp[1]} read to offset {at} of {log.ends[tp]} from 0 over Kafka")
                )


def _watermarks(consumer: Consumer, tp: Partition, deadline: float) -> tuple[int, int]:
    """A partition's low and high watermarks, asked again while the partition moves (an owner
    that just lost its lease answers NOT_LEADER_FOR_PARTITION until the metadata catches up)."""
    while True:
        try:
            low, high = consumer.get_watermark_offsets(TopicPartition(*tp), timeout=10)
            return int(low), int(high)
        except KafkaException:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.5)


_BUMPED = re.compile(
    r"\[(?P<client>[^\]#]+)#producer-\d+\].*bumped epoch to PID\{Id:(?P<pid>\d+),Epoch:(?P<epoch>\d+)\}"
)


class _EpochBumps(logging.Handler):
    """Records every epoch bump a producer's client logs (librdkafka's `eos` debug context)."""

    def __init__(self, history: History) -> None:
        super().__init__(logging.DEBUG)
        self.history = history

    def emit(self, record: logging.LogRecord) -> None:
        found = _BUMPED.search(record.getMessage())
        if found is not None:
            bump = KafkaEpochBump(found["client"], time.time(), int(found["pid"]), int(found["epoch"]))
            self.history.kafka_epoch_bumps.append(bump)


def _report(send: KafkaSend, err: KafkaError | None, msg: Message) -> None:
    """A delivery report: where the message was acknowledged, or the error."""
    send.reported_at = time.time()
    if err is not None:
        send.error = err.name()
        return
    send.partition, send.offset = msg.partition(), msg.offset()
