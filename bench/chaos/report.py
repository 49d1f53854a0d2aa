"""The table a campaign ends with: what was done, what was injected, what was found."""

from __future__ import annotations

import itertools
import time
from collections import Counter
from dataclasses import dataclass
from typing import Any

from bench.chaos.checker import VIOLATIONS, Verdict
from bench.chaos.faults import KINDS
from bench.chaos.history import History
from bench.chaos.kafka_checks import kafka_figures
from bench.chaos.kafka_load import KafkaLog
from bench.chaos.known import KNOWN_BUGS

MAX_NOTES = 25


@dataclass(frozen=True)
class Summary:
    seed: int
    seconds: float
    cluster: str
    settle_s: float
    logs: dict[str, list[dict[str, Any]]]
    lease_losses: int
    unexpected: int
    kafka: KafkaLog | None = None


def longest_unavailability(history: History) -> tuple[float, float, float]:
    """(seconds, from, to): the longest time in the load phase in which no produce succeeded."""
    answered = sorted({m.answered_at for m in history.sent if m.answered_at is not None})
    points = [history.load_started, *(t for t in answered if history.load_started <= t <= history.load_ended)]
    points.append(history.load_ended)
    best = (0.0, history.load_started, history.load_started)
    for a, b in itertools.pairwise(points):
        if b - a > best[0]:
            best = (b - a, a, b)
    return best


def consumer_changes(history: History, kind: str) -> int:
    """How often a subscription of type `kind` delivered something (a key's message, on
    key_shared) to another consumer than the one before: failover's takeovers, key_shared's key
    moves (broker restarts included, where consumers start afresh)."""
    last: dict[tuple[str, str, str], str] = {}
    changes = 0
    for d in history.deliveries:
        if history.subscription_types.get(d.subscription) != kind:
            continue
        k = (d.topic, d.subscription, (d.key or "") if kind == "key_shared" else "")
        if last.get(k, d.consumer) != d.consumer:
            changes += 1
        last[k] = d.consumer
    return changes


def _faults_between(history: History, lo: float, hi: float) -> str:
    kinds = [f"{f.kind} {f.target}" for f in history.faults if f.started <= hi and (f.ended or hi) >= lo]
    return ", ".join(kinds) or "no fault"


def _abandoned(history: History, summary: Summary) -> str:
    stored = {(m.get("producer_name"), m.get("sequence_id")) for log in summary.logs.values() for m in log}
    abandoned = [m for m in history.sent if m.abandoned]
    return f"{len(abandoned)} ({sum(1 for m in abandoned if (m.producer, m.seq) in stored)})"


def _rows(history: History, verdict: Verdict, summary: Summary) -> list[tuple[str, str]]:
    answered = [m for m in history.sent if m.answered_at is not None]
    duplicates = sum(1 for m in answered if m.duplicate)
    failed_attempts = sum(1 for a in history.attempts if a.status != 200)
    redelivered = sum(1 for d in history.deliveries if d.redelivery_count > 0)
    acked = sum(len(a.message_ids) for a in history.acks)
    longest, lo, hi = longest_unavailability(history)
    faults = Counter(f.kind for f in history.faults)
    rows = [
        ("messages acknowledged", f"{len(answered)} ({duplicates} of them answered duplicate)"),
        ("messages stored (read back)", str(sum(len(log) for log in summary.logs.values()))),
        ("produce attempts (not 200)", f"{len(history.attempts)} ({failed_attempts})"),
        (
            "batches never answered",
            f"{sum(1 for m in history.sent if m.answered_at is None and not m.abandoned)} messages",
        ),
        ("abandoned by fickle producers (stored anyway)", _abandoned(history, summary)),
        ("deliveries (redelivered)", f"{len(history.deliveries)} ({redelivered})"),
        ("messages acked by consumers", str(acked)),
        (
            "entries acked on a subscription (durable by the rule)",
            f"{verdict.acked_entries} ({verdict.durable_entries})",
        ),
        ("compactions requested", str(history.compactions_requested)),
        ("consumer silences (longer than the idle time)", str(len(history.silences))),
        (
            "failover: deliveries from another consumer than the last",
            str(consumer_changes(history, "failover")),
        ),
        ("key_shared: a key's delivery to another consumer", str(consumer_changes(history, "key_shared"))),
        ("key_shared: deliveries compared for per-key order", str(verdict.order_compared)),
    ]
    rows += _kafka_rows(history, summary)
    parts = Counter(f.kind for f in history.faults if f.part_of)
    rows += [(f"faults: {kind}", _times(faults[kind], parts[kind])) for kind in KINDS]
    rows.append(("leases lost without a fault (broker logs)", str(summary.lease_losses)))
    restarts = ", ".join(f"{role} {n}" for role, n in sorted(history.restarts.items())) or "none"
    rows.append(("process restarts", f"{sum(history.restarts.values())} ({restarts})"))
    rows.append(("longest unavailability", f"{longest:.1f} s (during: {_faults_between(history, lo, hi)})"))
    rows.append(("unexpected 5xx answers (not 503)", str(summary.unexpected)))
    for kind in VIOLATIONS:
        value = str(verdict.counts[kind])
        if verdict.known[kind]:
            value += f" ({verdict.known[kind]} explained by a known bug)"
        rows.append((f"violation: {kind}", value))
    return rows


def _times(count: int, in_compounds: int) -> str:
    return f"{count} ({in_compounds} in compound faults)" if in_compounds else str(count)


def _kafka_rows(history: History, summary: Summary) -> list[tuple[str, str]]:
    k = kafka_figures(history, summary.kafka)
    return [
        (
            "Kafka: messages sent (acked; acked without an offset; delivery errors; no report)",
            f"{k['sent']} ({k['acked']}; {k['acked without an offset']}; {k['delivery errors']}; "
            f"{k['never reported']})",
        ),
        (
            "Kafka: messages stored (read back over Kafka; of them sent again under a bumped epoch)",
            f"{k['stored']} ({k['stored again after an epoch bump']})",
        ),
        ("Kafka: producer epoch bumps (librdkafka's)", str(k["epoch bumps"])),
        ("Kafka: group deliveries (distinct offsets)", f"{k['deliveries']} ({k['distinct delivered']})"),
        ("Kafka: partitions committed (commits failed)", f"{k['commits']} ({k['commit failures']})"),
        ("Kafka: committed offset changes polled", str(k["polled changes"])),
    ]


def figures(history: History, verdict: Verdict, summary: Summary) -> dict[str, Any]:
    """The table's numbers for programs (the CI test)."""
    return {
        "seed": summary.seed,
        "acknowledged": sum(1 for m in history.sent if m.answered_at is not None),
        "kafka": kafka_figures(history, summary.kafka),
        "faults": dict(Counter(f.kind for f in history.faults)),
        "faults_in_compounds": dict(Counter(f.kind for f in history.faults if f.part_of)),
        "restarts": dict(history.restarts),
        "longest_unavailability_s": longest_unavailability(history)[0],
        "violations": dict(verdict.counts),
        "known": dict(verdict.known),
        "known_topics": dict(verdict.known_topics),
        "failed": verdict.failed,
        "examples": {k: list(v) for k, v in verdict.examples.items()},
        "skipped": list(history.skipped),
        "notes": list(history.notes),
    }


def _clock(t: float) -> str:
    return time.strftime("%H:%M:%S", time.localtime(t))


def _note(history: History, text: str) -> str:
    times = history.note_times.get(text, [])
    if len(times) > 1:
        return f"{text} (x{len(times)}, {_clock(times[0])} to {_clock(times[-1])})"
    return f"{text} ({_clock(times[0])})" if times else text


def table(history: History, verdict: Verdict, summary: Summary) -> str:
    rows = _rows(history, verdict, summary)
    width = max(len(name) for name, _ in rows)
    lines = [
        "",
        f"chaos campaign: seed {summary.seed}, {summary.seconds:g} s of load",
        f"cluster: {summary.cluster}",
        f"an ack counts as durable {summary.settle_s:g} s after its whole batch was acked, "
        "if no fault happened in between",
        "",
        f"| {'figure'.ljust(width)} | value |",
        f"|{'-' * (width + 2)}|-------|",
    ]
    lines += [f"| {name.ljust(width)} | {value} |" for name, value in rows]
    lines += ["", *(f"skipped: {s}" for s in history.skipped)]
    for kind, examples in verdict.examples.items():
        lines.append(f"{kind}:")
        lines += [f"  {e}" for e in examples]
    if history.notes:
        lines.append("notes:")
        lines += [f"  {_note(history, n)}" for n in history.notes[:MAX_NOTES]]
        if len(history.notes) > MAX_NOTES:
            lines.append(f"  ... and {len(history.notes) - MAX_NOTES} more")
    for bug in sorted(set(verdict.known_topics.values())):
        topics = ", ".join(t for t, b in sorted(verdict.known_topics.items()) if b == bug)
        lines.append(f"known bug {bug} ({topics}): {KNOWN_BUGS[bug]}")
    if verdict.failed:
        lines.append("result: FAIL")
    elif any(verdict.counts.values()):
        lines.append("result: PASS except for known bugs (no other violation)")
    else:
        lines.append("result: PASS (no violation)")
    return "\n".join(lines)
