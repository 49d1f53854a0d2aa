"""Idle topic unload on a real broker (QUIRE_IDLE_TOPIC_UNLOAD_MS, short here): an idle topic
leaves the broker's memory (its series leave /metrics, which lists the open topics) and its
next produce and receive find it as it was: the acked messages stay acked, and a producer's
retry of a stored sequence id is still a duplicate."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.api.conftest import Stack, start_stack
from tests.support import wait_until

TOPIC = "public/default/idle-live"
DATA = f"/v1/topics/{TOPIC}"
LABEL = f'topic="{TOPIC}"'


@pytest.fixture
def stack(tmp_path: Path) -> Iterator[Stack]:
    s = start_stack(tmp_path, QUIRE_IDLE_TOPIC_UNLOAD_MS="1500", QUIRE_STATS_INTERVAL_MS="500")
    try:
        yield s
    finally:
        s.stop()


def produce(http: httpx.Client, *seqs: int) -> list[bool]:
    body = {"producer_name": "p", "messages": [{"value": f"v{s}", "sequence_id": s} for s in seqs]}
    r = http.post(f"{DATA}/messages", json=body)
    assert r.status_code == 200, r.text
    return [result["duplicate"] for result in r.json()["results"]]


def receive(http: httpx.Client, n: int) -> list[dict[str, str]]:
    r = http.get(
        f"{DATA}/subscriptions/s/messages", params={"max_messages": n, "consumer_id": "c", "wait_ms": 0}
    )
    assert r.status_code == 200, r.text
    messages: list[dict[str, str]] = r.json()["messages"]
    return messages


def is_open(http: httpx.Client) -> bool:
    return LABEL in http.get("/metrics").text


def test_an_idle_topic_is_unloaded_and_its_next_requests_find_it_intact(stack: Stack) -> None:
    with httpx.Client(base_url=stack.base_url, timeout=10) as http:
        assert produce(http, 1) == [False]  # created
        assert http.post(f"/admin/v2/persistent/{TOPIC}/deduplicationEnabled", json=True).status_code == 204
        r = http.put(f"{DATA}/subscriptions/s", json={"initial_position": "earliest"})
        assert r.status_code in (200, 201, 204), r.text
        assert produce(http, 2, 3) == [False, False]
        got = receive(http, 2)
        assert [m["value"] for m in got] == ["v1", "v2"]
        r = http.post(f"{DATA}/subscriptions/s/ack", json={"message_ids": [m["message_id"] for m in got]})
        assert r.status_code == 204, r.text
        assert is_open(http)
        wait_until(lambda: not is_open(http), 30, "the idle topic unloaded")
        # Back on its next request, as it was.
        assert produce(http, 3, 4) == [True, False]
        assert is_open(http)
        assert [m["value"] for m in receive(http, 10)] == ["v3", "v4"]
