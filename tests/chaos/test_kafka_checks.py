"""The chaos checker's Kafka checks on small made-up histories: each violation is found when
planted, and a clean history has none."""

from __future__ import annotations

from bench.chaos.checker import check
from bench.chaos.history import History, KafkaCommit, KafkaDelivery, KafkaEpochBump, KafkaSend
from bench.chaos.kafka_checks import (
    BACK,
    KAFKA_VIOLATIONS,
    MISSING,
    ORDER,
    PAST_END,
    PHANTOM,
    TWICE,
    UNDELIVERED,
    UNREADABLE,
    kafka_figures,
)
from bench.chaos.kafka_load import KafkaLog

T = "kafka-0"


def send(
    index: int, offset: int | None, partition: int = 0, producer: str = "kafka-0-kp0", error: str = ""
) -> KafkaSend:
    return KafkaSend(T, producer, index, "k", f"{producer}/{index}", 1.0, partition, offset, error, 2.0)


def clean() -> tuple[History, KafkaLog]:
    """Three messages on partition 0, one on partition 1; the group read them all and committed
    up to the end of partition 0."""
    history = History()
    history.kafka_sent = [send(0, 0), send(1, 1), send(2, 0, partition=1), send(3, 2)]
    log = KafkaLog()
    log.stored = {
        (T, 0): [(0, "kafka-0-kp0/0"), (1, "kafka-0-kp0/1"), (2, "kafka-0-kp0/3")],
        (T, 1): [(0, "kafka-0-kp0/2")],
    }
    log.ends = {(T, 0): 3, (T, 1): 1}
    log.committed = {(T, 0): 3, (T, 1): 1}
    history.kafka_deliveries = [
        KafkaDelivery("m0", T, p, o, v, 3.0) for (_t, p), msgs in log.stored.items() for o, v in msgs
    ]
    history.kafka_commits = [
        KafkaCommit("m0", T, 0, 2, 3.0, 3.1),
        KafkaCommit("m0", T, 0, 3, 4.0, 4.1),
        KafkaCommit("m1", T, 1, 1, 4.0, 4.1),
    ]
    history.kafka_polled = [KafkaCommit("poll", T, 0, 2, 3.5, 3.5), KafkaCommit("poll", T, 0, 3, 4.5, 4.5)]
    return history, log


def counts(history: History, log: KafkaLog) -> dict[str, int]:
    verdict = check(history, {}, {}, {}, [], 1.5, kafka=log)
    return {k: n for k, n in verdict.counts.items() if n}


def test_a_clean_kafka_history_has_no_violation() -> None:
    history, log = clean()
    assert counts(history, log) == {}
    assert kafka_figures(history, log)["acked"] == 4


def test_an_acknowledged_message_missing_or_elsewhere_is_found() -> None:
    history, log = clean()
    log.stored[T, 0] = [*log.stored[T, 0][:1], (1, "kafka-0-kp0/9"), *log.stored[T, 0][2:]]
    history.kafka_sent.append(send(9, None))  # no report for it: not counted as acknowledged
    history.kafka_sent[-1].reported_at = None
    found = counts(history, log)
    assert found[MISSING] == 1, found
    # a value at an offset that now holds another, for the member that read it there
    assert found[PHANTOM] == 1, found


def test_an_acknowledged_message_without_an_offset_must_still_be_stored() -> None:
    history, log = clean()
    history.kafka_sent[1].offset = -1001  # a retry answered DUPLICATE_SEQUENCE_NUMBER
    assert counts(history, log) == {}
    log.stored[T, 0] = [m for m in log.stored[T, 0] if m[0] != 1]
    history.kafka_deliveries = [d for d in history.kafka_deliveries if d.offset != 1 or d.partition != 0]
    assert counts(history, log) == {MISSING: 1}


def test_a_failed_send_may_be_missing_but_never_stored_twice() -> None:
    history, log = clean()
    history.kafka_sent.append(send(4, None, error="_MSG_TIMED_OUT"))
    assert counts(history, log) == {}
    log.stored[T, 0] += [(3, "kafka-0-kp0/4"), (4, "kafka-0-kp0/4")]
    log.ends[T, 0] = 5
    assert counts(history, log) == {TWICE: 1}


def test_a_phantom_read_or_stored_is_found() -> None:
    history, log = clean()
    history.kafka_deliveries.append(KafkaDelivery("m1", T, 1, 1, "nobody/0", 5.0))
    assert counts(history, log) == {PHANTOM: 1}
    history, log = clean()
    log.stored[T, 1].append((1, "nobody/1"))
    log.ends[T, 1] = 2
    assert counts(history, log) == {PHANTOM: 1}


def test_acknowledged_offsets_out_of_send_order_are_found() -> None:
    history, log = clean()
    history.kafka_sent[0].offset, history.kafka_sent[1].offset = 1, 0
    log.stored[T, 0] = [(0, "kafka-0-kp0/1"), (1, "kafka-0-kp0/0"), (2, "kafka-0-kp0/3")]
    history.kafka_deliveries = [
        KafkaDelivery("m0", T, p, o, v, 3.0) for (_t, p), msgs in log.stored.items() for o, v in msgs
    ]
    assert counts(history, log) == {ORDER: 1}


def test_a_commit_moving_back_is_found_but_overlapping_commits_are_not_compared() -> None:
    history, log = clean()
    history.kafka_commits.append(KafkaCommit("m1", T, 0, 2, 4.05, 4.2))  # sent while 3 was in flight
    assert counts(history, log) == {}
    history.kafka_commits.append(KafkaCommit("m1", T, 0, 2, 5.0, 5.1))  # sent after 3 was answered
    assert counts(history, log) == {BACK: 1}
    history, log = clean()
    history.kafka_polled.append(KafkaCommit("poll", T, 0, 1, 5.0, 5.0))
    assert counts(history, log) == {BACK: 1}


def test_a_committed_offset_past_the_end_or_over_undelivered_messages_is_found() -> None:
    history, log = clean()
    log.committed[T, 1] = 2
    assert counts(history, log) == {PAST_END: 1}
    history, log = clean()
    history.kafka_deliveries = [d for d in history.kafka_deliveries if (d.partition, d.offset) != (0, 1)]
    assert counts(history, log) == {UNDELIVERED: 1}
    log.committed[T, 0] = 1  # below the gap: nothing promised yet
    assert counts(history, log) == {}


def test_a_partition_not_readable_to_its_end_is_found() -> None:
    history, log = clean()
    log.unreadable.append((T, "kafka-0/0 read to offset 2 of 3 from 0 over Kafka"))
    assert counts(history, log) == {UNREADABLE: 1}


def test_every_kafka_violation_is_tested() -> None:
    assert {MISSING, TWICE, PHANTOM, ORDER, BACK, PAST_END, UNDELIVERED, UNREADABLE} == set(KAFKA_VIOLATIONS)


def test_a_batch_answered_duplicate_has_no_offsets_but_must_be_stored() -> None:
    """librdkafka reports a DUPLICATE_SEQUENCE_NUMBER batch's messages at -1, 0, 1, ..."""
    history, log = clean()
    for i, offset in zip((4, 5, 6), (-1, 0, 1), strict=True):
        history.kafka_sent.append(send(i, offset, partition=1))
        history.kafka_sent[-1].reported_at = 2.0 + 0.2 * i  # a loaded machine: reports 200 ms apart
    log.stored[T, 1] += [(1, "kafka-0-kp0/4"), (2, "kafka-0-kp0/5"), (3, "kafka-0-kp0/6")]
    log.ends[T, 1] = 4
    assert counts(history, log) == {}
    log.stored[T, 1].pop()
    log.ends[T, 1] = 3
    assert counts(history, log) == {MISSING: 1}


def test_a_duplicate_batch_reported_from_no_offset_is_followed_too() -> None:
    """confluent-kafka gives None for the batch's first message (offset -1), then 0, 1, ..."""
    history, log = clean()
    for i, offset in zip((4, 5, 6), (None, 0, 1), strict=True):
        history.kafka_sent.append(send(i, offset, partition=1))
    log.stored[T, 1] += [(1, "kafka-0-kp0/4"), (2, "kafka-0-kp0/5"), (3, "kafka-0-kp0/6")]
    log.ends[T, 1] = 4
    assert counts(history, log) == {}


def test_a_resend_under_a_bumped_epoch_is_told_apart_from_a_duplicate() -> None:
    """Message 3's first try (offset 2) lost its answer; the client bumped its epoch while 3 was
    in flight and sent it again (offset 3, acknowledged there): Kafka would store it twice too.
    Without the bump, or with the acknowledged copy the earlier one, it is a violation."""
    history, log = clean()
    history.kafka_sent[3].offset = 3
    log.stored[T, 0].append((3, "kafka-0-kp0/3"))
    log.ends[T, 0] = log.committed[T, 0] = 4
    history.kafka_deliveries.append(KafkaDelivery("m0", T, 0, 3, "kafka-0-kp0/3", 3.0))
    assert counts(history, log) == {TWICE: 1}  # no bump: Quire stored a retry twice
    history.kafka_epoch_bumps = [KafkaEpochBump("kafka-1-kp0", 1.5, 7, 1)]
    assert counts(history, log) == {TWICE: 1}  # another producer's bump excuses nothing
    history.kafka_epoch_bumps = [KafkaEpochBump("kafka-0-kp0", 0.5, 7, 1)]
    assert counts(history, log) == {TWICE: 1}  # a bump before the send excuses nothing
    history.kafka_epoch_bumps = [KafkaEpochBump("kafka-0-kp0", 1.5, 7, 1)]
    assert counts(history, log) == {}
    assert kafka_figures(history, log)["stored again after an epoch bump"] == 1
    assert any("bumped producer epoch" in n for n in history.notes)
    history.kafka_sent[3].offset = 2  # acknowledged at the first copy: the second is no resend
    assert counts(history, log) == {TWICE: 1}
    history.kafka_sent[3].offset = 4  # a third copy, acknowledged: one bump covers one resend only
    log.stored[T, 0].append((4, "kafka-0-kp0/3"))
    log.ends[T, 0] = log.committed[T, 0] = 5
    history.kafka_deliveries.append(KafkaDelivery("m0", T, 0, 4, "kafka-0-kp0/3", 3.0))
    assert counts(history, log) == {TWICE: 2}
    history.kafka_epoch_bumps.append(KafkaEpochBump("kafka-0-kp0", 1.8, 7, 2))
    assert counts(history, log) == {}  # two bumps in flight: one copy per epoch


def test_a_message_reported_failed_may_be_stored_once_per_epoch() -> None:
    """Timed out in flight (possibly persisted), after its client bumped the epoch and resent it."""
    history, log = clean()
    history.kafka_sent.append(send(4, None, error="_MSG_TIMED_OUT"))
    log.stored[T, 0] += [(3, "kafka-0-kp0/4"), (4, "kafka-0-kp0/4")]
    log.ends[T, 0] = log.committed[T, 0] = 5
    history.kafka_deliveries += [KafkaDelivery("m0", T, 0, o, "kafka-0-kp0/4", 3.0) for o in (3, 4)]
    assert counts(history, log) == {TWICE: 1}
    history.kafka_epoch_bumps = [KafkaEpochBump("kafka-0-kp0", 1.5, 7, 1)]
    assert counts(history, log) == {}
    log.stored[T, 0].append((5, "kafka-0-kp0/4"))  # a third copy: one epoch stored it twice
    log.ends[T, 0] = log.committed[T, 0] = 6
    history.kafka_deliveries.append(KafkaDelivery("m0", T, 0, 5, "kafka-0-kp0/4", 3.0))
    assert counts(history, log) == {TWICE: 2}
