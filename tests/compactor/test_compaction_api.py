"""Compaction through the REST API on a live stack: a bookie, a broker and `quire compactor`
(local Spark) as separate processes sharing one SQLite metadata store.

Trigger, status kept in the store, read_compacted readers from earliest and from an id inside
the horizon, last-message-id of the compacted view, and the compactor restarted between runs.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.api.conftest import Stack, start_stack
from tests.support import QuireProcess, wait_until

pytestmark = [pytest.mark.spark, pytest.mark.slow]
TOPIC = "/v1/topics/public/default/prices"
ADMIN = "/admin/v2/persistent/public/default/prices"


@pytest.fixture
def live(tmp_path: Path) -> Iterator[tuple[Stack, QuireProcess, httpx.Client]]:
    stack = start_stack(
        tmp_path / "stack", QUIRE_COMPACTION_POLL_INTERVAL_MS="200", QUIRE_SPARK_MASTER="local[2]"
    )
    compactor = QuireProcess(["compactor"], stack.env(), tmp_path / "compactor.log").start()
    try:
        with httpx.Client(base_url=stack.base_url, timeout=30) as http:
            yield stack, compactor, http
    finally:
        compactor.stop(timeout_s=30)
        stack.stop()


def produce(http: httpx.Client, messages: list[dict[str, Any]]) -> list[str]:
    r = http.post(f"{TOPIC}/messages", json={"messages": messages})
    assert r.status_code == 200, r.text
    return [x["message_id"] for x in r.json()["results"]]


def compact(http: httpx.Client, compactor: QuireProcess) -> dict[str, Any]:
    r = http.put(f"{ADMIN}/compaction")
    assert r.status_code == 204, r.text

    def done() -> bool:
        # `requested` stays set until a run starts: then wait for that run's end
        status = http.get(f"{ADMIN}/compaction").json()
        finished = not status["requested"] and status["status"] in ("SUCCESS", "ERROR")
        return finished or not compactor.alive()

    wait_until(done, 180, "the compaction", interval_s=0.3)
    status: dict[str, Any] = http.get(f"{ADMIN}/compaction").json()
    assert status["status"] == "SUCCESS", (status, compactor.log()[-2000:])
    return status


def read_all(http: httpx.Client, start: str, compacted: bool) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    while True:
        params = {"start": start, "max_messages": 7, "read_compacted": str(compacted).lower()}
        page = http.get(f"{TOPIC}/messages", params=params).json()
        out += page["messages"]
        if not page["messages"] or page["next"] is None:
            return out
        start = page["next"]


def test_trigger_status_and_read_compacted(
    live: tuple[Stack, QuireProcess, httpx.Client], tmp_path: Path
) -> None:
    stack, compactor, http = live
    ids = produce(http, [{"key": f"k{i % 5}", "value": f"v{i}"} for i in range(20)])
    assert http.get(f"{ADMIN}/compaction").json()["status"] == "NOT_RUN"
    produce(http, [{"key": "k0", "value": ""}, {"value": "key-less"}])
    compact(http, compactor)
    view = read_all(http, "earliest", compacted=True)
    assert [(m["key"], m["value"]) for m in view] == [(f"k{i}", f"v{15 + i}") for i in range(1, 5)]
    assert [m["message_id"] for m in view] == ids[16:20]  # original ids kept
    inside = read_all(http, ids[18], compacted=True)  # an id inside the horizon
    assert [m["message_id"] for m in inside] == ids[18:20]
    last = http.get(f"{TOPIC}/last-message-id", params={"read_compacted": "true"}).json()
    assert last["message_id"] == ids[19]
    # restart the compactor, write more, compact again: the view moves on
    compactor.stop(timeout_s=30)
    compactor2 = QuireProcess(["compactor"], stack.env(), tmp_path / "compactor2.log").start()
    try:
        new_ids = produce(http, [{"key": "k1", "value": "new"}, {"key": "k9", "value": "x"}])
        compact(http, compactor2)
        view = read_all(http, "earliest", compacted=True)
        assert [(m["key"], m["value"]) for m in view] == [("k2", "v17"), ("k3", "v18"), ("k4", "v19"),
                                                          ("k1", "new"), ("k9", "x")]  # fmt: skip
        assert [m["message_id"] for m in view][-2:] == new_ids
        raw = read_all(http, "earliest", compacted=False)
        assert len(raw) == 24  # the topic itself is untouched
    finally:
        compactor2.stop(timeout_s=30)
