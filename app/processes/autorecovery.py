"""`quire autorecovery`: an auditor candidate and a recovery worker (BookKeeper's AutoRecovery).

Run one or more next to the bookies, with the same `QUIRE_DATABASE_URL`: one of them audits
(the auditor lease), all of them re-replicate. It is a process of its own rather than a part of
every bookie so that copying never competes with a bookie's fsyncs for its event loop, and so
that a worker can be stopped, restarted or scaled without taking any copies down with it.

Its Prometheus counters are served on `QUIRE_HOST:QUIRE_PORT` at `/metrics`:
`quire_recovery_ensemble_changes` (segments whose lost bookie was replaced),
`quire_recovered_entries`, `quire_recovery_bytes` and `quire_recovered_ledgers`, and the
ledger check's `quire_ledger_check_passes`, `quire_ledger_check_ledgers`,
`quire_ledger_check_missing_copies` (bookies found lacking entries they were given) and the gauge
`quire_ledger_check_underreplicated_ledgers` (the list's length at the last check; for a
super-user's token only with QUIRE_METRICS_REQUIRE_TOKEN, `app/process_metrics.py`). Its clients
prove themselves to bookies with the cluster secret and TLS files of the settings.
SIGTERM or SIGINT stops the loops (a claim it held lapses) and exits 0. Runs on uvloop when
installed: a copy costs the worker a few Python calls per entry, and uvloop's cheaper
transports and callbacks are a good part of its share of the CPU.
"""

from __future__ import annotations

import asyncio
import logging
import os
import signal
import socket
import sys
import uuid
from collections.abc import Callable, Iterator

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.registry import Collector

from app.settings import Settings
from bookie.autorecovery import AutoRecoveryConfig
from bookie.ledger_checker import CheckerConfig, CheckerCounters
from bookie.rereplication import RecoveryCounters, WorkerConfig

log = logging.getLogger("quire.autorecovery")


class CountersCollector(Collector):
    def __init__(self, counters: RecoveryCounters, checks: CheckerCounters | None = None) -> None:
        self.counters = counters
        self.checks = checks or CheckerCounters()

    def collect(self) -> Iterator[CounterMetricFamily | GaugeMetricFamily]:
        k = self.checks
        for name, doc, value in (
            ("quire_ledger_check_passes", "Ledger check passes run", k.passes),
            ("quire_ledger_check_ledgers", "Ledgers checked against their bookies", k.ledgers_checked),
            (
                "quire_ledger_check_missing_copies",
                "Bookies found lacking entries of a ledger",
                k.missing_found,
            ),
        ):
            yield CounterMetricFamily(name, doc, value=value)
        yield GaugeMetricFamily(
            "quire_ledger_check_underreplicated_ledgers",
            "Ledgers listed as under-replicated at the last ledger check",
            value=k.underreplicated_ledgers,
        )
        c = self.counters
        for name, doc, value in (
            (
                "quire_recovery_ensemble_changes",
                "Ledger segments whose lost bookie was replaced",
                c.ensemble_changes,
            ),
            ("quire_recovered_entries", "Entries copied to replacement bookies", c.recovered_entries),
            ("quire_recovery_bytes", "Bytes copied to replacement bookies", c.recovery_bytes),
            ("quire_recovered_ledgers", "Under-replicated ledgers brought back", c.ledgers_recovered),
        ):
            yield CounterMetricFamily(name, doc, value=value)


def _worker_config(settings: Settings, me: str) -> WorkerConfig:
    return WorkerConfig(
        me,
        claim_ms=settings.autorecovery_claim_ms,
        open_ledger_grace_ms=settings.autorecovery_open_ledger_grace_ms,
        copies_in_flight=settings.autorecovery_copies_in_flight,
        ledgers_in_flight=settings.autorecovery_ledgers_in_flight,
    )


async def serve(settings: Settings) -> None:
    from app.process_metrics import metrics_auth, serve_metrics, stop_metrics
    from app.registry import open_store, registry_config
    from app.wiring import bookie_client_security
    from bookie.auditor import Auditor, AuditorConfig
    from bookie.autorecovery import AutoRecoveryService
    from bookie.client import BookieClientConfig, BookieLedgerClient
    from bookie.ledger_checker import LedgerChecker
    from bookie.ledgers import LedgerManager
    from bookie.registry import MetadataBookieRegistry
    from bookie.replica_io import ReplicaIO, ReplicaIOConfig
    from bookie.rereplication import ReplicationWorker
    from managed_ledger.metadata.store_clock import StoreClock

    store = open_store(settings, "autorecovery")
    # Both the ledger client (fencing, recovery) and the copier prove themselves to bookies.
    security = bookie_client_security(settings)
    client = BookieLedgerClient(
        BookieClientConfig(max_frame_bytes=settings.bookie_max_frame_bytes, security=security)
    )
    io = ReplicaIO(ReplicaIOConfig(max_frame_bytes=settings.bookie_max_frame_bytes, security=security))
    me = f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"
    registry = MetadataBookieRegistry(store, registry_config(settings))
    # The auditor's lease and the workers' claims are stamped and judged on the store's clock,
    # not on this machine's (docs/operations.md, "Clocks").
    store_clock = StoreClock(store.store_now_ms)
    auditor = Auditor(
        store,
        registry,
        AuditorConfig(me, settings.autorecovery_lease_ms, settings.autorecovery_lost_bookie_grace_ms),
        clock_ms=store_clock.now_ms,
    )
    worker_config = _worker_config(settings, me)
    # The registry also places the bookies a recovery puts in place of unreachable ones.
    ledgers = LedgerManager(store, client, placement=registry, cookies=store.get_bookie_cookie)
    worker = ReplicationWorker(store, ledgers, registry, io, worker_config, clock_ms=store_clock.now_ms)
    checker = LedgerChecker(store, registry, io, _checker_config(settings), auditor.confirmed)
    server = serve_metrics(
        CountersCollector(worker.counters, checker.counters),
        settings.host,
        settings.port,
        "autorecovery",
        metrics_auth(settings),
        "QUIRE_PORT (--port)",
    )
    service = AutoRecoveryService(
        auditor,
        worker,
        _service_config(settings),
        checker,
    )
    service.start()
    log.info("autorecovery %s running; metrics on %s:%d", me, settings.host, settings.port)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    try:
        await stop.wait()
    finally:
        log.info("autorecovery stopping")
        await service.close()
        await io.close()
        await client.close()
        await stop_metrics(server)
        store.close()


def _checker_config(settings: Settings) -> CheckerConfig:
    return CheckerConfig(ledgers_per_pass=settings.autorecovery_check_ledgers_per_pass)


def _service_config(settings: Settings) -> AutoRecoveryConfig:
    return AutoRecoveryConfig(
        settings.autorecovery_audit_interval_ms,
        settings.autorecovery_poll_interval_ms,
        settings.autorecovery_check_interval_ms,
    )


def run(settings: Settings) -> None:
    logging.basicConfig(
        level=logging.INFO, stream=sys.stderr, format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )
    with asyncio.Runner(loop_factory=_loop_factory()) as runner:
        runner.run(serve(settings))


def _loop_factory() -> Callable[[], asyncio.AbstractEventLoop] | None:
    try:
        import uvloop
    except ImportError:
        return None
    return uvloop.new_event_loop
