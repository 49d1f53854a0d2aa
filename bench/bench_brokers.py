"""`make bench-brokers`: several Quire brokers in front of one bookie (issue 10), measured in one
run on this machine and printed as markdown tables of medians and ratios.

Every stack is one bookie and N brokers (1/1/1 ledgers) sharing one PostgreSQL metadata store,
each stack in a fresh schema (`bench.brokers_stack`); brokers keep the default lease and
heartbeat. The client is one process of asyncio workers (`bench.brokers_client`).

1. Throughput with 1, 2 and 3 brokers. The three stacks are up at once (idle brokers only renew
   their leases) and the measurements interleave: each round runs every row on the three
   stacks back to back (in a rotating order), the rates are the medians of the rounds and a
   ratio to 1 broker is the median of the rounds' ratios, so that it compares figures taken
   under the same load of the (shared) machine. A row is a
   produce phase (WORKERS workers, each POSTing batches of BATCH messages of 100 B for the
   round's duration) and then a consume phase (as many workers on one shared subscription,
   each receiving up to MAX_MESSAGES and acking them, until the backlog is drained or a cap).
   Workers are spread over the stack's brokers (worker i starts at broker i mod N).
   - naive, 6-partition topic: one partitioned topic is owned as a whole by one broker (the
     unit of ownership is the topic the REST path names), so a worker whose broker is not the
     owner is redirected (307) on every request, and follows.
   - smart, 6-partition topic: each worker looks the owner up once (as Pulsar clients do) and
     sends to it; every request lands on the owner.
   - smart, 6 topics: six non-partitioned topics, one per worker, placed by lookup (the lookups
     go through the workers' brokers, as a fleet of clients would do them); this is where more
     brokers can share the work.
2. Cost of a redirect: a 1-message produce to the owner and the same to a non-owner, the client
   following the 307, alternated over many samples on keep-alive connections.
3. Failover: a client produces through a non-owner in a loop (following 307s, retrying on 503
   and connection errors); the owner is killed with -9; the time from the kill to the first
   successful produce sent after it. Then a replacement broker joins, for the next trial.

Reading the figures: the bookie, PostgreSQL, every broker and the client share the machine's
cores (and whatever colleagues run), so more brokers cannot add CPU here; the issue's bar is
no loss from 1 to 2 brokers. The client's own CPU share is printed to show what it takes.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import statistics
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path

import orjson

from app.settings import Settings
from bench.bench_api import bounded, progress
from bench.brokers_client import TOPIC_PATH, TRANSIENT, Client, lookup, put
from bench.brokers_stack import BrokerStack, broker_stack, postgres_problem
from bench.common import pct

BROKER_COUNTS = (1, 2, 3)
WORKERS = 6  # producers, and as many consumers: divisible by every broker count
PARTITIONS = 6
BATCH = 100
VALUE = "x" * 100
MAX_MESSAGES = 1000
WAIT_MS = 100
SUBSCRIPTION = "bench"
PARTITIONED = "p6"
REQUEST_TIMEOUT_S = 10.0
RETRY_S = 0.02  # pause after an error answer or a broken connection (not the 503's Retry-After)
REDIRECT_WARMUP = 50
FAILOVER_WARMUP = 20  # successful produces before the kill
FAILOVER_TIMEOUT_S = 60.0
PHASE_SLACK_S = 60.0
ROWS = ("naive", "smart", "topics")
ROW_NAMES = {
    "naive": "6-partition topic, naive clients (follow 307)",
    "smart": "6-partition topic, smart clients (lookup once)",
    "topics": "6 topics, smart clients",
}


@dataclass(frozen=True)
class Plan:
    rounds: int
    duration_s: float  # of each produce phase
    consume_cap_s: float
    samples: int  # redirect latency samples per path
    trials: int  # failover trials


FULL = Plan(rounds=5, duration_s=3.0, consume_cap_s=10.0, samples=800, trials=5)
QUICK = Plan(rounds=1, duration_s=1.0, consume_cap_s=5.0, samples=100, trials=1)


def median(xs: list[float]) -> float:
    return statistics.median(xs) if xs else float("nan")


# --- one phase -----------------------------------------------------------------------------------
Work = Callable[[Client, str, str], Awaitable[None]]  # one worker: (its client, base URL, topic)


@dataclass
class Phase:
    """What the workers of one phase did."""

    messages: int = 0
    errors: Counter[str] = field(default_factory=Counter)
    requests: int = 0
    redirects: int = 0
    elapsed_s: float = 0.0
    cpu: float = 0.0  # the client process's CPU time over the phase, as a share of one core
    done_at: float = 0.0

    @property
    def rate(self) -> float:
        return self.messages / self.elapsed_s if self.elapsed_s else 0.0


def error_kind(exc: BaseException) -> str:
    if isinstance(exc, ConnectionRefusedError):
        return "connection refused"
    if isinstance(exc, TimeoutError):
        return "no answer in time"
    if isinstance(exc, OSError):
        return "connection reset"
    return "connection closed mid-answer"  # EOF, a short read or an empty status line


async def attempt(client: Client, method: str, url: str, body: bytes, phase: Phase) -> bytes | None:
    """One call; its body when it succeeded, else None (counted, after a short pause)."""
    try:
        status, data = await client.call(method, url, body)
    except TRANSIENT as exc:
        phase.errors[error_kind(exc)] += 1
        await asyncio.sleep(RETRY_S)
        return None
    if status not in (200, 204):
        phase.errors[f"HTTP {status}"] += 1
        await asyncio.sleep(RETRY_S)
        return None
    return data


async def run_workers(targets: list[tuple[str, str]], phase: Phase, work: Work) -> Phase:
    """Run `work(client, base, topic)` for every (base, topic), timing the phase and the CPU."""
    clients = [Client(REQUEST_TIMEOUT_S) for _ in targets]
    cpu, started = time.process_time(), time.perf_counter()
    try:
        await asyncio.gather(*(work(c, b, t) for c, (b, t) in zip(clients, targets, strict=True)))
    finally:
        for c in clients:
            c.close()
    ended = phase.done_at or time.perf_counter()
    phase.elapsed_s = ended - started
    phase.cpu = (time.process_time() - cpu) / (time.perf_counter() - started)
    phase.requests = sum(c.requests for c in clients)
    phase.redirects = sum(c.redirects for c in clients)
    return phase


async def produce(targets: list[tuple[str, str]], duration_s: float) -> Phase:
    body = orjson.dumps({"messages": [{"value": VALUE}] * BATCH})
    phase = Phase()
    deadline = time.perf_counter() + duration_s

    async def work(client: Client, base: str, topic: str) -> None:
        url = f"{base}{TOPIC_PATH}/{topic}/messages"
        while time.perf_counter() < deadline:
            if await attempt(client, "POST", url, body, phase) is not None:
                phase.messages += BATCH

    return await run_workers(targets, phase, work)


async def consume(targets: list[tuple[str, str]], backlog: int, cap_s: float) -> Phase:
    """Receive and ack until `backlog` messages were acked (or cap_s passed)."""
    phase = Phase()
    deadline = time.perf_counter() + cap_s

    async def work(client: Client, base: str, topic: str) -> None:
        sub = f"{base}{TOPIC_PATH}/{topic}/subscriptions/{SUBSCRIPTION}"
        receive = f"{sub}/messages?max_messages={MAX_MESSAGES}&wait_ms={WAIT_MS}"
        while phase.messages < backlog and time.perf_counter() < deadline:
            got = await attempt(client, "GET", receive, b"", phase)
            if got is None:
                continue
            ids = [m["message_id"] for m in orjson.loads(got)["messages"]]
            if not ids:
                continue
            ack = orjson.dumps({"message_ids": ids})
            if await attempt(client, "POST", f"{sub}/ack", ack, phase) is not None:
                phase.messages += len(ids)
                if phase.messages >= backlog and not phase.done_at:
                    phase.done_at = time.perf_counter()

    return await run_workers(targets, phase, work)


# --- 1. throughput with 1, 2 and 3 brokers -------------------------------------------------------
@dataclass
class Setup:
    """One stack's rows: per row, each worker's (first broker, topic); who owns what."""

    targets: dict[str, list[tuple[str, str]]]
    owners: dict[str, list[str]]  # topic -> owner URL (for the tables)
    brokers: list[str]


def prepare(stack: BrokerStack) -> Setup:
    """The topics and subscriptions of the rows, and each worker's targets."""
    bases = list(stack.brokers)
    entry = [bases[i % len(bases)] for i in range(WORKERS)]
    sub = {"initial_position": "earliest", "type": "shared"}
    topics = [f"t{i}" for i in range(WORKERS)]
    owners: dict[str, list[str]] = {}
    for i, topic in enumerate(topics):  # placed first, so that they spread over empty brokers
        owners[topic] = [lookup(entry[i], topic)]
        put(entry[i], f"/admin/v2/persistent/public/default/{topic}", None)
        put(entry[i], f"{TOPIC_PATH}/{topic}/subscriptions/{SUBSCRIPTION}", sub)
    put(bases[0], f"/admin/v2/persistent/public/default/{PARTITIONED}/partitions", PARTITIONS)
    put(bases[0], f"{TOPIC_PATH}/{PARTITIONED}/subscriptions/{SUBSCRIPTION}", sub)
    smart = [lookup(entry[i], PARTITIONED) for i in range(WORKERS)]
    owners[PARTITIONED] = sorted(set(smart))
    targets = {
        "naive": [(entry[i], PARTITIONED) for i in range(WORKERS)],
        "smart": [(smart[i], PARTITIONED) for i in range(WORKERS)],
        "topics": [(owners[t][0], t) for t in topics],
    }
    return Setup(targets, owners, bases)


@dataclass
class Throughput:
    produce: dict[tuple[int, str], list[Phase]] = field(default_factory=dict)
    consume: dict[tuple[int, str], list[Phase]] = field(default_factory=dict)
    setups: dict[int, Setup] = field(default_factory=dict)

    def rate(self, op: str, n: int, row: str) -> float:
        phases = (self.produce if op == "produce" else self.consume)[(n, row)]
        return median([p.rate for p in phases])

    def ratio(self, op: str, n: int, row: str) -> float:
        """Against 1 broker: the median of the rounds' ratios (a round's rows ran back to back,
        so a ratio pairs figures taken under the same load of the machine)."""
        runs = self.produce if op == "produce" else self.consume
        return median(
            [a.rate / b.rate for a, b in zip(runs[(n, row)], runs[(1, row)], strict=True) if b.rate]
        )


def run_row(t: Throughput, n: int, row: str, plan: Plan, backlog: dict[tuple[int, str], int]) -> None:
    targets = t.setups[n].targets[row]
    key = (n, "p" if row != "topics" else "t")  # the naive and smart rows share one subscription
    what = f"{n} broker(s), {row}"
    p = bounded(produce(targets, plan.duration_s), plan.duration_s + PHASE_SLACK_S, f"produce, {what}")
    backlog[key] += p.messages
    c = bounded(consume(targets, backlog[key], plan.consume_cap_s), plan.consume_cap_s + PHASE_SLACK_S, what)
    backlog[key] -= c.messages
    t.produce.setdefault((n, row), []).append(p)
    t.consume.setdefault((n, row), []).append(c)
    errors = dict(p.errors + c.errors) or "none"
    progress(
        f"  {what}: produce {p.rate:,.0f} msg/s, consume {c.rate:,.0f} msg/s "
        f"({c.elapsed_s:.1f} s, {backlog[key]:,} left), errors: {errors}"
    )


def throughput(tmp: Path, plan: Plan) -> Throughput:
    t = Throughput()
    stacks: dict[int, BrokerStack] = {}
    try:
        for n in BROKER_COUNTS:
            progress(f"stack of {n} broker(s) + 1 bookie on PostgreSQL")
            stacks[n] = broker_stack(tmp / f"tp{n}", n)
        for n in BROKER_COUNTS:
            t.setups[n] = prepare(stacks[n])
        backlog = {(n, k): 0 for n in BROKER_COUNTS for k in ("p", "t")}
        for r in range(plan.rounds):
            progress(f"round {r + 1}/{plan.rounds}")
            for i, row in enumerate(ROWS):  # a row on every stack back to back, in a rotating order
                k = (r + i) % len(BROKER_COUNTS)
                for n in BROKER_COUNTS[k:] + BROKER_COUNTS[:k]:
                    run_row(t, n, row, plan, backlog)
    finally:
        for stack in stacks.values():
            stack.close()
    return t


# --- 2. the cost of a redirect -------------------------------------------------------------------
async def redirect_samples(
    owner: str, other: str, topic: str, samples: int
) -> tuple[list[float], list[float]]:
    """Latency (ms) of a 1-message produce sent to the owner, and sent to `other` (redirected),
    alternating which goes first; both on the same client's keep-alive connections."""
    client = Client(REQUEST_TIMEOUT_S)
    body = orjson.dumps({"messages": [{"value": VALUE}]})
    direct: list[float] = []
    redirected: list[float] = []
    try:
        for i in range(REDIRECT_WARMUP + samples):
            pair = ((owner, direct), (other, redirected))
            for base, out in pair if i % 2 == 0 else pair[::-1]:
                started = time.perf_counter()
                status, data = await client.call("POST", f"{base}{TOPIC_PATH}/{topic}/messages", body)
                took = (time.perf_counter() - started) * 1000
                if status != 200:
                    raise RuntimeError(f"produce through {base} answered {status}: {data[:300]!r}")
                if i >= REDIRECT_WARMUP:
                    out.append(took)
        if client.redirects != REDIRECT_WARMUP + samples:
            raise RuntimeError(f"{client.redirects} redirects followed, {REDIRECT_WARMUP + samples} expected")
    finally:
        client.close()
    return direct, redirected


def redirect_cost(stack: BrokerStack, plan: Plan) -> dict[str, float]:
    bases = list(stack.brokers)
    topic = "redirect"
    owner = lookup(bases[0], topic)
    other = next(b for b in bases if b != owner)
    progress(f"redirect cost: {plan.samples} produces to the owner and as many through a non-owner")
    timeout = plan.samples * 2 * REQUEST_TIMEOUT_S
    direct, redirected = bounded(redirect_samples(owner, other, topic, plan.samples), timeout, "redirect")
    return {
        "direct_p50": median(direct),
        "direct_p90": pct(direct, 90),
        "redirected_p50": median(redirected),
        "redirected_p90": pct(redirected, 90),
    }


# --- 3. failover after kill -9 of the owner ------------------------------------------------------
@dataclass
class Trial:
    seconds: float
    errors: Counter[str]
    via: str
    killed: str
    new_owner: str


async def failover_loop(stack: BrokerStack, owner: str, via: str, topic: str) -> tuple[float, Counter[str]]:
    """Produce through `via` in a loop; after FAILOVER_WARMUP successes kill `owner` with -9;
    seconds from the kill to the first success of a request sent after it."""
    client = Client(REQUEST_TIMEOUT_S / 2)
    body = orjson.dumps({"messages": [{"value": VALUE}]})
    url = f"{via}{TOPIC_PATH}/{topic}/messages"
    phase = Phase()
    ok, killed_at = 0, 0.0
    try:
        while True:
            if not killed_at and ok >= FAILOVER_WARMUP:
                killed_at = time.perf_counter()
                stack.kill9_broker(owner)
                phase.errors.clear()
            sent = time.perf_counter()
            if killed_at and sent - killed_at > FAILOVER_TIMEOUT_S:
                return float("inf"), phase.errors
            if await attempt(client, "POST", url, body, phase) is None:
                continue
            ok += 1
            if killed_at and sent >= killed_at:
                return time.perf_counter() - killed_at, phase.errors
    finally:
        client.close()


def failover(stack: BrokerStack, plan: Plan) -> list[Trial]:
    topic = "failover"
    trials = []
    for i in range(plan.trials):
        bases = list(stack.brokers)
        owner = lookup(bases[0], topic)
        via = next(b for b in bases if b != owner)
        progress(f"failover trial {i + 1}/{plan.trials}: kill -9 of {owner}, producing through {via}")
        seconds, errors = bounded(
            failover_loop(stack, owner, via, topic), FAILOVER_TIMEOUT_S + PHASE_SLACK_S, "failover"
        )
        trials.append(Trial(seconds, errors, via, owner, lookup(via, topic)))
        progress(f"  {seconds:.2f} s; errors seen: {dict(errors)}")
        stack.start_broker()  # the replacement, so that every trial starts with as many brokers
        stack.settle()
    return trials


# --- the tables ----------------------------------------------------------------------------------
def verdict(ok: bool) -> str:
    return "ok" if ok else "MISSED"


def loss_verdict(r: float) -> str:
    """The bar is no loss; a dip inside 5 % is reported as noise rather than as a pass."""
    return "ok" if r >= 1.0 else ("within 5 % (noise?)" if r >= 0.95 else "MISSED")


def throughput_table(t: Throughput, plan: Plan) -> list[str]:
    out = [
        f"### Throughput, aggregate msg/s (median of {plan.rounds} round(s); produce phases of "
        f"{plan.duration_s:g} s; {WORKERS} producers + {WORKERS} consumers spread over the brokers; "
        "2/1 and 3/1: median of the rounds' ratios)",
        "",
        "| workload | op | 1 broker | 2 brokers | 3 brokers | 2/1 | 3/1 |",
        "|---|---|---:|---:|---:|---:|---:|",
    ]
    for row in ROWS:
        for op in ("produce", "consume"):
            cells = " | ".join(f"{t.rate(op, n, row):,.0f}" for n in BROKER_COUNTS)
            ratios = " | ".join(f"{t.ratio(op, n, row):.2f}x" for n in BROKER_COUNTS[1:])
            out.append(f"| {ROW_NAMES[row]} | {op} | {cells} | {ratios} |")
    out += ["", "| per stack | 1 broker | 2 brokers | 3 brokers |", "|---|---|---|---|"]
    out.append(
        "| requests redirected, naive row | " + " | ".join(_redirected(t, n) for n in BROKER_COUNTS) + " |"
    )
    out.append(
        "| owner of the 6-partition topic | " + " | ".join(_p_owner(t, n) for n in BROKER_COUNTS) + " |"
    )
    out.append("| 6 topics per broker | " + " | ".join(_spread(t, n) for n in BROKER_COUNTS) + " |")
    out.append(
        "| client CPU, median share of one core | " + " | ".join(_cpu(t, n) for n in BROKER_COUNTS) + " |"
    )
    out.append("| errors seen by the clients | " + " | ".join(_errors(t, n) for n in BROKER_COUNTS) + " |")
    return out


def _stack_phases(t: Throughput, n: int, row: str | None = None) -> list[Phase]:
    return [
        p
        for (m, r), ps in (*t.produce.items(), *t.consume.items())
        if m == n and row in (None, r)
        for p in ps
    ]


def _redirected(t: Throughput, n: int) -> str:
    phases = _stack_phases(t, n, "naive")
    return f"{sum(p.redirects for p in phases) / max(1, sum(p.requests for p in phases)):.0%}"


def _p_owner(t: Throughput, n: int) -> str:
    s = t.setups[n]
    return ", ".join(f"broker {s.brokers.index(o) + 1}" for o in s.owners[PARTITIONED])


def _spread(t: Throughput, n: int) -> str:
    s = t.setups[n]
    counts = Counter(s.owners[f"t{i}"][0] for i in range(WORKERS))
    return " + ".join(str(counts[b]) for b in s.brokers)


def _cpu(t: Throughput, n: int) -> str:
    return f"{median([p.cpu for p in _stack_phases(t, n)]):.0%}"


def _errors(t: Throughput, n: int) -> str:
    total: Counter[str] = Counter()
    for p in _stack_phases(t, n):
        total += p.errors
    return ", ".join(f"{k}: {v}" for k, v in sorted(total.items())) or "none"


def redirect_table(r: dict[str, float], plan: Plan) -> list[str]:
    return [
        f"### Cost of a redirect (1-message produce, {plan.samples} samples per path, alternated)",
        "",
        "| path | median ms | p90 ms |",
        "|---|---:|---:|",
        f"| to the owner | {r['direct_p50']:.2f} | {r['direct_p90']:.2f} |",
        f"| to a non-owner, following the 307 | {r['redirected_p50']:.2f} | {r['redirected_p90']:.2f} |",
        f"| added by the redirect | {r['redirected_p50'] - r['direct_p50']:.2f} | "
        f"{r['redirected_p90'] - r['direct_p90']:.2f} |",
    ]


def failover_table(trials: list[Trial], lease_ms: int, heartbeat_ms: int) -> list[str]:
    out = [
        f"### Failover after kill -9 of the owner (default lease {lease_ms} ms, heartbeat {heartbeat_ms} ms)",
        "",
        "| trial | kill to first produce, s | x lease | what the client saw meanwhile |",
        "|---:|---:|---:|---|",
    ]
    for i, tr in enumerate(trials, 1):
        seen = ", ".join(f"{k}: {v}" for k, v in sorted(tr.errors.items())) or "nothing"
        new = "the broker it produced through" if tr.new_owner == tr.via else "a third broker"
        out.append(
            f"| {i} | {tr.seconds:.2f} | {tr.seconds * 1000 / lease_ms:.2f} | {seen}; new owner: {new} |"
        )
    s = [tr.seconds for tr in trials]
    out.append(f"| median | {median(s):.2f} | {median(s) * 1000 / lease_ms:.2f} | |")
    out.append(f"| max | {max(s):.2f} | {max(s) * 1000 / lease_ms:.2f} | |")
    return out


def bars_table(t: Throughput, r: dict[str, float], trials: list[Trial], lease_ms: int) -> list[str]:
    out = ["### Bars", "", "| figure | bar | verdict |", "|---|---|---|"]
    for row in ROWS:
        for op in ("produce", "consume"):
            x = t.ratio(op, 2, row)
            figure = f"{ROW_NAMES[row]}, {op}: 2 brokers / 1 = {x:.2f}x"
            out.append(f"| {figure} | no loss (>= 1.00x) | {loss_verdict(x)} |")
    added = r["redirected_p50"] - r["direct_p50"]
    out.append(f"| redirect adds {added:.2f} ms (median) | < 1 ms | {verdict(added < 1.0)} |")
    s = [tr.seconds for tr in trials]
    out.append(
        f"| failover median {median(s):.2f} s | < 2 x lease = {2 * lease_ms / 1000:g} s | "
        f"{verdict(median(s) < 2 * lease_ms / 1000)} |"
    )
    out.append(f"| failover max {max(s):.2f} s | < 10 s | {verdict(max(s) < 10)} |")
    return out


def report(t: Throughput, r: dict[str, float], trials: list[Trial], plan: Plan, quick: bool) -> str:
    lease_ms = int(Settings.model_fields["broker_lease_ms"].default)
    heartbeat_ms = int(Settings.model_fields["broker_heartbeat_interval_ms"].default)
    head = [
        f"## Quire with several brokers{' (--quick)' if quick else ''}",
        "",
        f"One run on this machine ({os.cpu_count()} cores, shared with whatever else runs on it): "
        "1 bookie and N brokers (1 uvicorn worker each), ledgers at 1/1/1, one PostgreSQL metadata "
        f"store; messages of 100 B, produced in batches of {BATCH}, received up to {MAX_MESSAGES} "
        "per request and acked by id; one client process of asyncio workers.",
    ]
    parts = [
        head,
        throughput_table(t, plan),
        redirect_table(r, plan),
        failover_table(trials, lease_ms, heartbeat_ms),
    ]
    parts.append(bars_table(t, r, trials, lease_ms))
    return "\n\n".join("\n".join(p) for p in parts) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument(
        "--quick", action="store_true", help="one short round, few samples, one failover trial"
    )
    args = parser.parse_args()
    plan = QUICK if args.quick else FULL
    problem = postgres_problem()
    if problem is not None:
        sys.exit(f"make bench-brokers needs a PostgreSQL metadata store: {problem}")
    for name in ("QUIRE_BROKER_LEASE_MS", "QUIRE_BROKER_HEARTBEAT_INTERVAL_MS"):
        if os.environ.pop(name, None) is not None:
            progress(f"ignoring {name}: the failover figures are for the default lease")
    tmp = Path(tempfile.mkdtemp(prefix="quire-bench-brokers-"))
    try:
        t = throughput(tmp, plan)
        progress("stack of 3 brokers + 1 bookie for the redirect and failover figures")
        with broker_stack(tmp / "failover", 3) as stack:
            r = redirect_cost(stack, plan)
            trials = failover(stack, plan)
        print(report(t, r, trials, plan, args.quick))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
