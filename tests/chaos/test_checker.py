"""The chaos campaign's checker on small made-up histories: each violation it knows is found
when planted, and a clean history has none (a checker that cannot fail proves nothing)."""

from __future__ import annotations

from typing import Any

from bench.chaos.checker import (
    VIOLATIONS,
    FaultWindows,
    Verdict,
    check,
    check_key_order,
    durable_ack_times,
    reference_compaction,
)
from bench.chaos.finale import FENCED
from bench.chaos.history import Ack, Delivery, Fault, History, Sent, Sighting, Silence
from bench.chaos.report import consumer_changes

T = "plain-0"
SETTLE = 1.5


def message(mid: str, producer: str, seq: int, key: str | None = None, value: str = "v") -> dict[str, Any]:
    return {"message_id": mid, "producer_name": producer, "sequence_id": seq, "key": key, "value": value}


def sent(
    seq: int, mid: str | None, duplicate: bool = False, at: float = 10.0, key: str | None = None
) -> Sent:
    return Sent(T, "p", seq, key, "v", mid, duplicate, at)


def clean() -> tuple[History, dict[str, list[dict[str, Any]]]]:
    history = History()
    history.sent = [sent(0, "1:0:0"), sent(1, "1:0:1"), sent(2, None, duplicate=True, at=11.0)]
    log = [message("1:0:0", "p", 0), message("1:0:1", "p", 1), message("1:1:0", "p", 2)]
    return history, {T: log}


def counts(history: History, logs: dict[str, list[dict[str, Any]]], **kw: Any) -> dict[str, int]:
    verdict = check(history, logs, kw.get("views", {}), kw.get("delivered", {}), history.faults, SETTLE)
    return {k: n for k, n in verdict.counts.items() if n}


def test_a_clean_history_has_no_violation() -> None:
    history, logs = clean()
    assert counts(history, logs) == {}


def test_an_acknowledged_message_missing_or_elsewhere_is_found() -> None:
    history, logs = clean()
    logs[T] = [m for m in logs[T] if m["message_id"] != "1:0:1"]
    assert counts(history, logs) == {VIOLATIONS[0]: 1}
    history, logs = clean()
    logs[T][1] = message("1:0:1", "p", 7)  # another message at the acknowledged id
    assert VIOLATIONS[0] in counts(history, logs)


def test_a_message_stored_twice_is_found() -> None:
    history, logs = clean()
    logs[T].append(message("1:2:0", "p", 2))
    assert VIOLATIONS[1] in counts(history, logs)


def test_a_duplicate_answer_for_a_message_not_stored_is_found() -> None:
    history, logs = clean()
    logs[T] = logs[T][:2]
    assert counts(history, logs) == {VIOLATIONS[2]: 1}


def test_sequence_ids_out_of_order_are_found() -> None:
    history, logs = clean()
    logs[T] = [logs[T][1], logs[T][0], logs[T][2]]
    assert VIOLATIONS[3] in counts(history, logs)


def test_a_redelivery_after_a_durable_ack_is_found_and_one_after_a_fault_is_allowed() -> None:
    history, logs = clean()
    history.acks = [Ack(T, "s", ("1:0:0", "1:0:1"), 20.0, 20.1)]
    late = Delivery(T, "s", "c", "1:0:0", "p", 0, 0, 20.1 + SETTLE + 1, 30.0)
    history.deliveries = [late]
    assert VIOLATIONS[4] in counts(history, logs, delivered={(T, "s"): {"1:0:0", "1:0:1", "1:1:0"}})
    history.faults = [Fault("kill-broker", "broker-0", 20.5, 21.0)]  # acks of the last interval may go
    assert VIOLATIONS[4] not in counts(history, logs, delivered={(T, "s"): {"1:0:0", "1:0:1", "1:1:0"}})


def test_an_entry_is_durable_only_once_all_its_messages_are_acked_after_the_last_fault() -> None:
    windows = FaultWindows([Fault("kill-broker", "b", 5.0, 6.0)], until=100.0)
    entry = ["1:0:0", "1:0:1"]
    assert durable_ack_times([("1:0:0", 1.0, 1.1)], entry, windows, SETTLE) is None  # half acked
    # One ack before the fault, one after: the first was lost with the broker's memory.
    assert durable_ack_times([("1:0:0", 1.0, 1.1), ("1:0:1", 7.0, 7.1)], entry, windows, SETTLE) is None
    both = [("1:0:0", 1.0, 1.1), ("1:0:1", 1.2, 1.3)]
    assert durable_ack_times(both, entry, windows, SETTLE) == 1.3 + SETTLE
    # A fault within the settle time after the last ack: not durable then; acked again later, it is.
    assert durable_ack_times([("1:0:0", 4.0, 4.1), ("1:0:1", 4.2, 4.3)], entry, windows, SETTLE) is None
    again = [("1:0:0", 4.0, 4.1), ("1:0:1", 4.2, 4.3), ("1:0:0", 8.0, 8.1), ("1:0:1", 8.0, 8.2)]
    assert durable_ack_times(again, entry, windows, SETTLE) == 8.2 + SETTLE


def test_a_compacted_view_unlike_the_reference_is_found() -> None:
    history = History()
    history.sent = [
        Sent("k", "p", 0, "a", "a0", "1:0:0", False, 1.0),
        Sent("k", "p", 1, "a", "a1", "1:1:0", False, 1.0),
        Sent("k", "p", 2, "b", "", "1:2:0", False, 1.0),  # a tombstone: b is gone
    ]
    log = [
        message("1:0:0", "p", 0, "a", "a0"),
        message("1:1:0", "p", 1, "a", "a1"),
        message("1:2:0", "p", 2, "b", ""),
    ]
    assert reference_compaction(history, "k", log) == {"a": ("1:1:0", "a1")}
    good = [message("1:1:0", "p", 1, "a", "a1")]
    assert counts(history, {"k": log}, views={"k": good}) == {}
    stale = [message("1:0:0", "p", 0, "a", "a0")]
    assert counts(history, {"k": log}, views={"k": stale}) == {VIOLATIONS[5]: 1}


def test_a_message_read_during_the_run_then_gone_is_found() -> None:
    history, logs = clean()
    history.sight(T, "1:3:0", Sighting("p", 9, "v"))
    assert counts(history, logs) == {VIOLATIONS[6]: 1}


def test_a_message_a_subscription_never_delivered_is_found() -> None:
    history, logs = clean()
    assert counts(history, logs, delivered={(T, "s"): {"1:0:0", "1:0:1"}}) == {VIOLATIONS[7]: 1}


def test_a_topic_not_readable_to_its_end_fails_unless_a_known_bug_explains_it() -> None:
    history, logs = clean()
    history.unreadable.append((T, "plain-0 from earliest: 404 NO_SUCH_LEDGER: ledger 2"))
    verdict = check(history, logs, {}, {}, [], SETTLE)
    assert verdict.counts[VIOLATIONS[8]] == 1 and verdict.failed
    verdict = check(history, logs, {}, {}, [], SETTLE, {T: "some-bug"})
    assert verdict.known[VIOLATIONS[8]] == 1 and not verdict.failed


# --- key_shared: per-key order within one consumer's stream ---------------------------------------

K = "keyed-0"
ORDER = VIOLATIONS[9]


def keyed_log() -> dict[str, list[dict[str, Any]]]:
    """Key a at entries 0, 2, 4, 6; key b at 1, 3, 5, 7 (producer p, sequence id = entry)."""
    return {K: [message(f"1:{i}:0", "p", i, "ab"[i % 2]) for i in range(8)]}


def got(entry: int, at: float, consumer: str = "k0", count: int = 0, sub: str = "ks") -> Delivery:
    return Delivery(K, sub, consumer, f"1:{entry}:0", "p", entry, count, at, at + 0.1, "ab"[entry % 2])


def keyed_history(deliveries: list[Delivery], faults: list[Fault] | None = None) -> History:
    history = History()
    history.subscription_types = {"ks": "key_shared", "sh": "shared"}
    history.deliveries = deliveries
    history.faults = faults or []
    return history


def order_count(history: History, moves: list[Fault] | None = None) -> int:
    verdict = Verdict()
    check_key_order(history, keyed_log(), history.faults, moves or [], verdict)
    return verdict.counts[ORDER]


def test_a_key_going_backwards_in_one_consumers_stream_is_found() -> None:
    # k0 gets a@4 and then a@2 with redelivery_count 0, no fault anywhere: a violation, and the
    # full check() reports it (with a shared subscription's same stream left alone).
    deliveries = [got(0, 10.0), got(4, 11.0), got(2, 12.0)]
    history = keyed_history(deliveries)
    assert order_count(history) == 1
    shared = [got(0, 10.0, sub="sh"), got(4, 11.0, sub="sh"), got(2, 12.0, sub="sh")]
    history.deliveries += shared
    verdict = check(history, keyed_log(), {}, {}, history.faults, SETTLE)
    assert verdict.counts[ORDER] == 1 and verdict.failed
    assert "k0 got 1:2:0 (key 'a'" in verdict.examples[ORDER][0]
    assert verdict.order_compared == 2


def test_keys_in_order_per_consumer_pass_however_the_keys_interleave() -> None:
    # a and b interleaved, a moving from k0 to k1 (k1 starts with newer messages): no violation.
    deliveries = [
        got(0, 10.0),
        got(1, 10.5),
        got(3, 11.0),
        got(2, 11.5),
        got(4, 12.0, "k1"),
        got(6, 13.0, "k1"),
    ]
    assert order_count(keyed_history(deliveries)) == 0


def test_a_redelivery_may_go_back_but_does_not_lower_the_furthest_message() -> None:
    # a@2 again with redelivery_count 1 after a@4: allowed. a@0 new after that still counts as
    # going back behind a@4 (the redelivery did not make 2 the furthest).
    assert order_count(keyed_history([got(2, 10.0), got(4, 11.0), got(2, 12.0, count=1)])) == 0
    assert order_count(keyed_history([got(2, 10.0), got(4, 11.0), got(2, 12.0, count=1), got(0, 13.0)])) == 1


def test_a_key_moved_back_with_its_unacked_messages_is_not_a_violation() -> None:
    # k0 got a@0; a went to k2 (a@2, a@4), which went silent with a@4 unacked; a@4 came back to
    # k0 as a redelivery, and then new messages of a (a@6) to k0.
    history = keyed_history(
        [got(0, 5.0), got(2, 10.0, "k2"), got(4, 11.0, "k2"), got(4, 20.0, count=1), got(6, 21.0)]
    )
    history.silences = [Silence(K, "ks", "k2", 11.5, 18.0)]
    assert order_count(history) == 0
    assert consumer_changes(history, "key_shared") == 2


def test_a_fault_or_a_fenced_topic_between_two_deliveries_starts_the_key_afresh() -> None:
    # A broker killed between a@4 and a@2 (count 0: the new owner's counts were not flushed).
    deliveries = [got(0, 10.0), got(4, 11.0), got(2, 20.0), got(4, 21.0)]
    kill = Fault("kill-broker", "broker-1", 14.0, 16.0)
    assert order_count(keyed_history(deliveries, [kill])) == 0
    # A fault after the fact does not excuse it, nor does a fault elsewhere in time.
    assert order_count(keyed_history(deliveries, [Fault("kill-broker", "broker-1", 40.0, 41.0)])) == 1
    # A managed ledger of the topic fenced (in a broker log) counts as a move of that topic only.
    fenced = Fault("ledger-fenced", K, 15.0, 15.0)
    assert order_count(keyed_history(deliveries), [fenced]) == 0
    assert order_count(keyed_history(deliveries), [Fault("ledger-fenced", "keyed-1", 15.0, 15.0)]) == 1
    # A receive sent before a broker paused and answered after it (the old subscription's
    # answer): the span from the previous request's send to this one's answer covers the pause.
    slow = Delivery(K, "ks", "k0", "1:2:0", "p", 2, 0, 12.0, 30.0, "a")
    assert (
        order_count(keyed_history([got(4, 11.0), slow], [Fault("pause-broker", "broker-0", 20.0, 24.0)])) == 0
    )
    # After the reset the stream is checked again from the new first message on.
    again = [*deliveries, got(0, 22.0)]
    assert order_count(keyed_history(again, [kill])) == 1


def test_failover_takeovers_are_counted() -> None:
    history = History()
    history.subscription_types = {"fo": "failover"}
    history.deliveries = [
        Delivery(K, "fo", c, f"1:{i}:0", "p", i, 0, float(i), i + 0.1)
        for i, c in enumerate(["f0", "f0", "f1", "f0"])
    ]
    assert consumer_changes(history, "failover") == 2


def test_a_fenced_managed_ledger_in_a_broker_log_is_recognised() -> None:
    line = (
        "2026-11-25 03:40:01,123 WARNING managed_ledger.fencing: managed ledger "
        "persistent://public/default/keyed-0 fenced: this broker's ownership lease lapsed"
    )
    match = FENCED.match(line)
    assert match is not None and match.group(2).rsplit("/", 1)[-1] == K
