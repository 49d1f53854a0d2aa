"""`quire compactor`: the compaction service on a warm Spark session.

Builds the metadata store (schema upgraded at open, as every process does), the bookie client and
the compactor's config from the settings, then polls for requested runs until SIGTERM/SIGINT; a
run in progress is cancelled and recorded as ERROR before the process exits. After a kill -9 the
run's lease lapses: it reads as ERROR within one lease, and the next poll of any compactor
deletes its half-written ledger. With `QUIRE_COMPACTOR_METRICS_PORT` (`--metrics-port`) set, its
Prometheus metrics (runs, their durations and messages) are served on that port of `QUIRE_HOST`
at `/metrics` (`app/process_metrics.py`; for a super-user's token only with
QUIRE_METRICS_REQUIRE_TOKEN). Its bookie client and its Spark tasks' clients prove themselves to
bookies with the settings' cluster secret and TLS files.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import signal
from typing import TYPE_CHECKING

from app.settings import Settings
from compactor.config import CompactorConfig

if TYPE_CHECKING:
    from managed_ledger.metadata.sql import SqlMetadataStore

log = logging.getLogger("quire.compactor")


def compactor_config(settings: Settings) -> CompactorConfig:
    return CompactorConfig(
        bookies=tuple(settings.effective_bookies),
        ensemble_size=settings.ensemble_size,
        write_quorum=settings.write_quorum,
        ack_quorum=settings.ack_quorum,
        keyless_policy=settings.keyless_compaction_policy,
        delete_retention_ms=settings.compaction_delete_retention_ms,
        spark_master=settings.spark_master,
        single_task_max_bytes=settings.compaction_single_task_max_bytes,
        poll_interval_ms=settings.compaction_poll_interval_ms,
        lease_ms=settings.compaction_lease_ms,
        threshold_bytes=settings.compaction_threshold_bytes,
        test_run_delay_ms=settings.compactor_test_run_delay_ms,
        test_run_delay_match=settings.compactor_test_run_delay_match,
    )


async def serve(settings: Settings) -> None:
    from app.listen import probe
    from app.process_metrics import CompactorCollector, metrics_auth, serve_metrics, stop_metrics
    from app.registry import registry_config
    from app.wiring import bookie_client_config
    from bookie.client import BookieLedgerClient
    from bookie.registry import MetadataBookieRegistry
    from compactor.job import BookieClientFactory, SparkEngine
    from compactor.service import CompactionService
    from compactor.spark import stop_session
    from managed_ledger.metadata.store_clock import StoreClock

    config = compactor_config(settings)
    metrics_setting = "QUIRE_COMPACTOR_METRICS_PORT (--metrics-port)"
    if settings.compactor_metrics_port:  # said now, not once the metadata store answers
        probe(
            settings.host,
            settings.compactor_metrics_port,
            process="compactor",
            what="metrics",
            setting=metrics_setting,
        )
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, stop.set)
    store = await _open_store(settings, stop)
    if store is None:
        return  # stopped while waiting for the metadata store
    client_config = bookie_client_config(settings)
    client = BookieLedgerClient(client_config)
    # Compacted ledgers are placed on live writable bookies of the registry (same store). Spark
    # tasks build their own clients with the same config: its secret and TLS files go with them.
    registry = MetadataBookieRegistry(store, registry_config(settings))
    engine = SparkEngine(config, client_factory=BookieClientFactory(client_config))
    # Run leases are stamped and judged on the store's clock (docs/operations.md, "Clocks").
    service = CompactionService(store, client, config, engine, StoreClock(store.store_now_ms), registry)
    metrics = None
    try:
        if settings.compactor_metrics_port:
            collector = CompactorCollector(loop, service.runner.stats)
            port, auth = settings.compactor_metrics_port, metrics_auth(settings)
            metrics = serve_metrics(collector, settings.host, port, "compactor", auth, metrics_setting)
        where = f"; metrics on http://{settings.host}:{settings.compactor_metrics_port}/metrics"
        log.info("compactor up: spark master %s%s", config.spark_master, where if metrics else "")
        await service.serve(stop)
    finally:
        if metrics is not None:
            await stop_metrics(metrics)
        await client.close()
        store.close()
        # a SIGTERM to the process group may have stopped the JVM already: nothing left to stop
        with contextlib.suppress(Exception):
            await asyncio.to_thread(stop_session)


async def _open_store(settings: Settings, stop: asyncio.Event) -> SqlMetadataStore | None:
    """Open the metadata store, waiting (a try a second) while it does not answer: a compactor
    started during a database outage waits it out instead of exiting. None: stopped meanwhile."""
    from bookie.metadata_calls import call_store
    from managed_ledger.metadata.sql import SqlMetadataStore

    url = settings.effective_database_url
    open_store = functools.partial(SqlMetadataStore, url, auto_upgrade=settings.auto_migrate)
    while not stop.is_set():
        try:
            return await call_store(open_store)
        except Exception as exc:  # the database is down or refuses us for now
            log.warning("metadata store not reachable (%s); trying again in 1 s", type(exc).__name__)
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stop.wait(), timeout=1.0)
    return None


def run(settings: Settings) -> None:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    logging.getLogger("py4j").setLevel(logging.WARNING)
    asyncio.run(serve(settings))
