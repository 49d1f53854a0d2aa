"""Dedup under bookie crashes, with real processes: a `quire bookie` killed with -9 and restarted
on the same data directory and port every ~2 s, while careful producers (each batch retried with
the same producer name and sequence ids until the broker accepts it) write to a dedup topic.

A message the broker answered for, with a message id or as a duplicate, must be stored exactly
once; nothing may be stored twice; each producer's sequence ids keep their order. A retry whose
earlier write is still unresolved must be refused with a retriable error, never called a
duplicate (that answer would lose the message if the earlier write then fails).
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import pytest

from tests.api.conftest import Stack, start_stack
from tests.support import QuireProcess, port_open, wait_until

pytestmark = pytest.mark.process

TOPIC = "public/default/dedup-kill"
DATA = f"/v1/topics/{TOPIC}/messages"
POLICY = f"/admin/v2/persistent/{TOPIC}/deduplicationEnabled"
PRODUCERS = 4
BATCH = 10
CHAOS_S = 20.0  # how long the bookie keeps being killed
KILL_EVERY_S = 2.0
BATCH_BOUND_S = 60.0  # one batch's retries, at most
READ_BOUND_S = 60.0
HTTP_TIMEOUT = httpx.Timeout(10.0, connect=2.0)


@dataclass
class Tally:
    """What one producer was told, per sequence id."""

    name: str
    stored: list[int] = field(default_factory=list)  # answered with a message id
    duplicate: list[int] = field(default_factory=list)  # answered duplicate
    refused: Counter[str] = field(default_factory=Counter)  # problem type of each refused attempt
    unexpected: list[str] = field(default_factory=list)  # answers a careful client cannot handle


def produce_until_accepted(http: httpx.Client, tally: Tally, seqs: list[int]) -> bool:
    """One batch, retried with the same ids until a 200 (bounded); False if the bound passed."""
    body = {
        "producer_name": tally.name,
        "messages": [{"value": f"{tally.name}:{s}", "sequence_id": s} for s in seqs],
    }
    deadline = time.monotonic() + BATCH_BOUND_S
    pause = 0.02
    while time.monotonic() < deadline:
        try:
            r = http.post(DATA, json=body)
        except httpx.HTTPError:
            r = None
        if r is not None and r.status_code == 200:
            for s, result in zip(seqs, r.json()["results"], strict=True):
                if result["duplicate"]:
                    tally.duplicate.append(s)
                else:
                    tally.stored.append(s)
            return True
        if r is not None:
            tally.refused[_problem_type(r)] += 1
            if r.status_code != 503:
                tally.unexpected.append(f"{r.status_code} {r.text[:300]}")
                return False
        time.sleep(pause)
        pause = min(pause * 2, 0.5)
    tally.unexpected.append(f"batch {seqs[0]}.. not accepted within {BATCH_BOUND_S}s")
    return False


def _problem_type(r: httpx.Response) -> str:
    try:
        return str(r.json()["type"]).rsplit("/", 1)[-1]
    except (ValueError, KeyError, TypeError):
        return str(r.status_code)


def producer(base_url: str, tally: Tally, stop: threading.Event) -> None:
    with httpx.Client(base_url=base_url, timeout=HTTP_TIMEOUT) as http:
        seq = 0
        while not stop.is_set():
            if not produce_until_accepted(http, tally, list(range(seq, seq + BATCH))):
                return
            seq += BATCH


def restart_bookie(stack: Stack) -> None:
    """kill -9 the bookie, then start it again on the same data directory and port."""
    assert stack.bookie is not None
    stack.bookie.kill9()
    stack.bookie.stop()
    stack.bookie = QuireProcess(stack.bookie.args, stack.env(), stack.root / "bookie.log").start()
    bookie = stack.bookie

    def up() -> bool:
        if not bookie.alive():
            raise RuntimeError(f"bookie exited at restart:\n{bookie.log()[-3000:]}")
        return port_open(stack.bookie_port)

    wait_until(up, 60.0, "bookie restart")


def read_topic(http: httpx.Client) -> list[tuple[str, int]]:
    """(producer, sequence id) of every stored message, in topic order."""
    out: list[tuple[str, int]] = []
    start = "earliest"
    deadline = time.monotonic() + READ_BOUND_S
    while time.monotonic() < deadline:
        r = http.get(DATA, params={"start": start, "max_messages": 1000})
        assert r.status_code == 200, r.text
        page = r.json()
        if page["next"] is None:
            return out
        out.extend((m["producer_name"], m["sequence_id"]) for m in page["messages"])
        start = page["next"]
    raise TimeoutError("the reader did not reach the end of the topic")


def check(tallies: list[Tally], stored: list[tuple[str, int]]) -> list[str]:
    """Every broken rule, with its counts (empty when all hold)."""
    problems: list[str] = []
    counts = Counter(stored)
    twice = sorted(k for k, n in counts.items() if n > 1)
    if twice:
        problems.append(f"{len(twice)} (producer, sequence id) stored more than once, e.g. {twice[:5]}")
    for t in tallies:
        answered = set(t.stored) | set(t.duplicate)
        lost = sorted(s for s in answered if counts[(t.name, s)] == 0)
        if lost:
            lost_dup = [s for s in lost if s in set(t.duplicate)]
            problems.append(
                f"{t.name}: {len(lost)} of {len(answered)} answered messages not stored "
                f"({len(lost_dup)} of them answered duplicate), e.g. {lost[:5]}"
            )
        order = [s for p, s in stored if p == t.name]
        if order != sorted(order):
            problems.append(f"{t.name}: sequence ids stored out of order")
        if t.unexpected:
            problems.append(f"{t.name}: unexpected answers {t.unexpected[:3]}")
    return problems


@pytest.mark.slow
def test_dedup_loses_and_doubles_nothing_while_the_bookie_is_killed(tmp_path: Path) -> None:
    stack = start_stack(tmp_path)
    stop = threading.Event()
    threads: list[threading.Thread] = []
    try:
        with httpx.Client(base_url=stack.base_url, timeout=HTTP_TIMEOUT) as http:
            assert http.put(f"/admin/v2/persistent/{TOPIC}").status_code == 204
            assert http.post(POLICY, json=True).status_code == 204
            # Keep every ledger: with no subscription, the default retention deletes them.
            keep = {"retentionTimeInMinutes": -1, "retentionSizeInMB": -1}
            assert http.post(f"/admin/v2/persistent/{TOPIC}/retention", json=keep).status_code == 204
            tallies = [Tally(f"p{i}") for i in range(PRODUCERS)]
            threads = [
                threading.Thread(target=producer, args=(stack.base_url, t, stop), daemon=True)
                for t in tallies
            ]
            for thread in threads:
                thread.start()
            end = time.monotonic() + CHAOS_S
            kills = 0
            while time.monotonic() < end:
                time.sleep(KILL_EVERY_S)
                restart_bookie(stack)
                kills += 1
            stop.set()  # the bookie is up: each producer finishes its batch, then stops
            for thread in threads:
                thread.join(timeout=BATCH_BOUND_S + 15)
            assert not any(thread.is_alive() for thread in threads), "a producer did not stop"
            stored = read_topic(http)
        answered = sum(len(t.stored) + len(t.duplicate) for t in tallies)
        refused = sum((t.refused for t in tallies), Counter[str]())
        summary = (
            f"{kills} bookie kills, {answered} messages answered "
            f"({sum(len(t.duplicate) for t in tallies)} as duplicate), refused attempts {dict(refused)}, "
            f"{len(stored)} stored"
        )
        print(summary)  # shown with -s: how hard the run pressed
        assert kills >= 3, summary
        assert answered > 0, summary
        problems = check(tallies, stored)
        assert not problems, summary + "\n" + "\n".join(problems)
    finally:
        stop.set()
        for thread in threads:
            thread.join(timeout=BATCH_BOUND_S + 15)
        with contextlib.suppress(Exception):
            stack.stop()
