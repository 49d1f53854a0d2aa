"""What `make bench-scale` measures and how it judges it: the flags, the rows a step yields, the
bars of issue 26 and the markdown tables. Pure logic (no process, no network), unit-tested."""

from __future__ import annotations

import argparse
import math
from dataclasses import dataclass, field

DEFAULT_STEPS = (1_000, 5_000, 10_000, 20_000, 50_000, 100_000)
CREATE_BAR = 2_000.0  # topics/s, creation and reopening
KIB_BAR = 8.0  # broker RSS per idle topic
P99_FACTOR = 2.0  # p99 at the largest step over the p99 at the first
FAILOVER_BAR_S = 15.0  # every topic of the killed broker served again


@dataclass(frozen=True)
class Plan:
    steps: tuple[int, ...]  # cumulative topic counts, ascending
    brokers: tuple[int, ...]  # configurations: 1 (standalone, SQLite), 3 (PostgreSQL)
    failover_topics: int  # 0: no failover
    producers: int
    concurrency: int
    repeats: int  # repeated measurements per figure; the median is reported
    samples: int  # produce requests per latency measurement
    failover_timeout_s: float
    logs: str | None = None  # keep the processes' logs (and data) here instead of a temporary dir


def _counts(text: str) -> tuple[int, ...]:
    try:
        values = tuple(int(v.replace("_", "")) for v in text.split(",") if v.strip())
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a comma-separated list of integers: {text!r}") from None
    if not values or any(v <= 0 for v in values):
        raise argparse.ArgumentTypeError(f"need positive integers: {text!r}")
    return values


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="bench.scale", description=__doc__.splitlines()[0])
    p.add_argument("--max-topics", type=int, default=DEFAULT_STEPS[-1], help="the last step")
    p.add_argument(
        "--steps", type=_counts, default=DEFAULT_STEPS, help="cumulative topic counts, e.g. 1000,5000"
    )
    p.add_argument(
        "--brokers", type=_counts, default=(1, 3), help="configurations: 1 (SQLite), 3 (PostgreSQL)"
    )
    p.add_argument(
        "--failover-topics", type=int, default=30_000, help="topics over 3 brokers; 0: no failover"
    )
    p.add_argument("--producers", type=int, default=1_000, help="producers on the killed broker's topics")
    p.add_argument("--concurrency", type=int, default=48, help="requests in flight while creating (32-64)")
    p.add_argument("--repeats", type=int, default=3, help="repeated measurements per figure (median)")
    p.add_argument("--samples", type=int, default=200, help="produce requests per latency measurement")
    p.add_argument("--logs", default=None, help="keep process logs and data in this directory")
    p.add_argument("--failover-timeout", type=float, default=300.0, help="bound on the failover wait (s)")
    return p


def parse(argv: list[str] | None = None) -> Plan:
    p = parser()
    a = p.parse_args(argv)
    if a.max_topics <= 0:
        p.error("--max-topics must be positive")
    if any(b not in (1, 3) for b in a.brokers):
        p.error("--brokers takes 1 and/or 3")
    if not 1 <= a.concurrency <= 1024 or a.repeats < 1 or a.samples < 1 or a.producers < 0:
        p.error("--concurrency, --repeats, --samples must be positive, --producers not negative")
    if a.failover_topics < 0:
        p.error("--failover-topics must not be negative")
    steps = sorted({s for s in a.steps if s < a.max_topics} | {a.max_topics})
    return Plan(
        steps=tuple(steps),
        brokers=tuple(sorted(set(a.brokers))),
        failover_topics=a.failover_topics if 3 in a.brokers else 0,
        producers=a.producers,
        concurrency=a.concurrency,
        repeats=a.repeats,
        samples=a.samples,
        failover_timeout_s=a.failover_timeout,
        logs=a.logs,
    )


@dataclass
class Step:
    """The figures at one step of one configuration (medians of `repeats` measurements)."""

    topics: int
    create_rate: float  # topics/s over this step's new topics
    rss_mib: float  # the brokers' RSS, summed
    kib_per_topic: float  # (RSS - RSS before any topic) / topics
    p50_ms: float
    p99_ms: float
    list_ms: float
    stats_ms: float


@dataclass
class Failover:
    topics: int  # topics in the 3-broker cluster
    victim_topics: int  # those the killed broker held
    producers: int
    all_served_s: float  # kill -> the last of the victim's topics served (NaN: not within the bound)
    producers_acked_s: float  # kill -> the last producer acknowledged after the kill
    unserved: int  # victim topics still not served at the bound

    @property
    def reopen_rate(self) -> float:
        return self.victim_topics / self.all_served_s if self.all_served_s > 0 else math.nan


@dataclass
class Result:
    steps: dict[int, list[Step]] = field(default_factory=dict)  # brokers -> steps
    reopen: dict[int, float] = field(default_factory=dict)  # brokers -> topics/s after a restart
    failover: Failover | None = None
    retried: int = 0  # 503/429 answers a creating or measuring request retried


@dataclass(frozen=True)
class Bar:
    name: str
    measured: str
    bar: str
    ok: bool | None  # None: not measured in this run

    @property
    def verdict(self) -> str:
        return "n/a" if self.ok is None else ("PASS" if self.ok else "**FAIL**")


def _fmt(x: float, digits: int = 1) -> str:
    return "—" if math.isnan(x) else f"{x:,.{digits}f}"


def bars(result: Result) -> list[Bar]:
    """Issue 26's bars, judged on what this run measured (the largest step it reached)."""
    out: list[Bar] = []
    for brokers, steps in sorted(result.steps.items()):
        if not steps:
            continue
        where = f"{brokers} broker{'s' if brokers > 1 else ''}"
        worst = min(s.create_rate for s in steps)
        out.append(
            Bar(
                f"creation, {where} (slowest step)",
                f"{_fmt(worst, 0)} topics/s",
                f"≥ {CREATE_BAR:,.0f}",
                worst >= CREATE_BAR,
            )
        )
        last = steps[-1]
        out.append(
            Bar(
                f"RSS per idle topic, {where} at {last.topics:,}",
                f"{_fmt(last.kib_per_topic)} KiB",
                f"≤ {KIB_BAR:g} KiB",
                last.kib_per_topic <= KIB_BAR,
            )
        )
        first = steps[0]
        limit = P99_FACTOR * first.p99_ms
        ok = last.p99_ms <= limit if len(steps) > 1 else None
        out.append(
            Bar(
                f"produce p99, {where}: {last.topics:,} vs {first.topics:,} topics",
                f"{_fmt(last.p99_ms)} vs {_fmt(first.p99_ms)} ms",
                f"≤ {P99_FACTOR:g} x = {_fmt(limit)} ms",
                ok,
            )
        )
    for brokers, rate in sorted(result.reopen.items()):
        out.append(
            Bar(
                f"reopening after a restart, {brokers} broker{'s' if brokers > 1 else ''}",
                f"{_fmt(rate, 0)} topics/s",
                f"≥ {CREATE_BAR:,.0f}",
                rate >= CREATE_BAR,
            )
        )
    f = result.failover
    if f is not None:
        out.append(
            Bar(
                f"reopening after kill -9 ({f.victim_topics:,} topics)",
                f"{_fmt(f.reopen_rate, 0)} topics/s",
                f"≥ {CREATE_BAR:,.0f}",
                f.reopen_rate >= CREATE_BAR,
            )
        )
        served = f.unserved == 0 and f.all_served_s <= FAILOVER_BAR_S
        out.append(
            Bar(
                f"failover: all {f.victim_topics:,} topics served",
                f"{_fmt(f.all_served_s, 2)} s",
                f"≤ {FAILOVER_BAR_S:g} s",
                served,
            )
        )
    return out


def steps_table(brokers: int, steps: list[Step]) -> list[str]:
    store = "SQLite, `quire standalone`" if brokers == 1 else "PostgreSQL, 1 bookie"
    rows = [
        f"#### {brokers} broker{'s' if brokers > 1 else ''} ({store})",
        "",
        "| topics | created per s | broker RSS | per topic | produce p50 / p99 | list namespace "
        "| topic stats |",
        "|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for s in steps:
        rows.append(
            f"| {s.topics:,} | {_fmt(s.create_rate, 0)} | {_fmt(s.rss_mib, 0)} MiB "
            f"| {_fmt(s.kib_per_topic)} KiB | {_fmt(s.p50_ms)} / {_fmt(s.p99_ms)} ms "
            f"| {_fmt(s.list_ms)} ms | {_fmt(s.stats_ms)} ms |"
        )
    return rows


def failover_table(f: Failover) -> list[str]:
    return [
        f"#### kill -9 of one of 3 brokers ({f.topics:,} topics, {f.victim_topics:,} on the killed one, "
        f"{f.producers:,} producers on them)",
        "",
        "| all topics served again | all producers acknowledged | reopened per s | not served at the bound |",
        "|---:|---:|---:|---:|",
        f"| {_fmt(f.all_served_s, 2)} s | {_fmt(f.producers_acked_s, 2)} s "
        f"| {_fmt(f.reopen_rate, 0)} | {f.unserved:,} |",
    ]


def report(result: Result) -> str:
    rows: list[str] = ["### Many topics (`make bench-scale`)", ""]
    for brokers, steps in sorted(result.steps.items()):
        rows += [*steps_table(brokers, steps), ""]
    if result.failover is not None:
        rows += [*failover_table(result.failover), ""]
    rows += [f"Requests retried after a 503/429 (outside the failover): {result.retried:,}", ""]
    rows += [
        "#### Bars (issue 26)",
        "",
        "| figure | measured | bar | verdict |",
        "| --- | ---: | --- | --- |",
    ]
    rows += [f"| {b.name} | {b.measured} | {b.bar} | {b.verdict} |" for b in bars(result)]
    return "\n".join(rows)


def passed(result: Result) -> bool:
    return all(b.ok is not False for b in bars(result))
