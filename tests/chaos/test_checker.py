"""The chaos campaign's checker on small made-up histories: each violation it knows is found
when planted, and a clean history has none (a checker that cannot fail proves nothing)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from bench.chaos.checker import VIOLATIONS, FaultWindows, check, durable_ack_times, reference_compaction
from bench.chaos.history import Ack, Delivery, Fault, History, Sent, Sighting
from bench.chaos.known import known_topics

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


def test_with_no_open_bug_known_no_read_back_failure_is_excused(tmp_path: Path) -> None:
    history, _logs = clean()
    history.unreadable.append((T, "plain-0 from earliest: 404 2:1..33: NO_SUCH_LEDGER: ledger 2"))
    history.faults.append(Fault("wipe-bookie", "bookie-1", 1.0, 2.0))
    (tmp_path / "broker-0.log").write_text("WARNING recovery of ledger 2: entry 33 is on 1 bookies\n")
    assert known_topics(history, tmp_path) == {}
