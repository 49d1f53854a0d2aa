"""kill -9 the broker while a producer and a consumer are busy, restart it, and check: every
produced message the broker acknowledged is there, and every message not acknowledged by the
consumer is delivered again (acks not yet flushed may come back too: at-least-once)."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import httpx
import pytest

from tests.api.conftest import start_stack
from tests.support import wait_until

TOPIC = "/v1/topics/public/default/crash"
SUB = f"{TOPIC}/subscriptions/s"
BOUND_S = 60.0


class Load:
    def __init__(self, base_url: str) -> None:
        self.base_url = base_url
        self.produced: set[str] = set()  # values whose produce the broker acknowledged
        self.consumer_acked: set[str] = set()
        self.stop = threading.Event()

    def producer(self) -> None:
        with httpx.Client(base_url=self.base_url, timeout=10) as http:
            n = 0
            while not self.stop.is_set():
                values = [f"v{n + i}" for i in range(10)]
                try:
                    r = http.post(f"{TOPIC}/messages", json={"messages": [{"value": v} for v in values]})
                except httpx.HTTPError:
                    return  # the broker died mid-request: this batch was never acknowledged
                if r.status_code == 200:
                    self.produced.update(values)
                n += 10

    def consumer(self) -> None:
        with httpx.Client(base_url=self.base_url, timeout=10) as http:
            turn = 0
            while not self.stop.is_set():
                try:
                    got = http.get(f"{SUB}/messages", params={"max_messages": 50, "wait_ms": 100}).json()
                    msgs = got["messages"]
                    # Ack every other batch only, so some messages are pending at the crash.
                    turn += 1
                    if msgs and turn % 2 == 0:
                        ids = [m["message_id"] for m in msgs]
                        if http.post(f"{SUB}/ack", json={"message_ids": ids}).status_code == 204:
                            self.consumer_acked.update(m["value"] for m in msgs)
                except (httpx.HTTPError, ValueError, KeyError):
                    return


@pytest.mark.slow
def test_kill9_broker_while_producing_and_consuming(tmp_path: Path) -> None:
    stack = start_stack(tmp_path, QUIRE_CURSOR_FLUSH_INTERVAL_MS="200", QUIRE_DEFAULT_ACK_TIMEOUT_MS="1000")
    try:
        with httpx.Client(base_url=stack.base_url, timeout=10) as http:
            assert http.put(SUB, json={"initial_position": "earliest"}).status_code == 201
        load = Load(stack.base_url)
        threads = [threading.Thread(target=load.producer), threading.Thread(target=load.consumer)]
        for t in threads:
            t.start()
        wait_until(lambda: len(load.produced) >= 300 and len(load.consumer_acked) >= 50, BOUND_S, "load")
        stack.kill_broker()
        load.stop.set()
        for t in threads:
            t.join(timeout=BOUND_S)
        produced = set(load.produced)
        stack.start_broker()
        with httpx.Client(base_url=stack.base_url, timeout=10) as http:
            stored = read_all(http)
            assert produced <= stored, f"lost acknowledged messages: {sorted(produced - stored)[:10]}"
            redelivered = drain(http)
        never_acked = produced - load.consumer_acked
        assert never_acked <= redelivered, f"not redelivered: {sorted(never_acked - redelivered)[:10]}"
    finally:
        stack.stop()


def read_all(http: httpx.Client) -> set[str]:
    values: set[str] = set()
    start = "earliest"
    deadline = time.monotonic() + BOUND_S
    while time.monotonic() < deadline:
        page = http.get(f"{TOPIC}/messages", params={"start": start, "max_messages": 1000}).json()
        if page["next"] is None:
            return values
        values.update(m["value"] for m in page["messages"])
        start = page["next"]
    raise TimeoutError("reader did not reach the end")


def drain(http: httpx.Client) -> set[str]:
    """Pull and ack until an empty pull (after the ack timeout has passed once)."""
    values: set[str] = set()
    deadline = time.monotonic() + BOUND_S
    empty_pulls = 0
    while time.monotonic() < deadline and empty_pulls < 2:
        msgs = http.get(f"{SUB}/messages", params={"max_messages": 1000, "wait_ms": 1500}).json()["messages"]
        if not msgs:
            empty_pulls += 1
            continue
        empty_pulls = 0
        values.update(m["value"] for m in msgs)
        http.post(f"{SUB}/ack", json={"message_ids": [m["message_id"] for m in msgs]})
    return values
