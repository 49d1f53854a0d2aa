"""The bookie's and the compactor's metrics without processes: the plain histogram, the figures
the storage engine keeps per group commit, and the collectors that turn them into Prometheus
families at scrape time (taken on the event loop, from another thread, as a scrape does)."""

from __future__ import annotations

import asyncio
import math
import time
from pathlib import Path

import httpx
import pytest
from prometheus_client import CollectorRegistry, generate_latest

from app.auth.keys import VerificationKey
from app.auth.tokens import TokenVerifier, create_token
from app.process_metrics import (
    BookieCollector,
    CompactorCollector,
    MetadataCallsCollector,
    MetricsAuth,
    metrics_auth,
    on_loop,
    serve_metrics,
    stop_metrics,
)
from app.settings import Settings
from bookie.metadata_calls import DEFAULT, MetadataCalls
from bookie.server import BookieServer, ServerConfig
from bookie.storage.engine import LedgerStorage, StorageConfig
from common.histogram import Histogram
from compactor.stats import CompactionStats
from tests.metrics_text import samples
from tests.support import free_port


def test_histogram_counts_a_value_under_the_first_bound_it_does_not_exceed() -> None:
    h = Histogram((1, 2, 4))
    for value in (0, 1, 1.5, 2, 4, 4.01, 100):
        h.observe(value)
    snapshot = h.snapshot()
    assert snapshot.buckets == ((1.0, 2), (2.0, 4), (4.0, 5), (math.inf, 7))
    assert snapshot.count == 7 and snapshot.sum == pytest.approx(112.51)


@pytest.mark.parametrize("bounds", [(), (1, 1), (2, 1), (1, math.inf), (math.nan,)])
def test_histogram_refuses_bounds_that_do_not_increase_or_are_not_finite(bounds: tuple[float, ...]) -> None:
    with pytest.raises(ValueError):
        Histogram(bounds)


async def test_engine_counts_adds_bytes_and_groups_once_per_fsync(tmp_path: Path) -> None:
    storage = LedgerStorage(StorageConfig(tmp_path, gc_interval_s=3600), disk_usage=lambda _p: 0.1)
    await storage.start()
    try:
        payloads = [b"x" * i for i in range(40)]
        await asyncio.gather(*(storage.add_entry(5, i, i - 1, p) for i, p in enumerate(payloads)))
        await storage.add_entry(5, 3, 2, payloads[3])  # a retry of a stored entry: not stored again
        await storage.fence(5)  # a group of one fence: an fsync with no entries
        journal = storage.journal_stats
        groups = storage.counters["groups"]
        assert storage.counters["adds"] == 40 and storage.counters["add_bytes"] == sum(map(len, payloads))
        assert journal.group_entries.snapshot().sum == 40
        assert journal.group_entries.snapshot().count == journal.sync_seconds.snapshot().count == groups
        assert journal.group_entries.counts[0] >= 1  # the fence's group, with 0 adds
        assert groups < 40  # grouped: fewer fsyncs than adds
    finally:
        await storage.close()


async def scrape(collector: BookieCollector | CompactorCollector) -> dict[str, float]:
    """As the HTTP server's thread does: from another thread, while the loop runs."""
    registry = CollectorRegistry()
    registry.register(collector)
    return samples((await asyncio.to_thread(generate_latest, registry)).decode())


async def test_bookie_collector_reads_the_engine_and_the_server(tmp_path: Path) -> None:
    usage = {"now": 0.5}
    config = StorageConfig(tmp_path, gc_interval_s=3600, disk_check_interval_s=3600)
    storage = LedgerStorage(config, disk_usage=lambda _p: usage["now"])
    await storage.start()
    server = BookieServer(storage, ServerConfig(port=0))
    collector = BookieCollector(asyncio.get_running_loop(), server, storage)
    try:
        for ledger_id in (1, 2):
            await storage.add_entry(ledger_id, 0, -1, b"abc")
        writable = await scrape(collector)
        usage["now"] = 0.97  # past the high-water mark (0.95)
        storage.check_disk()
        full = await scrape(collector)
    finally:
        await storage.close()
    assert writable["quire_bookie_add_entries_total"] == 2 and writable["quire_bookie_add_bytes_total"] == 6
    assert writable["quire_bookie_ledgers"] == 2 and writable["quire_bookie_read_only"] == 0
    assert writable["quire_bookie_disk_usage_ratio"] == 0.5
    groups = writable["quire_bookie_journal_group_entries_count"]
    assert groups == writable["quire_bookie_journal_sync_seconds_count"] == 2  # the adds came one by one
    assert writable['quire_bookie_journal_group_entries_bucket{le="+Inf"}'] == 2
    assert full["quire_bookie_read_only"] == 1 and full["quire_bookie_disk_usage_ratio"] == 0.97
    server.auth_refusals = 3
    assert (await scrape(collector))["quire_bookie_auth_refusals_total"] == 3


async def test_compactor_collector_serves_runs_by_result_and_durations() -> None:
    stats = CompactionStats()
    stats.run_ended(True, 0.3)
    stats.run_ended(True, 7.0)
    stats.run_ended(False, 0.1)
    stats.messages_read, stats.messages_kept, stats.running = 120, 30, 1
    got = await scrape(CompactorCollector(asyncio.get_running_loop(), stats))
    assert got['quire_compaction_runs_total{result="success"}'] == 2
    assert got['quire_compaction_runs_total{result="error"}'] == 1
    assert got["quire_compaction_duration_seconds_count"] == 3
    assert got["quire_compaction_duration_seconds_sum"] == pytest.approx(7.4)
    assert got['quire_compaction_duration_seconds_bucket{le="0.25"}'] == 1
    assert got['quire_compaction_duration_seconds_bucket{le="0.5"}'] == 2
    assert got['quire_compaction_duration_seconds_bucket{le="10.0"}'] == 3
    assert got["quire_compaction_messages_read_total"] == 120
    assert got["quire_compaction_messages_kept_total"] == 30
    assert got["quire_compaction_running"] == 1


def test_a_loop_that_does_not_answer_fails_the_scrape_and_skips_the_late_call() -> None:
    loop = asyncio.new_event_loop()  # not running: nothing it is asked answers
    called = []
    try:
        with pytest.raises(TimeoutError):
            on_loop(loop, lambda: called.append(1), timeout_s=0.05)
        loop.run_until_complete(asyncio.sleep(0))  # now the loop gets to the call
    finally:
        loop.close()
    assert called == []


KEY = b"k" * 32


def bearer(role: str, key: bytes = KEY) -> dict[str, str]:
    return {"Authorization": f"Bearer {create_token(role, key, 'HS256')}"}


@pytest.mark.parametrize("authorization", [True, False])
async def test_a_metrics_port_with_auth_asks_for_a_token_as_the_brokers_metrics_does(
    authorization: bool,
) -> None:
    auth = MetricsAuth(TokenVerifier(VerificationKey(KEY, ("HS256",))), authorization, frozenset({"root"}))
    port = free_port()
    server = serve_metrics(
        CompactorCollector(asyncio.get_running_loop(), CompactionStats()),
        "127.0.0.1",
        port,
        "test",
        auth,
        "PORT",
    )
    url = f"http://127.0.0.1:{port}/metrics"
    try:
        async with httpx.AsyncClient(timeout=10) as http:
            anonymous = await http.get(url)
            assert anonymous.status_code == 401 and anonymous.headers["www-authenticate"].startswith("Bearer")
            forged = await http.get(url, headers=bearer("root", b"x" * 32))
            assert forged.status_code == 401 and "signature" in forged.text
            assert "Bearer" not in forged.text  # the token is never echoed
            other = await http.get(url, headers=bearer("someone"))
            assert other.status_code == (403 if authorization else 200)
            root = await http.get(url, headers=bearer("root"))
            assert root.status_code == 200 and "quire_compaction_running" in root.text
            assert 'quire_metadata_call_seconds_count{lane="heartbeat"}' in root.text  # every port
    finally:
        await stop_metrics(server)


def test_metrics_ports_are_open_unless_authentication_and_the_setting_are_both_on() -> None:
    assert metrics_auth(Settings.model_validate({"metrics_require_token": True})) is None
    secret = "a2" * 32  # base64 text of 48 bytes
    on = {"authentication_enabled": True, "token_secret_key": secret, "super_user_roles": ["root"]}
    assert metrics_auth(Settings.model_validate(on)) is None
    auth = metrics_auth(Settings.model_validate({**on, "metrics_require_token": True}))
    assert auth is not None and auth.authorization and auth.super_user_roles == {"root"}


async def test_the_metadata_calls_collector_exports_each_lanes_histogram_and_timeouts() -> None:
    calls = MetadataCalls({DEFAULT: 1, "heartbeat": 1})
    try:
        await calls.call(time.sleep, 0.002)
        registry = CollectorRegistry()
        registry.register(MetadataCallsCollector(asyncio.get_running_loop(), calls))
        found = samples((await asyncio.to_thread(generate_latest, registry)).decode())
    finally:
        calls.shutdown()
    assert found['quire_metadata_call_seconds_count{lane="default"}'] == 1
    assert found['quire_metadata_call_seconds_count{lane="heartbeat"}'] == 0
    assert found['quire_metadata_call_seconds_bucket{lane="default",le="0.001"}'] == 0
    assert found['quire_metadata_call_seconds_bucket{lane="default",le="+Inf"}'] == 1
    assert found['quire_metadata_call_timeouts_total{lane="default"}'] == 0
