"""`quire standalone`: starts a bookie and a broker (and the compactor when it exists) as child
processes, serves the API, and stops every child on SIGTERM; a child that dies stops the whole
standalone with exit code 1. Each bookie and the compactor serve their metrics on a port of
their own, named in the start-up output; ports that would clash refuse to start."""

from __future__ import annotations

import contextlib
import os
import random
import re
import signal
import socket
from collections.abc import Iterator
from pathlib import Path

import httpx
import psutil
import pytest

from app.processes.standalone import port_clash
from app.settings import Settings
from managed_ledger.metadata.sql import SqlMetadataStore
from tests.metrics_text import scrape
from tests.support import QuireProcess, free_port, port_open, wait_until
from tests.test_grafana_dashboard import dashboard_series

START_TIMEOUT_S = 90.0


def free_port_run(count: int) -> int:
    """The first of `count` consecutive ports that are free now, below Linux's ephemeral range
    (32768 on), where no outgoing connection takes one of them before the child binds it."""
    rng = random.Random()
    for _ in range(200):
        first = rng.randrange(20_000, 32_768 - count)
        with contextlib.ExitStack() as stack:
            try:
                for port in range(first, first + count):
                    stack.enter_context(socket.socket()).bind(("127.0.0.1", port))
            except OSError:
                continue
        return first
    raise RuntimeError(f"no {count} consecutive free ports")


_STARTED: list[QuireProcess] = []


@pytest.fixture(autouse=True)
def _stop_what_was_started() -> Iterator[None]:
    """Every standalone a test started is stopped (its process group) however the test ends."""
    yield
    while _STARTED:
        _STARTED.pop().stop()


def start(tmp_path: Path, *extra: str, env: dict[str, str] | None = None) -> tuple[QuireProcess, int]:
    """A standalone on free ports, runs of 4 for the bookies and their metrics (the default
    metrics ports, 8000 on, may be taken)."""
    port, bookie_port = free_port(), free_port_run(4)
    metrics = {
        "QUIRE_BOOKIE_METRICS_PORT": str(free_port_run(4)),
        "QUIRE_COMPACTOR_METRICS_PORT": str(free_port()),
    }
    proc = QuireProcess(
        [
            "standalone",
            "--data-dir",
            str(tmp_path / "data"),
            "--port",
            str(port),
            "--bookie-port",
            str(bookie_port),
            *extra,
        ],
        {**metrics, **(env or {})},
        tmp_path / "standalone.log",
    ).start()
    _STARTED.append(proc)

    def ready() -> bool:
        assert proc.alive(), proc.log()
        try:
            return httpx.get(f"http://127.0.0.1:{port}/readyz", timeout=2).status_code == 200
        except httpx.HTTPError:
            return False

    wait_until(ready, START_TIMEOUT_S, "standalone ready")
    return proc, port


def children(proc: QuireProcess) -> dict[str, int]:
    return {name: int(pid) for name, pid in re.findall(r"started (\w+) \(pid (\d+)\)", proc.log())}


@pytest.mark.process
def test_standalone_serves_and_stops_every_child_on_sigterm(tmp_path: Path) -> None:
    proc, port = start(tmp_path)
    kids = children(proc)
    assert {"bookie", "broker"} <= kids.keys()
    base = f"http://127.0.0.1:{port}/v1/topics/public/default/t"
    r = httpx.put(f"{base}/subscriptions/s", json={"initial_position": "earliest"})
    assert r.status_code in (200, 201), r.text
    r = httpx.post(f"{base}/messages", json={"messages": [{"value": "x"}]})
    assert r.status_code == 200
    r = httpx.get(f"{base}/subscriptions/s/messages", params={"consumer_id": "c", "wait_ms": 1000})
    assert len(r.json()["messages"]) == 1
    assert httpx.get(f"{base}/subscriptions/none/messages").status_code == 404  # an error series
    assert (tmp_path / "data" / "metadata.db").exists()
    # the start-up output says where each child's metrics are, and they are there
    bookie_metrics = int(proc.env["QUIRE_BOOKIE_METRICS_PORT"])
    compactor_metrics = int(proc.env["QUIRE_COMPACTOR_METRICS_PORT"])
    assert f"metrics at http://127.0.0.1:{bookie_metrics}/metrics" in proc.log()
    assert f"metrics at http://127.0.0.1:{compactor_metrics}/metrics" in proc.log()
    assert scrape(bookie_metrics)["quire_bookie_add_entries_total"] >= 1
    wait_until(lambda: port_open(compactor_metrics), 60, "the compactor's metrics port")
    assert scrape(compactor_metrics)['quire_compaction_runs_total{result="error"}'] == 0
    # every series the Grafana dashboard queries is served by one of the processes
    served = {name.split("{")[0] for p in (port, bookie_metrics, compactor_metrics) for name in scrape(p)}
    assert dashboard_series() <= served, dashboard_series() - served
    os.kill(proc.pid, signal.SIGTERM)
    assert proc.proc is not None and proc.proc.wait(timeout=60) == 0
    for name, pid in kids.items():
        assert not psutil.pid_exists(pid) or psutil.Process(pid).status() == psutil.STATUS_ZOMBIE, name
    proc.stop()


@pytest.mark.process
def test_a_dead_child_stops_the_standalone_with_exit_1(tmp_path: Path) -> None:
    proc, _ = start(tmp_path)
    kids = children(proc)
    os.kill(kids["bookie"], signal.SIGKILL)
    assert proc.proc is not None and proc.proc.wait(timeout=60) == 1
    assert "bookie" in proc.log() and "exited with code" in proc.log()
    assert (
        not psutil.pid_exists(kids["broker"])
        or psutil.Process(kids["broker"]).status() == psutil.STATUS_ZOMBIE
    )
    proc.stop()


def produce(port: int, count: int, start: int = 0) -> None:
    url = f"http://127.0.0.1:{port}/v1/topics/public/default/replicated/messages"
    for i in range(start, start + count, 10):
        batch = [{"value": f"m{j}"} for j in range(i, min(i + 10, start + count))]
        r = httpx.post(url, json={"messages": batch}, timeout=30)
        assert r.status_code == 200, r.text


@pytest.mark.process
@pytest.mark.slow
def test_standalone_with_four_bookies_keeps_writing_after_one_is_killed(tmp_path: Path) -> None:
    replicated = ("--ensemble-size", "3", "--write-quorum", "2", "--ack-quorum", "2")
    env = {"QUIRE_ADD_ENTRY_TIMEOUT_MS": "1000", "QUIRE_BOOKIE_HEARTBEAT_TIMEOUT_MS": "3000"}
    proc, port = start(tmp_path, "--bookies", "4", *replicated, env=env)
    try:
        bookies = [int(pid) for pid in re.findall(r"started bookie \(pid (\d+)\)", proc.log())]
        assert len(bookies) == 4
        first_metrics = int(proc.env["QUIRE_BOOKIE_METRICS_PORT"])
        for i in range(4):  # bookie i serves its metrics on the bookie metrics port + i
            assert f"metrics at http://127.0.0.1:{first_metrics + i}/metrics" in proc.log()
            assert scrape(first_metrics + i)["quire_bookie_read_only"] == 0
        for i in range(4):
            assert (tmp_path / "data" / ("bookie" if i == 0 else f"bookie-{i}")).is_dir()
        produce(port, 100)
        store = SqlMetadataStore(f"sqlite:///{tmp_path / 'data' / 'metadata.db'}", auto_upgrade=False)
        try:
            # Bookie i listens on the bookie port + i: kill one that the topic's ledger is on.
            ports = sorted(int(b.bookie_id.rsplit(":", 1)[1]) for b in store.list_bookies())
            [ledger] = store.list_ledgers()
            victim = ledger.ensemble[1]
            os.kill(bookies[ports.index(int(victim.rsplit(":", 1)[1]))], signal.SIGKILL)
            produce(port, 200, start=100)  # every one acknowledged: the writer replaced the bookie
            changed = store.get_ledger(ledger.ledger_id)
            assert len(changed.ensembles) >= 2 and victim not in changed.ensembles[-1][1]
        finally:
            store.close()
        wait_until(lambda: "3 of 4 bookies left" in proc.log(), 30, "the dead bookie reported")
        assert proc.alive()
        assert httpx.get(f"http://127.0.0.1:{port}/readyz", timeout=5).status_code == 200
        url = f"http://127.0.0.1:{port}/v1/topics/public/default/replicated/messages"
        r = httpx.get(url, params={"start": "earliest", "max_messages": 1000}, timeout=30)
        assert r.status_code == 200, r.text
        assert [m["value"] for m in r.json()["messages"]] == [f"m{i}" for i in range(300)]
    finally:
        os.kill(proc.pid, signal.SIGTERM)
        assert proc.proc is not None and proc.proc.wait(timeout=60) == 0
        proc.stop()


@pytest.mark.process
def test_standalone_refuses_fewer_bookies_than_the_ensemble(tmp_path: Path) -> None:
    proc = QuireProcess(
        ["standalone", "--data-dir", str(tmp_path / "data"), "--bookies", "2", "--ensemble-size", "3"],
        {},
        tmp_path / "standalone.log",
    ).start()
    _STARTED.append(proc)
    try:
        assert proc.proc is not None and proc.proc.wait(timeout=60) == 2
        assert "ensemble_size=3" in proc.log()
    finally:
        proc.stop()


def test_metrics_ports_that_clash_are_refused() -> None:
    defaults = Settings.model_construct()
    assert port_clash(defaults, 4) is None  # bookies 8000-8003, the compactor 8004, the broker 8080
    clash = port_clash(Settings.model_construct(bookie_metrics_port=8079), 2)
    assert clash == "bookie 1's metrics and the broker would both listen on port 8080"
    clash = port_clash(Settings.model_construct(compactor_metrics_port=8001), 2)
    assert clash == "the compactor's metrics and bookie 1's metrics would both listen on port 8001"
    assert "past port 65535" in str(port_clash(Settings.model_construct(bookie_metrics_port=65535), 2))
