"""Consumers in a group, for each of the four clients: a one-shot `group_consume` (subscribe,
read, commit, close) and a long-running `Member` (a thread, or kcat's process) that records what
it is assigned and what it reads, committing after each poll, until it is closed (LeaveGroup).

Group timings are small (heartbeats every 300 ms) so that rebalances finish in a second or two.
Every wait is bounded; a member's thread that fails hands its error to `close`."""

from __future__ import annotations

import asyncio
import contextlib
import re
import signal
import subprocess
import threading
import time
from typing import Any

from tests.kafka_clients.clients import (
    CLIENT_S,
    KCAT_FORMAT,
    Record,
    confluent_record,
    parse_kcat,
    python_record,
)

SESSION_MS = 10_000
HEARTBEAT_MS = 300
POLL_S = 0.2

CONFLUENT_GROUP = {
    "auto.offset.reset": "earliest",
    "enable.auto.commit": False,
    "session.timeout.ms": SESSION_MS,
    "heartbeat.interval.ms": HEARTBEAT_MS,
}
PYTHON_GROUP: dict[str, Any] = {
    "auto_offset_reset": "earliest",
    "enable_auto_commit": False,
    "session_timeout_ms": SESSION_MS,
    "heartbeat_interval_ms": HEARTBEAT_MS,
}
KCAT_GROUP = ["-X", "auto.offset.reset=earliest", "-X", f"heartbeat.interval.ms={HEARTBEAT_MS}"]


def kcat_group_args(bootstrap: str, group: str) -> list[str]:
    return ["kcat", "-b", bootstrap, "-G", group, *KCAT_GROUP, "-f", KCAT_FORMAT]


def group_consume(client: str, bootstrap: str, group: str, topic: str, count: int) -> list[Record]:
    """Join `group`, read `count` records of `topic` (kcat: up to the end of every partition),
    commit what was read, and leave."""
    if client == "kcat":
        cmd = [*kcat_group_args(bootstrap, group), "-e", topic]
        done = subprocess.run(cmd, capture_output=True, timeout=CLIENT_S * 2, check=False)
        assert done.returncode == 0, done.stderr.decode(errors="replace")
        return parse_kcat(done.stdout)
    member = Member(client, bootstrap, group, topic)
    try:
        member.wait(lambda: len(member.records) >= count, f"{count} records")
    finally:
        member.close()
    return member.records


class Member:
    """A consumer in `group` subscribed to `topic`, polling and committing in the background."""

    def __init__(self, client: str, bootstrap: str, group: str, topic: str) -> None:
        self.client = client
        self.records: list[Record] = []
        self.assigned: frozenset[int] | None = None  # None until the first assignment
        self.error: BaseException | None = None
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._process: subprocess.Popen[bytes] | None = None
        if client == "kcat":
            self._process = subprocess.Popen(
                [*kcat_group_args(bootstrap, group), "-u", topic],
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                start_new_session=True,
            )
            self._threads = [
                threading.Thread(target=self._guard, args=(self._kcat_stdout,), daemon=True),
                threading.Thread(target=self._guard, args=(self._kcat_stderr,), daemon=True),
            ]
        else:
            target = {"confluent": self._confluent, "kafka-python": self._kafka_python}.get(
                client, self._aiokafka
            )
            self._threads = [
                threading.Thread(target=self._guard, args=(target, bootstrap, group, topic), daemon=True)
            ]
        for thread in self._threads:
            thread.start()

    def _guard(self, target: Any, *args: Any) -> None:
        try:
            target(*args)
        except BaseException as exc:
            self.error = exc

    def wait(self, predicate: Any, what: str, timeout_s: float = CLIENT_S) -> None:
        deadline = time.monotonic() + timeout_s
        while not predicate():
            if self.error is not None:
                raise AssertionError(f"{self.client} member failed waiting for {what}") from self.error
            assert time.monotonic() < deadline, (
                f"{self.client} member: no {what} in {timeout_s}s (assigned {self.assigned}, "
                f"{len(self.records)} records)"
            )
            time.sleep(0.05)

    def _add(self, records: list[Record]) -> None:
        with self._lock:
            self.records = [*self.records, *records]

    def close(self) -> None:
        """Leave the group (the client's close; kcat on SIGTERM) and wait for the member to end."""
        self._stop.set()
        if self._process is not None and self._process.poll() is None:
            self._process.send_signal(signal.SIGTERM)
            try:
                self._process.wait(CLIENT_S)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    self._process.kill()
                self._process.wait(5)
        for thread in self._threads:
            thread.join(CLIENT_S)
            assert not thread.is_alive(), f"{self.client} member did not stop"
        if self.error is not None:
            raise AssertionError(f"{self.client} member failed") from self.error

    # --- the clients' loops ----------------------------------------------------------------------
    def _confluent(self, bootstrap: str, group: str, topic: str) -> None:
        from confluent_kafka import Consumer

        def on_assign(consumer: Any, partitions: list[Any]) -> None:
            self.assigned = frozenset(p.partition for p in partitions)

        def on_revoke(consumer: Any, partitions: list[Any]) -> None:
            self.assigned = frozenset()

        consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group, **CONFLUENT_GROUP})
        consumer.subscribe([topic], on_assign=on_assign, on_revoke=on_revoke)
        try:
            while not self._stop.is_set():
                batch = consumer.consume(100, POLL_S)
                for m in batch:
                    assert m.error() is None, m.error()
                if batch:
                    self._add([confluent_record(m) for m in batch])
                    consumer.commit(asynchronous=False)
        finally:
            consumer.close()

    def _kafka_python(self, bootstrap: str, group: str, topic: str) -> None:
        from kafka import KafkaConsumer

        consumer = KafkaConsumer(topic, bootstrap_servers=bootstrap, group_id=group, **PYTHON_GROUP)
        try:
            # kafka-python 3.0.12 joins at the first poll without waiting for the topic's
            # metadata. When the metadata comes after the leader's assignment, it rejoins; if
            # that poll's time runs out while the rejoin is in flight, the client leaves the
            # finished rejoin unprocessed (its need_rejoin turns false meanwhile): no
            # assignment, no heartbeats, and the coordinator drops it at its session timeout.
            # Having the topic's partitions before the first poll keeps it off that path.
            assert consumer.partitions_for_topic(topic), f"no metadata for {topic}"
            while not self._stop.is_set():
                polled = consumer.poll(int(POLL_S * 1000))
                got = [python_record(m) for records in polled.values() for m in records]
                if got:
                    self._add(got)
                    consumer.commit()
                if consumer.assignment() or self.assigned is not None:
                    self.assigned = frozenset(tp.partition for tp in consumer.assignment())
        finally:
            consumer.close()

    def _aiokafka(self, bootstrap: str, group: str, topic: str) -> None:
        asyncio.run(self._aiokafka_loop(bootstrap, group, topic))

    async def _aiokafka_loop(self, bootstrap: str, group: str, topic: str) -> None:
        from aiokafka import AIOKafkaConsumer

        consumer = AIOKafkaConsumer(topic, bootstrap_servers=bootstrap, group_id=group, **PYTHON_GROUP)
        await asyncio.wait_for(consumer.start(), CLIENT_S)
        try:
            while not self._stop.is_set():
                polled = await consumer.getmany(timeout_ms=int(POLL_S * 1000))
                got = [python_record(m) for records in polled.values() for m in records]
                if got:
                    self._add(got)
                    await consumer.commit()
                if consumer.assignment() or self.assigned is not None:
                    self.assigned = frozenset(tp.partition for tp in consumer.assignment())
        finally:
            await asyncio.wait_for(consumer.stop(), CLIENT_S)

    def _kcat_stdout(self) -> None:
        assert self._process is not None and self._process.stdout is not None
        pending = b""
        while chunk := self._process.stdout.read1(65536):
            pending += chunk
            complete = _complete_kcat_records(pending)
            if complete:
                self._add(parse_kcat(pending[:complete]))
                pending = pending[complete:]

    def _kcat_stderr(self) -> None:
        """kcat reports each rebalance on stderr: `% Group g rebalanced (memberid ...): assigned:
        t [0], t [1]` or `... revoked: ...`."""
        assert self._process is not None and self._process.stderr is not None
        for raw in self._process.stderr:
            line = raw.decode(errors="replace")
            if "rebalanced" in line and "assigned:" in line:
                self.assigned = frozenset(int(p) for p in re.findall(r"\[(\d+)\]", line))
            elif "rebalanced" in line and "revoked:" in line:
                self.assigned = frozenset()


def _complete_kcat_records(data: bytes) -> int:
    """How many leading bytes of kcat's output are whole records."""
    at = 0
    while True:
        end = data.find(b"\n", at)
        if end < 0:
            return at
        fields = data[at:end].split(b" ", 5)
        size = max(0, int(fields[3])) + max(0, int(fields[4]))
        if len(data) < end + 1 + size + 1:
            return at
        at = end + 1 + size + 1
