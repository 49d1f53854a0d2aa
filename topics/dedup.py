"""Producer idempotence, for every door: what makes a retried produce store nothing twice.

Both doors lean on the managed ledger's dedup, which keeps each producer's highest sequence id
stored (and snapshots it, so a new owner knows it too); this module holds the rules each door
adds on top of it, and `Topic.publish` calls them between its quota gate and its append.

- REST producers name themselves and number their messages: `duplicates` says which messages of
  a batch are stored already, so that the entry holds the others only. A sequence id whose
  earlier write is unresolved makes the managed ledger raise SequenceInFlightError, which the
  publish path turns into WriteInFlightError (retriable), never "duplicate": that write may fail.

- Kafka's idempotent producers (producer id >= 0) are checked per (partition, producer id) as
  Kafka's broker does: an older epoch is refused (INVALID_PRODUCER_EPOCH), a batch equal to one
  of the last five answers that batch's offset and writes nothing, an earlier sequence known
  stored is a duplicate (DUPLICATE_SEQUENCE_NUMBER, which clients take as success), a gap is
  OUT_OF_ORDER_SEQUENCE. The managed ledger's dedup also sees every batch (producer
  `kafka-<id>-<epoch>`, the batch's last sequence), so with the deduplication policy on, a new
  owner's producer state starts after the highest sequence stored (at 0 for an epoch with
  nothing stored): a retry is still a duplicate and a batch past it a gap. Without it, the
  first batch to arrive starts the state and what precedes it is not known stored
  (OUT_OF_ORDER, never "duplicate"); docs/kafka.md says what that means for idempotence.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass, field

from managed_ledger.api import ManagedLedger
from topics.errors import KafkaSequenceError, WriteInFlightError

RECENT_BATCHES = 5  # Kafka's ProducerStateEntry.NUM_BATCHES_TO_RETAIN; clients cap in-flight at 5
SEQUENCES = 1 << 31  # a producer's sequence numbers wrap to 0 after 2**31 - 1 (Kafka's rule)


def duplicates(
    ml: ManagedLedger, producer: str | None, enabled: bool, sequence_ids: Sequence[int | None]
) -> list[bool] | None:
    """Which of a REST batch's messages the managed ledger holds already (None: dedup does not
    apply, no producer name or the topic's deduplication policy off); SequenceInFlightError
    while a write of one of them is unresolved."""
    if producer is None or not enabled:
        return None
    return ml.dedup_check(producer, sequence_ids)


def kafka_producer_name(producer_id: int, producer_epoch: int) -> str:
    """The producer name a Kafka producer's batches carry in the managed ledger's dedup."""
    return f"kafka-{producer_id}-{producer_epoch}"


def unwrap(sequence: int, near: int) -> int:
    """The unwrapped sequence number (counting every wrap) whose wrapped value is `sequence`,
    nearest to the unwrapped `near`."""
    value = near - (near - sequence) % SEQUENCES
    return value + SEQUENCES if near - value > SEQUENCES // 2 else value


@dataclass(slots=True)
class KafkaProducerState:
    """An idempotent producer on one partition. `next_sequence` moves when a batch's write
    starts and moves back when it fails, so that the failed batch's retry is taken and the
    batches after it are refused as a gap until then (Kafka's broker only advances past a batch
    it appended; clients retry the failed batch first, then the ones after it)."""

    epoch: int
    # The first sequence of the next new batch (pushed, maybe in flight). Sequences here are
    # unwrapped: they keep counting past 2**31 where the wire's wrap to 0, so that order and the
    # managed ledger's dedup (which only goes up) hold across a wrap.
    next_sequence: int
    # The first sequence known stored (or being written): this state's start, or 0 when the
    # managed ledger's dedup vouched for everything before its start. Below it, a batch cannot be
    # called a duplicate -- it may be one lost in an owner change, never stored.
    floor: int
    recent: deque[tuple[int, int, int]] = field(default_factory=lambda: deque(maxlen=RECENT_BATCHES))
    in_flight: set[tuple[int, int]] = field(default_factory=set)  # (first sequence, count)

    def pushed(self, first: int, count: int) -> None:
        """A batch's write starts: the next batch follows it."""
        self.next_sequence = first + count
        self.in_flight.add((first, count))

    def failed(self, first: int, count: int) -> None:
        """The batch's write failed: its retry comes next."""
        self.in_flight.discard((first, count))
        self.next_sequence = min(self.next_sequence, first)

    def stored(self, first: int, count: int, base_offset: int) -> None:
        self.in_flight.discard((first, count))
        self.recent.append((first, count, base_offset))


# (partition, producer id) -> state; one per open topic, forgotten with it (a new owner starts
# from the managed ledger's dedup).
KafkaProducers = dict[tuple[int, int], KafkaProducerState]


@dataclass(frozen=True, slots=True)
class KafkaSequence:
    """A Kafka batch's producer fields as produced."""

    producer_id: int
    producer_epoch: int
    base_sequence: int
    count: int


def check_kafka_sequence(
    producers: KafkaProducers,
    topic: str,
    partition: int,
    batch: KafkaSequence,
    ml: ManagedLedger,
    dedup_on: bool,
) -> KafkaProducerState | int:
    """The producer's state, the batch being next, or the offset of the same batch seen among
    the last five; KafkaSequenceError for an old epoch, a duplicate or a gap,
    WriteInFlightError while the same batch's first try is still being written. `dedup_on`: the
    topic's deduplication policy (the managed ledger then knows what each epoch stored)."""
    key = (partition, batch.producer_id)
    state = producers.get(key)
    if state is None or batch.producer_epoch > state.epoch:
        state = _new_producer(batch, ml, dedup_on)
        producers[key] = state
    elif batch.producer_epoch < state.epoch:
        raise KafkaSequenceError("epoch", f"producer {batch.producer_id}", batch.producer_epoch)
    first = unwrap(batch.base_sequence, state.next_sequence)
    for seen_first, seen_count, seen_base in state.recent:
        if seen_first == first and seen_count == batch.count:
            return seen_base
    if (first, batch.count) in state.in_flight:  # a retry while the first try is writing
        raise WriteInFlightError(topic, kafka_producer_name(batch.producer_id, batch.producer_epoch), first)
    if first < state.floor:  # not known to be stored: the client must not take it as done
        raise KafkaSequenceError("unknown", f"producer {batch.producer_id}", first)
    if first < state.next_sequence:
        raise KafkaSequenceError("duplicate", f"producer {batch.producer_id}", first)
    if first > state.next_sequence:
        raise KafkaSequenceError("gap", f"producer {batch.producer_id}", first)
    return state  # pushed by the caller once every check passed


def check_stored_before(
    ml: ManagedLedger, producer: str, state: KafkaProducerState, batch: KafkaSequence
) -> None:
    """KafkaSequenceError("duplicate") when the managed ledger's dedup holds the batch already
    (a restart forgot it here: the next batch follows it); SequenceInFlightError while unsure."""
    first = state.next_sequence
    last_sequence = first + batch.count - 1
    if ml.dedup_check(producer, [last_sequence])[0]:
        state.next_sequence = max(state.next_sequence, last_sequence + 1)
        raise KafkaSequenceError("duplicate", producer, batch.base_sequence)


def _new_producer(batch: KafkaSequence, ml: ManagedLedger, dedup_on: bool) -> KafkaProducerState:
    """The state of a producer (or epoch) this owner has not seen. With dedup on, the managed
    ledger knows the highest sequence stored: the state starts right after it, so a batch past
    it is a gap (the client resends the earlier, maybe lost, one) and one before it was stored;
    the highest also tells how often the sequence has wrapped. With dedup on and nothing of this
    epoch stored, the state starts at sequence 0, where a client starts every epoch (Kafka
    refuses a new epoch's batch past 0): a later batch arriving first (its earlier ones failed,
    or were lost in an owner change) is a gap, never the start. Storing it would leave the
    earlier ones out while the client, seeing a later batch succeed, counts them acknowledged
    (librdkafka acks them implicitly). With dedup off nothing is known: the first batch to
    arrive starts the state, whatever its sequence, as Kafka accepts an unknown producer's; what
    precedes it is then not known stored, so it is never answered a duplicate."""
    highest = ml.dedup_highest(kafka_producer_name(batch.producer_id, batch.producer_epoch))
    if highest is not None:
        return KafkaProducerState(batch.producer_epoch, highest + 1, 0)
    if dedup_on:
        return KafkaProducerState(batch.producer_epoch, 0, 0)
    return KafkaProducerState(batch.producer_epoch, batch.base_sequence, batch.base_sequence)
