"""Readiness follows the bookie registry, not the configured list: a broker whose bookie is lost
for good and replaced by a new one (a new id) is ready again, and writes, once the new bookie
registers. Before, `/readyz` probed `QUIRE_BOOKIES` from the broker's start and stayed 503 for
ever (the chaos campaign's replace-bookie fault saw it)."""

from __future__ import annotations

from pathlib import Path

import httpx

from devtools.cluster import LocalCluster
from tests.support import wait_until

# Two bookies, both needed for a ledger; heartbeats short so a lost bookie leaves the registry soon.
ENV = {
    "QUIRE_ENSEMBLE_SIZE": "2",
    "QUIRE_WRITE_QUORUM": "2",
    "QUIRE_ACK_QUORUM": "2",
    "QUIRE_BOOKIE_HEARTBEAT_INTERVAL_MS": "300",
    "QUIRE_BOOKIE_HEARTBEAT_TIMEOUT_MS": "1500",
}
TOPIC = "/v1/topics/public/default/replaced"


def _ready(url: str) -> int:
    return httpx.get(f"{url}/readyz", timeout=10).status_code


def test_a_broker_is_ready_again_once_a_lost_bookie_is_replaced(tmp_path: Path) -> None:
    with LocalCluster(tmp_path, env=ENV) as cluster:
        first, _ = cluster.bookie(), cluster.bookie()
        broker = cluster.broker()
        assert _ready(broker.url) == 200

        cluster.kill9(first)  # lost for good: its disk is never seen again
        wait_until(lambda: _ready(broker.url) == 503, 30, "unready without a second bookie")

        cluster.bookie()  # the replacement, under a new id (its own address)
        wait_until(lambda: _ready(broker.url) == 200, 30, "ready with the replacement")
        body = httpx.get(f"{broker.url}/readyz", timeout=10).json()
        assert body == {"ready": True, "checks": {"metadata": True, "bookies": True}}
        r = httpx.post(f"{broker.url}{TOPIC}/messages", json={"messages": [{"value": "a"}]}, timeout=30)
        assert r.status_code == 200, r.text
