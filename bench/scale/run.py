"""The phases of `make bench-scale`: topics created in steps with the figures at each step, a
restart and the reopening of every topic, and the kill -9 of one of three brokers."""

from __future__ import annotations

import asyncio
import math
import statistics
import sys
import time

import httpx

from bench.scale import load
from bench.scale.plan import Failover, Plan, Step
from bench.scale.stacks import Brokers, Standalone

PRODUCER_INTERVAL_S = 0.5  # each producer sends one message, waits for the answer, then this
RETRY_S = 0.05


def progress(msg: str) -> None:
    print(f"[bench-scale {time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


async def steps(stack: Standalone | Brokers, plan: Plan, label: str) -> list[Step]:
    """Create topics up to each step; measure at each. Topic 0 is the active one."""
    out: list[Step] = []
    bases = stack.bases
    async with load.client(plan.concurrency) as c:
        await load.produce(c, bases[0], load.topic_name(0))
        rss0 = await load.settle_rss(stack.pids(), plan.repeats)
        made = 1
        for target in plan.steps:
            progress(f"{label}: creating topics {made:,}..{target:,}")
            rate = await load.produce_all(
                c, bases, [load.topic_name(i) for i in range(made, target)], plan.concurrency
            )
            made = max(made, target)
            names = [load.topic_name(i) for i in range(1, made)] or [load.topic_name(0)]
            rss = await load.settle_rss(stack.pids(), plan.repeats)
            runs = [
                await load.latencies(c, bases[0], load.topic_name(0), plan.samples)
                for _ in range(plan.repeats)
            ]
            step = Step(
                topics=target,
                create_rate=rate,
                rss_mib=rss,
                kib_per_topic=(rss - rss0) * 1024 / target,
                p50_ms=statistics.median(r[0] for r in runs),
                p99_ms=statistics.median(r[1] for r in runs),
                list_ms=await load.list_ms(c, bases[0], target, plan.repeats),
                stats_ms=await load.stats_ms(c, bases[0], names, plan.repeats),
            )
            progress(f"{label}: {step}")
            out.append(step)
    return out


async def reopen(stack: Standalone, plan: Plan) -> float:
    """Restart the standalone; the rate at which every topic takes a message again."""
    stack.restart()
    async with load.client(plan.concurrency) as c:
        return await load.produce_all(
            c, stack.bases, [load.topic_name(i) for i in range(plan.steps[-1])], plan.concurrency
        )


async def _until_served(
    c: httpx.AsyncClient, bases: list[str], topic: str, t0: float, deadline: float
) -> float:
    """Produce to `topic` (through the survivors in turn) until it is acknowledged; the seconds
    since `t0` of that acknowledgement, NaN past `deadline`."""
    i = 0
    while time.monotonic() < deadline:
        try:
            await load.produce(c, bases[i % len(bases)], topic, retries=0)
            return time.monotonic() - t0
        except (httpx.HTTPError, RuntimeError, OSError):
            i += 1
            await asyncio.sleep(RETRY_S)
    return math.nan


async def failover(stack: Brokers, plan: Plan) -> Failover:
    n = plan.failover_topics
    topics = [load.topic_name(i) for i in range(n)]
    async with load.client(plan.concurrency) as setup:
        progress(f"failover: creating {n:,} topics over 3 brokers")
        await load.produce_all(setup, stack.bases, topics, plan.concurrency)
        held = await load.owners(setup, stack.bases[0], topics, plan.concurrency)
    progress(f"failover: topics per broker {sorted(len(v) for v in held.values())}")
    victim = min(held, key=lambda b: abs(len(held[b]) - n / 3))
    victim_topics = held[victim]
    busy = victim_topics[: plan.producers]
    survivors = [b for b in stack.bases if b != victim]
    acked: dict[str, float] = {}  # producer topic -> seconds from the kill to its first ack after it
    kill_at: list[float] = []
    stop = asyncio.Event()
    # 1,000 producers share a pool: the answer time includes the wait for a connection.
    async with load.client(max(plan.concurrency, 64)) as c:

        async def producer(topic: str, k: int) -> None:
            while not stop.is_set():
                sent = time.monotonic()
                try:
                    await load.produce(c, survivors[k % len(survivors)], topic, retries=0)
                    if kill_at and sent >= kill_at[0] and topic not in acked:
                        acked[topic] = time.monotonic() - kill_at[0]
                    await asyncio.sleep(PRODUCER_INTERVAL_S)
                except (httpx.HTTPError, RuntimeError, OSError):
                    k += 1
                    await asyncio.sleep(RETRY_S)

        tasks = [asyncio.create_task(producer(t, k)) for k, t in enumerate(busy)]
        try:
            await asyncio.sleep(2.0)  # producers running
            progress(
                f"failover: kill -9 of {victim} ({len(victim_topics):,} topics, {len(busy):,} producers)"
            )
            t0 = time.monotonic()
            kill_at.append(t0)
            stack.kill9(victim)
            deadline = t0 + plan.failover_timeout_s
            sem = asyncio.Semaphore(plan.concurrency)

            async def sweep(topic: str) -> float:
                async with sem:
                    return await _until_served(c, survivors, topic, t0, deadline)

            served = await asyncio.gather(*(sweep(t) for t in victim_topics))
            while len(acked) < len(busy) and time.monotonic() < deadline:
                await asyncio.sleep(RETRY_S)
        finally:
            stop.set()
            await asyncio.wait(tasks, timeout=load.REQUEST_TIMEOUT_S + 5)
            for t in tasks:
                t.cancel()
    unserved = sum(1 for s in served if math.isnan(s))
    return Failover(
        topics=n,
        victim_topics=len(victim_topics),
        producers=len(busy),
        all_served_s=math.nan if unserved else max(served, default=0.0),
        producers_acked_s=max(acked.values(), default=0.0) if len(acked) == len(busy) else math.nan,
        unserved=unserved,
    )
