"""`python -m bench.scale [--max-topics N --steps a,b,c --brokers 1,3 ...]`: the tables on stdout,
progress on stderr; exit status 1 when a bar fails (or a phase could not finish)."""

from __future__ import annotations

import asyncio
import contextlib
import sys
import tempfile
from pathlib import Path

from bench.brokers_stack import postgres_problem
from bench.scale import load, run
from bench.scale.plan import Result, parse, passed, report
from bench.scale.stacks import Brokers, Standalone


def measure(argv: list[str] | None = None) -> Result:
    plan = parse(argv)
    result = Result()
    if 3 in plan.brokers and (problem := postgres_problem()):
        raise SystemExit(problem)
    with contextlib.ExitStack() as keep:
        tmp = plan.logs or keep.enter_context(tempfile.TemporaryDirectory(prefix="quire-bench-scale-"))
        if 1 in plan.brokers:
            run.progress("1 broker: quire standalone on SQLite")
            single = Standalone(Path(tmp) / "single")
            try:
                result.steps[1] = asyncio.run(run.steps(single, plan, "1 broker"))
                run.progress("1 broker: restart, then one message to every topic")
                result.reopen[1] = asyncio.run(run.reopen(single, plan))
            finally:
                single.close()
        if 3 in plan.brokers:
            run.progress("3 brokers: one bookie, PostgreSQL")
            three = Brokers(Path(tmp) / "three")
            try:
                result.steps[3] = asyncio.run(run.steps(three, plan, "3 brokers"))
            finally:
                three.close()
            if plan.failover_topics:
                fresh = Brokers(Path(tmp) / "failover")
                try:
                    result.failover = asyncio.run(run.failover(fresh, plan))
                finally:
                    fresh.close()
    result.retried = load.retried["count"]
    return result


def main(argv: list[str] | None = None) -> int:
    result = measure(argv)
    print(report(result))
    return 0 if passed(result) else 1


if __name__ == "__main__":
    sys.exit(main())
