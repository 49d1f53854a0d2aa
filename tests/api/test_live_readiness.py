"""Readiness and storage loss on a live stack: a bookie killed with -9 makes /readyz 503 and
produce a retriable 503 problem (never a 500); after the bookie restarts both recover and the
messages acknowledged before the loss are all there.

The stack keeps every ledger (retention -1/-1). With the default retention (0/0, as Pulsar's)
a topic without a subscription keeps only its current ledger: the failed write closes the
ledger holding "before" and "after" opens the next, so the trimmer (a pass a second) deletes
"before" as retention says, and a read that came after that pass (a loaded machine) started
at "after". The test now waits past a trimmer pass before it reads, so it cannot pass by luck.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.api.conftest import Stack, start_stack
from tests.support import QuireProcess, port_open, wait_until

TOPIC = "/v1/topics/public/default/readiness"
TRIMMER_PASS_S = 2.5  # more than the managed ledger timer's period (at most 1 s) and its pass


@pytest.fixture
def stack(tmp_path: Path) -> Iterator[Stack]:
    s = start_stack(tmp_path, QUIRE_RETENTION_TIME_MINUTES="-1", QUIRE_RETENTION_SIZE_MB="-1")
    try:
        yield s
    finally:
        s.stop()


def _produce(base: str, value: str) -> httpx.Response:
    return httpx.post(f"{base}{TOPIC}/messages", json={"messages": [{"value": value}]}, timeout=30)


def test_bookie_loss_is_not_ready_and_503_then_recovers(stack: Stack) -> None:
    base = stack.base_url
    assert _produce(base, "before").status_code == 200
    assert httpx.get(f"{base}/readyz").status_code == 200

    assert stack.bookie is not None
    stack.bookie.kill9()
    ready = httpx.get(f"{base}/readyz", timeout=10)
    assert ready.status_code == 503
    assert ready.json()["checks"] == {"metadata": True, "bookies": False}
    assert httpx.get(f"{base}/healthz").status_code == 200  # the process itself is up

    lost = _produce(base, "during")
    assert lost.status_code == 503, lost.text
    assert lost.headers["content-type"].startswith("application/problem+json")
    assert lost.json()["status"] == 503

    stack.bookie = QuireProcess(stack.bookie.args, stack.env(), stack.root / "bookie2.log").start()
    wait_until(lambda: port_open(stack.bookie_port), 30, "bookie restart")
    wait_until(lambda: httpx.get(f"{base}/readyz").status_code == 200, 30, "ready again")
    wait_until(lambda: _produce(base, "after").status_code == 200, 30, "produce again")
    time.sleep(TRIMMER_PASS_S)  # retention, not the timing of the read, must keep "before"
    page = httpx.get(f"{base}{TOPIC}/messages", params={"start": "earliest", "max_messages": 100}).json()
    values = [m["value"] for m in page["messages"]]
    assert values[0] == "before" and "after" in values
    assert values.count("before") == 1
