"""A topic this broker has open (Pulsar's PersistentTopic): its managed ledgers, router,
subscriptions and counters, and the one publish path every door calls.

`Topic.publish` is the produce pipeline: the writable check, the backlog quota gate, each
write's producer idempotence (`topics.dedup`), the append and the translation of its errors,
the meters, the wake-up of waiting consumers, and the quota's after-produce step. A door
(the REST produce route, the Kafka produce handler) only turns its wire into `Write`s: what to
store on which partition, in which entry body, under which producer's dedup.

Writes to several partitions (one REST batch over a partitioned topic) are appended at once
and pipeline in their managed ledgers: atomic per partition, not across partitions. Nothing
awaits between a write's dedup check and its append call, so concurrent requests keep their
order in the managed ledger.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Protocol

from managed_ledger.api import ManagedLedger
from managed_ledger.clock import Clock
from managed_ledger.errors import ManagedLedgerTerminatedError, SequenceInFlightError
from managed_ledger.metadata.api import TopicMetadata
from managed_ledger.position import Position
from topics.api import TopicPolicies
from topics.backlog_quota import QuotaState
from topics.dedup import KafkaProducers
from topics.errors import StorageUnavailableError, TopicsError, TopicTerminatedError, WriteInFlightError
from topics.meters import TopicMeters
from topics.partitions import Router
from topics.subscriptions import Subscription


class Notifier:
    """Wakes long polls of a topic: new messages, nacks, seeks. Arm before checking for data,
    then wait on the armed future, so a wake-up between the check and the wait is not lost."""

    __slots__ = ("_future",)

    def __init__(self) -> None:
        self._future: asyncio.Future[None] | None = None

    def arm(self) -> asyncio.Future[None]:
        if self._future is None or self._future.done():
            self._future = asyncio.get_running_loop().create_future()
        return self._future

    def notify(self) -> None:
        future, self._future = self._future, None
        if future is not None and not future.done():
            future.set_result(None)

    @staticmethod
    async def wait(future: asyncio.Future[None], timeout_s: float) -> None:
        if timeout_s <= 0:
            return
        # shield: a timeout must not cancel the future other waiters share.
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(asyncio.shield(future), timeout_s)


@dataclass(frozen=True, slots=True)
class Entry:
    """What a write stores: one entry's payload, and the sequence the managed ledger's dedup
    records for its producer (None: not tracked)."""

    payload: bytes
    highest_sequence: int | None = None


class Write(Protocol):
    """One door's request to store one entry on one partition of a topic."""

    @property
    def partition(self) -> int: ...

    @property
    def producer(self) -> str | None:
        """The producer name the managed ledger's dedup knows the entry by (None: none)."""
        ...

    @property
    def shielded(self) -> bool:
        """The append runs to its end even when the door's caller is cancelled (the write keeps
        producer state that must learn the outcome)."""
        ...

    def prepare(self, ml: ManagedLedger, now_ms: int) -> Entry | None:
        """Producer idempotence, then the entry to append; None: nothing to store (every
        message a duplicate, or the same batch stored before). May raise the door's refusals
        and SequenceInFlightError."""
        ...

    def failed(self) -> None:
        """The append failed or was cancelled."""
        ...

    def stored(self, position: Position, base_offset: int) -> tuple[int, int]:
        """The entry is durable at `position`; the (messages, bytes) it holds, for the meters."""
        ...


class QuotaGate(Protocol):
    """The backlog quota's part in publishing (topics.quota_ops)."""

    async def before_publish(self, t: Topic) -> None:
        """Refuse the produce, hold it until the backlog is under the quota, or let it pass."""
        ...

    async def after_publish(self, t: Topic) -> None: ...


class Topic:
    """A topic this broker has open."""

    def __init__(
        self,
        meta: TopicMetadata,
        mls: list[ManagedLedger],
        effective: TopicPolicies,
        clock: Clock,
        quota_gate: QuotaGate,
    ) -> None:
        self.name = meta.name
        self.partitions = meta.partitions
        self.mls = mls
        self.router = Router(meta.partitions) if meta.partitions > 0 else None
        self.policies = effective
        self.notifier = Notifier()
        # backlog quota: cached figures, counts, held produces; a backlog move marks the topic
        self.quota = QuotaState(Notifier(), self._touched)
        self.subscriptions: dict[str, Subscription] = {}
        self.lock = asyncio.Lock()  # subscription create/delete
        self.ledger_partition: dict[int, int] = {}  # ledger id -> partition, learnt on demand
        self.meters = TopicMeters(meta.partitions)  # counters and rates (topics.meters)
        # partition -> (first entry after the compaction horizon, its publish time): the maxLagMs
        # trigger reads that entry once per horizon (topics.compaction_check)
        self.first_after_horizon: dict[int, tuple[Position, int]] = {}
        # Set when the topic left this broker (unloaded, handed over, its lease lost) rather than
        # being deleted: a long poll that was waiting on it answers empty, and the client's retry
        # finds the new owner.
        self.moved = False
        self.kafka_producers: KafkaProducers = {}  # Kafka idempotent producers (topics.dedup)
        self._clock = clock
        self._quota_gate = quota_gate
        self.last_active_ms = clock.now_ms()  # stamped by every request (topics.idle)
        self.on_activity: Callable[[str], None] = _unwatched  # topics.activity, wired by the registry

    def _touched(self) -> None:
        self.on_activity(self.name)

    @property
    def stale(self) -> bool:
        """A managed ledger of it was fenced: another owner took it, or this broker's lease lapsed."""
        return any(ml.is_fenced for ml in self.mls)

    # --- publish -------------------------------------------------------------------------------
    async def publish(self, writes: Sequence[Write], publisher: str | None = None) -> None:
        """Store the writes (each learns its outcome); `publisher` is the producer the topic's
        publisher meters count them for (None: not metered by producer)."""
        check_writable(self, [w.partition for w in writes])
        quotas = bool(self.policies.backlog_quotas)
        if quotas:
            await self._quota_gate.before_publish(self)
        now = self.last_active_ms = self._clock.now_ms()
        if len(writes) == 1:
            counted = [await self._write(writes[0], now)]
        else:
            counted = await asyncio.gather(*(self._write(w, now) for w in writes))
        count = size = 0
        for w, (messages, nbytes) in zip(writes, counted, strict=True):
            if messages:
                self.meters.appended(w.partition, messages, nbytes)
                count += messages
                size += nbytes
        if publisher is not None:
            self.meters.publishers.heard(publisher, self._clock.now_ms()).meter.add(count, size)
        self.notifier.notify()
        self.on_activity(self.name)
        if quotas:
            await self._quota_gate.after_publish(self)

    async def _write(self, w: Write, now: int) -> tuple[int, int]:
        ml = self.mls[w.partition]
        try:
            entry = w.prepare(ml, now)
        except SequenceInFlightError as exc:
            raise WriteInFlightError(self.name, w.producer or "", exc.sequence_id) from exc
        if entry is None:
            return 0, 0
        append = self._append(ml, w, entry)
        # Shielded: a handler cancelled mid-write (its connection closed) must not cut the
        # write's own bookkeeping short.
        return await (asyncio.shield(append) if w.shielded else append)

    async def _append(self, ml: ManagedLedger, w: Write, entry: Entry) -> tuple[int, int]:
        try:
            position, base = await ml.append_entry(entry.payload, w.producer, entry.highest_sequence)
        except BaseException as exc:
            w.failed()
            if isinstance(exc, TopicsError):
                raise
            if isinstance(exc, ManagedLedgerTerminatedError):  # terminated while on its way
                raise terminated_error(self, exc) from exc
            if isinstance(exc, Exception):
                raise StorageUnavailableError(f"append to {ml.name} failed: {exc}") from exc
            raise
        return w.stored(position, base)


def _unwatched(name: str) -> None:
    pass


def check_writable(t: Topic, partitions: list[int] | None = None) -> None:
    """TopicTerminatedError before anything of a produce is done (no dedup state, no write)."""
    for i in range(len(t.mls)) if partitions is None else partitions:
        if t.mls[i].is_terminated:
            raise TopicTerminatedError(t.name)


def terminated_error(t: Topic, exc: ManagedLedgerTerminatedError) -> TopicTerminatedError:
    err = TopicTerminatedError(t.name)
    err.__cause__ = exc
    return err
