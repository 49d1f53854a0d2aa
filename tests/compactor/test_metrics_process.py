"""A real `quire compactor --metrics-port` next to a real bookie and broker: one compaction run of
a real topic shows on its /metrics as one successful run with a duration, the messages it read
and the messages it kept; none is running once it is done."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest

from tests.api.conftest import start_stack
from tests.metrics_text import scrape
from tests.support import QuireProcess, free_port, port_open, wait_until

pytestmark = [pytest.mark.spark]
RUN_BOUND_S = 180.0  # a first Spark job on a cold session, on a loaded 2-core machine
TOPIC = "public/default/metered"


def test_a_compaction_run_shows_on_the_compactors_metrics(tmp_path: Path) -> None:
    stack = start_stack(
        tmp_path / "stack", QUIRE_COMPACTION_POLL_INTERVAL_MS="200", QUIRE_SPARK_MASTER="local[2]"
    )
    metrics_port = free_port()
    compactor = QuireProcess(
        ["compactor", "--metrics-port", str(metrics_port)], stack.env(), tmp_path / "compactor.log"
    ).start()
    try:
        wait_until(lambda: port_open(metrics_port) or not compactor.alive(), 60, "the metrics port")
        assert compactor.alive(), compactor.log()[-3000:]
        idle = scrape(metrics_port)
        assert idle['quire_compaction_runs_total{result="success"}'] == 0
        assert idle["quire_compaction_duration_seconds_count"] == 0

        keys = ["a", "b", "c", "d"]
        batch = [{"key": keys[i % 4], "value": f"v{i}"} for i in range(10)]
        r = httpx.post(f"{stack.base_url}/v1/topics/{TOPIC}/messages", json={"messages": batch}, timeout=30)
        assert r.status_code == 200, r.text
        compaction = f"{stack.base_url}/admin/v2/persistent/{TOPIC}/compaction"
        assert httpx.put(compaction, timeout=30).status_code == 204

        def done() -> bool:
            assert compactor.alive(), compactor.log()[-3000:]
            status = httpx.get(compaction, timeout=30).json()
            assert status["status"] != "ERROR", status
            return status["status"] == "SUCCESS" and not status["requested"]

        wait_until(done, RUN_BOUND_S, "the compaction run", interval_s=0.2)
        # the run is counted as it ends, a moment after its SUCCESS is recorded
        wait_until(
            lambda: scrape(metrics_port)['quire_compaction_runs_total{result="success"}'] == 1,
            30,
            "the count",
        )
        after = scrape(metrics_port)
        assert after['quire_compaction_runs_total{result="error"}'] == 0
        assert after["quire_compaction_duration_seconds_count"] == 1
        assert after['quire_compaction_duration_seconds_bucket{le="+Inf"}'] == 1
        assert after["quire_compaction_duration_seconds_sum"] > 0
        assert after["quire_compaction_messages_read_total"] == 10
        assert after["quire_compaction_messages_kept_total"] == 4  # the newest of each key
        assert after["quire_compaction_running"] == 0
        assert f"metrics on http://127.0.0.1:{metrics_port}/metrics" in compactor.log()
    finally:
        compactor.stop(timeout_s=30)
        stack.stop()
