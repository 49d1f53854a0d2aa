"""A rolling restart under produce and consume load (real processes, PostgreSQL, dedup on).

Each broker in turn (two by default, three in the slow variant) gets SIGTERM (it hands its
topics over and exits), and a replacement starts on its port before the next one goes. The
careful clients (307 followed, 503 and connection errors retried on another broker) see no
failed request, nothing accepted is lost or stored twice, every accepted message reaches the
subscription, and a stopping broker answers nothing for a topic once another broker has served
it.
"""

from __future__ import annotations

import signal
import time

import pytest

from tests.cluster.conftest import StartCluster
from tests.cluster.harness import KEEP_ALL, CarefulClient, subscribe, threads_running
from tests.cluster.load import (
    SUB,
    TopicLoad,
    all_retries,
    check_stored,
    served_after_moving,
    total_accepted,
    wait_all_delivered,
    wait_for_more,
)

TOPICS = [f"roll-{i}" for i in range(6)]


@pytest.mark.parametrize(
    "brokers",
    [pytest.param(2, id="two-brokers"), pytest.param(3, id="three-brokers", marks=pytest.mark.slow)],
)
def test_rolling_restart_under_load_fails_no_request(start_cluster: StartCluster, brokers: int) -> None:
    cluster = start_cluster(brokers, QUIRE_DEDUPLICATION_ENABLED="true", **KEEP_ALL)
    loads = [TopicLoad(t, cluster.urls) for t in TOPICS]
    with CarefulClient(cluster.urls) as client:
        for topic in TOPICS:
            subscribe(client, topic, SUB)
    restarted: list[str] = []
    windows: list[tuple[str, float, float]] = []  # a stopping broker: url, SIGTERM, exit
    with threads_running([x.consume_loop for x in loads]) as consumers:
        with threads_running([x.produce_loop for x in loads]) as producers:
            for old in list(cluster.brokers):
                wait_for_more(loads, 50, producers, "load before the next restart")
                stopping = time.monotonic()
                code = cluster.sigterm(old)
                windows.append((old.url, stopping, time.monotonic()))
                # uvicorn re-raises the SIGTERM it handled once it has shut down: -15 is a clean exit
                assert code in (0, -signal.SIGTERM), f"{old.name} exited with {code}:\n{old.log()[-3000:]}"
                cluster.start_broker(old.port)
                restarted.append(old.broker_id)
            wait_for_more(loads, 50, producers, "load after the last restart")
        wait_all_delivered(loads, consumers)
    print(
        f"\nrolling restart of {restarted}: accepted {total_accepted(loads)} messages, no failed "
        f"request; client retries {all_retries(loads)}"
    )
    assert len(restarted) == brokers
    with CarefulClient(cluster.urls) as client:
        problems = [p for x in loads for p in check_stored(client, x)]
    problems += [p for x in loads for w in windows for p in served_after_moving(x, *w)]
    assert not problems, "\n".join(problems) + "\n" + cluster.logs()
