"""The requests `make bench-scale` makes, over the public REST API only (so it measures any
ownership scheme behind it): create topics by producing one message each, many in flight;
produce latency to one active topic; namespace listing; topic stats; each figure the median of
repeated measurements. Every request follows the 307 to a topic's owner."""

from __future__ import annotations

import asyncio
import contextlib
import statistics
import time
from collections.abc import Sequence

import httpx
import psutil

from bench.common import pct

NS = "public/default"
TOPICS = f"/v1/topics/{NS}"
ADMIN = f"/admin/v2/persistent/{NS}"
LOOKUP = f"/lookup/v2/topic/persistent/{NS}"
BODY = {"messages": [{"value": "x" * 32}]}
REQUEST_TIMEOUT_S = 30.0


def topic_name(i: int) -> str:
    return f"t-{i:06d}"


def client(concurrency: int) -> httpx.AsyncClient:
    limits = httpx.Limits(max_connections=concurrency, max_keepalive_connections=concurrency)
    timeout = httpx.Timeout(REQUEST_TIMEOUT_S, pool=None)  # queued requests wait for a connection
    return httpx.AsyncClient(limits=limits, timeout=timeout, follow_redirects=True)


RETRYABLE = (429, 503)  # "topic moved; retry", "overloaded": a client retries (and on a reset)
RETRIES = 50
RETRY_DELAY_S = 0.05
retried = {"count": 0}  # 503/429 answers and broken connections retried, over the whole run (reported)


async def produce(c: httpx.AsyncClient, base: str, topic: str, retries: int = RETRIES) -> None:
    """One message to `topic`; a 503 or 429 is retried (bounded), as a client does."""
    r: httpx.Response | None = None
    for attempt in range(retries + 1):
        try:
            r = await c.post(f"{base}{TOPICS}/{topic}/messages", json=BODY)
        except httpx.TransportError:  # a connection the server closed under load: reconnect
            if attempt == retries:
                raise
            retried["count"] += 1
            await asyncio.sleep(RETRY_DELAY_S)
            continue
        if r.status_code == 200:
            return
        if r.status_code not in RETRYABLE or attempt == retries:
            break
        retried["count"] += 1
        await asyncio.sleep(RETRY_DELAY_S * min(attempt + 1, 10))
    assert r is not None
    raise RuntimeError(f"produce to {topic} via {base}: {r.status_code} {r.text[:300]}")


async def produce_all(
    c: httpx.AsyncClient, bases: Sequence[str], topics: Sequence[str], concurrency: int
) -> float:
    """One message to each of `topics` (creating or reopening it), `concurrency` in flight,
    spread over `bases`; the topics per second."""
    queue = iter(enumerate(topics))

    async def worker() -> None:
        for i, topic in queue:
            await produce(c, bases[i % len(bases)], topic)

    started = time.perf_counter()
    await asyncio.gather(*(worker() for _ in range(concurrency)))
    return len(topics) / (time.perf_counter() - started)


async def latencies(c: httpx.AsyncClient, base: str, topic: str, samples: int) -> tuple[float, float]:
    """p50 and p99 (ms) of `samples` produce requests one after another to `topic`."""
    times = []
    for _ in range(samples):
        started = time.perf_counter()
        await produce(c, base, topic)
        times.append((time.perf_counter() - started) * 1000)
    return pct(times, 50), pct(times, 99)


async def timed_get(c: httpx.AsyncClient, url: str) -> float:
    started = time.perf_counter()
    r = await c.get(url)
    elapsed = (time.perf_counter() - started) * 1000
    if r.status_code != 200:
        raise RuntimeError(f"GET {url}: {r.status_code} {r.text[:300]}")
    return elapsed


async def list_ms(c: httpx.AsyncClient, base: str, expect: int, repeats: int) -> float:
    r = await c.get(f"{base}{ADMIN}")
    if r.status_code != 200 or len(r.json()) < expect:
        raise RuntimeError(
            f"the namespace lists {len(r.json()) if r.status_code == 200 else r.status_code}, not {expect}"
        )
    return statistics.median([await timed_get(c, f"{base}{ADMIN}") for _ in range(repeats)])


async def stats_ms(c: httpx.AsyncClient, base: str, topics: Sequence[str], repeats: int) -> float:
    """The median time of GET stats of idle topics spread over the namespace (5 per repeat)."""
    picks = [topics[(i * 7919) % len(topics)] for i in range(5 * repeats)]
    return statistics.median([await timed_get(c, f"{base}{ADMIN}/{t}/stats") for t in picks])


async def owner(c: httpx.AsyncClient, base: str, topic: str) -> str:
    r = await c.get(f"{base}{LOOKUP}/{topic}")
    r.raise_for_status()
    return str(r.json()["httpUrl"]).rstrip("/")


async def owners(
    c: httpx.AsyncClient, base: str, topics: Sequence[str], concurrency: int
) -> dict[str, list[str]]:
    """The topics each broker owns, by its base URL, as the lookup answers."""
    sem = asyncio.Semaphore(concurrency)
    found: dict[str, list[str]] = {}

    async def one(t: str) -> None:
        async with sem:
            found.setdefault(await owner(c, base, t), []).append(t)

    await asyncio.gather(*(one(t) for t in topics))
    return found


def rss_mib(pids: Sequence[int]) -> float:
    return float(sum(psutil.Process(p).memory_info().rss for p in pids)) / 2**20


def broker_pids(supervisor: int) -> list[int]:
    """The broker child of a `quire standalone` supervisor (its pid when there is none)."""
    found = []
    for kid in psutil.Process(supervisor).children(recursive=True):
        with contextlib.suppress(psutil.Error):  # a child that exited (a zombie) has no command line
            if "broker" in kid.cmdline()[3:4]:  # python -m app.cli broker
                found.append(kid.pid)
    return found or [supervisor]


async def settle_rss(pids: Sequence[int], repeats: int) -> float:
    """The median of `repeats` RSS readings a moment apart."""
    values = []
    for _ in range(repeats):
        await asyncio.sleep(0.3)
        values.append(rss_mib(pids))
    return statistics.median(values)
