"""`make bench-scale`'s own logic: its flags and how it judges the bars (no process started)."""

from __future__ import annotations

import math

import pytest

from bench.scale.plan import Failover, Result, Step, bars, parse, passed, report


def step(topics: int, rate: float = 3000.0, kib: float = 4.0, p99: float = 5.0) -> Step:
    return Step(topics, rate, 100.0, kib, 1.0, p99, 10.0, 2.0)


def test_defaults_are_the_issue_s_sizes() -> None:
    plan = parse([])
    assert plan.steps[-1] == 100_000 and plan.steps[0] == 1_000
    assert plan.brokers == (1, 3) and plan.failover_topics == 30_000 and plan.producers == 1_000
    assert 32 <= plan.concurrency <= 64


def test_steps_are_capped_by_max_topics_which_is_the_last_step() -> None:
    plan = parse(["--steps", "1000,5000,20000", "--max-topics", "10000"])
    assert plan.steps == (1_000, 5_000, 10_000)


def test_failover_only_with_three_brokers() -> None:
    assert parse(["--brokers", "1"]).failover_topics == 0
    assert parse(["--brokers", "3", "--failover-topics", "6000"]).failover_topics == 6_000


@pytest.mark.parametrize(
    "argv",
    [["--steps", "a,b"], ["--steps", "0"], ["--brokers", "2"], ["--max-topics", "0"], ["--concurrency", "0"]],
)
def test_bad_flags_are_refused(argv: list[str]) -> None:
    with pytest.raises(SystemExit):
        parse(argv)


def test_all_bars_pass_when_every_figure_is_within_them() -> None:
    result = Result(steps={1: [step(1_000), step(100_000, p99=9.9)]}, reopen={1: 2500.0})
    result.failover = Failover(30_000, 10_000, 1_000, 4.0, 3.5, 0)
    assert all(b.verdict == "PASS" for b in bars(result)) and passed(result)


@pytest.mark.parametrize(
    ("result", "failing"),
    [
        (Result(steps={1: [step(1_000), step(5_000, rate=1999.0)]}), "creation"),
        (Result(steps={3: [step(1_000), step(5_000, kib=8.1)]}), "RSS per idle topic"),
        (Result(steps={1: [step(1_000, p99=5.0), step(5_000, p99=10.1)]}), "produce p99"),
        (Result(reopen={1: 79.0}), "reopening after a restart"),
        (Result(failover=Failover(30_000, 10_000, 1_000, 15.1, 9.0, 0)), "failover"),
        (Result(failover=Failover(30_000, 10_000, 1_000, math.nan, math.nan, 3)), "failover"),
    ],
)
def test_a_figure_past_its_bar_fails(result: Result, failing: str) -> None:
    failed = [b.name for b in bars(result) if b.verdict == "**FAIL**"]
    assert any(name.startswith(failing) for name in failed), failed
    assert not passed(result)


def test_p99_ratio_is_not_judged_with_a_single_step() -> None:
    only = [b for b in bars(Result(steps={1: [step(1_000)]})) if b.name.startswith("produce p99")]
    assert only[0].verdict == "n/a"


def test_report_is_a_markdown_table_per_configuration_and_the_bars() -> None:
    result = Result(steps={1: [step(1_000)], 3: [step(1_000)]}, reopen={1: 100.0})
    result.failover = Failover(6_000, 2_000, 100, math.nan, math.nan, 5)
    text = report(result)
    assert "#### 1 broker (SQLite" in text and "#### 3 brokers (PostgreSQL" in text
    assert "| 1,000 | 3,000 | 100 MiB | 4.0 KiB | 1.0 / 5.0 ms | 10.0 ms | 2.0 ms |" in text
    assert "| — s | — s | — | 5 |" in text  # not served within the bound: no time, the count
    assert text.count("| **FAIL** |") >= 2
