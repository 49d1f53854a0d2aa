"""`python -m bench.chaos [--seconds N] [--seed S]`, what `make chaos` runs.

Exit status: 0 when the checker found no violation, 1 when it found one, 2 when the campaign
could not run (the cluster did not start, say)."""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import json
import os
import signal
import sys
from pathlib import Path
from types import FrameType

from bench.chaos.campaign import CampaignConfig, env_seed, run_campaign
from bench.chaos.faults import KINDS, FaultConfig


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m bench.chaos", description=__doc__)
    p.add_argument(
        "--seconds", type=float, default=float(os.environ.get("CHAOS_S", 180)), help="seconds of load"
    )
    p.add_argument(
        "--seed", type=int, default=env_seed(), help="fault and load seed (default: CHAOS_SEED or random)"
    )
    p.add_argument(
        "--bookies", type=int, default=4, help="bookies (ledgers are 3/2/2; the fourth is a spare)"
    )
    p.add_argument(
        "--kinds", default=",".join(KINDS),
        help="comma-separated fault kinds to draw from (default: all): " + ", ".join(KINDS),
    )  # fmt: skip
    p.add_argument("--brokers", type=int, default=3)
    p.add_argument(
        "--links", choices=("proxy", "netns"), default="proxy",
        help="how a bookie's links are cut: its proxy, or its network namespace (root; docs/chaos.md)",
    )  # fmt: skip
    p.add_argument(
        "--in-order", action="store_true",
        help="the first round of faults in the order --kinds names them (later rounds shuffled, "
        "compound kinds first)",
    )  # fmt: skip
    p.add_argument(
        "--gap-s", type=float, nargs=2, default=FaultConfig().gap_s, metavar=("MIN", "MAX"),
        help="pause between a fault's recovery and the next fault (seconds, drawn uniformly)",
    )  # fmt: skip
    p.add_argument("--keep", action="store_true", help="keep the temporary directory (logs) at the end")
    p.add_argument(
        "--logs-on-failure", type=Path, default=os.environ.get("CHAOS_LOGS") or None,
        help="when the campaign fails, copy the processes' logs and the history here (CHAOS_LOGS)",
    )  # fmt: skip
    p.add_argument("--json", type=Path, help="also write the figures and violation counts to this file")
    return p


def _interrupt(signum: int, frame: FrameType | None) -> None:
    raise KeyboardInterrupt  # the campaign's cleanup runs as for Ctrl-C


def main() -> None:
    args = _parser().parse_args()
    signal.signal(signal.SIGTERM, _interrupt)
    base = CampaignConfig()
    config = dataclasses.replace(
        base,
        seconds=args.seconds,
        seed=args.seed,
        keep=args.keep or os.environ.get("CHAOS_KEEP") == "1",
        logs_on_failure=args.logs_on_failure,
        cluster=dataclasses.replace(
            base.cluster, bookies=args.bookies, brokers=args.brokers, links=args.links
        ),
        faults=dataclasses.replace(
            base.faults,
            gap_s=tuple(args.gap_s),
            kinds=tuple(k for k in args.kinds.split(",") if k),
            in_order=args.in_order,
        ),
    )
    try:
        outcome = asyncio.run(run_campaign(config))
    except Exception as exc:
        print(f"chaos: the campaign could not run: {type(exc).__name__}: {exc}", file=sys.stderr)
        raise SystemExit(2) from exc
    if args.json is not None:
        args.json.write_text(json.dumps(outcome.figures, indent=2))
    raise SystemExit(1 if outcome.verdict.failed else 0)


if __name__ == "__main__":
    main()
