"""`quire bookie --data-dir D --port P`: one storage engine behind the bookie TCP server.

Start: open the metadata store and check the disk's cookie (exit 2 when the disk was wiped or
swapped; `--format` registers it as a new instance), build the engine's StorageConfig from the
settings, open the engine (journal replay, index rebuild), bind the server, register and start
the heartbeat, the ledger garbage collector (`bookie.ledger_gc`: ledgers the metadata no
longer has, every QUIRE_BOOKIE_LEDGER_GC_INTERVAL_S, only with a shared QUIRE_DATABASE_URL) and
the scrub (`bookie.scrubber`: rotten copies listed for repair), log where it listens. With
`QUIRE_BOOKIE_METRICS_PORT` (`--metrics-port`) set, its Prometheus metrics are served on that
port of the listen host at `/metrics` (`app/process_metrics.py`; for a super-user's token only
with QUIRE_METRICS_REQUIRE_TOKEN). The bookie port asks clients for the cluster secret and speaks
TLS as the settings say (`bookie.auth`); the start-up line says which. SIGTERM or SIGINT: stop
heartbeating (recorded as down), stop accepting, let requests in flight finish (bounded), close
the engine, exit 0. A heartbeat refused because the bookie id was formatted as another instance
(or taken over by another process) stops it the same way (without recording it down: that is the
other one now) and exits 1. Runs on uvloop when installed.
A journal damaged before intact records (not a torn tail, `bookie.storage.recovery`) or a data
dir in use stops the start with one line and exit 1. Another live process registered under the
bookie id (a copy of its data directory, the bookie started twice; `bookie.registration`) stops
the start with one line and exit 2.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import signal
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from app.listen import bind_tcp
from app.settings import Settings
from bookie.auth import ServerSecurity
from bookie.errors import BookieError, TwinBookieError
from bookie.server import BookieServer, ServerConfig

if TYPE_CHECKING:
    from wsgiref.simple_server import WSGIServer

    from bookie.ledger_gc import LedgerGarbageCollector
    from bookie.recovery_store import RecoveryStore
    from bookie.registration import BookieRegistration
    from bookie.scrubber import Scrubber
    from bookie.storage.engine import LedgerStorage

log = logging.getLogger("quire.bookie")
EXIT_TWIN = 2  # as every refusal an operator must fix (`app.registry.EXIT_SETTINGS`)


def storage_config(settings: Settings) -> Any:
    """The engine's frozen config: every StorageConfig field that has a same-named setting."""
    from bookie.storage.engine import StorageConfig

    values: dict[str, Any] = {"data_dir": settings.data_dir}
    for field in dataclasses.fields(StorageConfig):
        if field.name != "data_dir" and field.name in Settings.model_fields:
            values[field.name] = getattr(settings, field.name)
    try:
        return StorageConfig(**values)
    except ValueError as exc:  # a value pydantic let through but the engine refuses
        raise SystemExit(f"quire bookie: invalid storage settings: {exc}") from exc


def listen_host(settings: Settings) -> str:
    """`quire bookie --host H` sets QUIRE_HOST; an explicit QUIRE_BOOKIE_HOST still wins."""
    if "host" in settings.model_fields_set and "bookie_host" not in settings.model_fields_set:
        return settings.host
    return settings.bookie_host


def server_config(settings: Settings) -> ServerConfig:
    return ServerConfig(
        host=listen_host(settings),
        port=settings.bookie_port,
        max_frame_bytes=settings.bookie_max_frame_bytes,
        max_requests_in_flight=settings.bookie_max_requests_in_flight,
        security=ServerSecurity(
            secret=settings.bookie_secret(),
            cert_file=settings.bookie_tls_cert_file,
            key_file=settings.bookie_tls_key_file,
            ca_file=settings.bookie_tls_ca_file,
        ),
    )


def door(config: ServerConfig) -> str:
    """How the bookie port admits clients, for the start-up line (never the secret)."""
    security = config.security
    parts = ["mutual TLS" if security.mutual_tls else "TLS" if security.cert_file else "plain TCP"]
    parts.append("clients authenticate with the cluster secret" if security.secret else "")
    if security.open:
        parts.append("open to anyone who reaches it")
    return ", ".join(p for p in parts if p)


async def serve(settings: Settings, format_disk: bool = False) -> None:
    from app.registry import check_cookie, open_store, registration_config
    from bookie.ledger_gc import LedgerGarbageCollector
    from bookie.registration import BookieRegistration
    from bookie.storage.engine import LedgerStorage

    store = open_store(settings, "bookie")
    try:
        host = listen_host(settings)
        instance_id = check_cookie(settings, store, host, format_disk)
        storage = LedgerStorage(storage_config(settings))
        registration = BookieRegistration(store, storage, registration_config(settings, host, instance_id))
        collector = LedgerGarbageCollector(storage, store, ledger_gc_interval_s(settings))
        scrubber = make_scrubber(settings, storage, store, registration.config.bookie_id)
        await _serve_storage(settings, storage, registration, collector, scrubber)
    finally:
        store.close()


def make_scrubber(
    settings: Settings, storage: LedgerStorage, store: RecoveryStore, bookie_id: str
) -> Scrubber:
    """The scrub, told of every rotten copy the engine meets, listing them in the store."""
    from bookie.metadata_calls import call_store
    from bookie.recovery_store import mark_rotten
    from bookie.registry import wall_clock_ms
    from bookie.scrubber import Scrubber, ScrubConfig

    async def report(ledger_id: int, entry_ids: set[int]) -> bool:
        return await call_store(mark_rotten, store, ledger_id, bookie_id, entry_ids, wall_clock_ms())

    config = ScrubConfig(settings.bookie_scrub_interval_s, settings.bookie_scrub_rate_bytes_per_s)
    scrubber = Scrubber(storage, report, config)
    storage.on_corrupt = scrubber.notice
    return scrubber


def ledger_gc_interval_s(settings: Settings) -> float:
    """The ledger garbage collector's interval; 0 (off) when the bookie's metadata store is its
    own SQLite file (no QUIRE_DATABASE_URL): that store holds none of the cluster's ledgers, so
    every ledger the bookie holds would look deleted."""
    return settings.bookie_ledger_gc_interval_s if settings.database_url else 0.0


async def _serve_storage(
    settings: Settings,
    storage: LedgerStorage,
    registration: BookieRegistration,
    collector: LedgerGarbageCollector,
    scrubber: Scrubber,
) -> None:
    # Handlers first: a SIGTERM that comes as soon as the port answers (before registration is
    # done) still stops the bookie cleanly, once it has started.
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    registration.on_replaced = stop.set
    config = dataclasses.replace(server_config(settings), instance_id=registration.config.instance_id)
    # Ports before the journal's replay: a taken one is one line and exit 2 at once.
    port = bind_tcp(
        config.host, config.port, process="bookie", what="the bookie protocol",
        setting="QUIRE_BOOKIE_PORT (--port)",
    )  # fmt: skip
    try:
        await storage.start()
    except BookieError as exc:  # a damaged journal, a data dir in use: one line, exit 1
        raise SystemExit(f"quire bookie: cannot open the storage in {settings.data_dir}: {exc}") from exc
    server = BookieServer(storage, config)
    try:
        metrics = start_metrics(settings, server, storage, scrubber)
        await server.start(port.listening())
    except SystemExit:
        await storage.close()
        raise
    try:
        await registration.start()
    except TwinBookieError as exc:  # another live process serves this id: an operator must look
        await server.close()
        await storage.close()
        print(f"quire bookie: refusing to start: {exc}", file=sys.stderr, flush=True)
        raise SystemExit(EXIT_TWIN) from None
    except Exception as exc:
        await server.close()
        await storage.close()
        raise SystemExit(f"quire bookie: cannot register in the metadata store: {exc}") from exc
    collector.start()
    scrubber.start()
    log.info(
        "bookie %s listening on %s:%d (%s), data in %s%s",
        registration.config.bookie_id,
        server.config.host,
        server.port,
        door(server.config),
        settings.data_dir.resolve(),
        f"; metrics on http://{server.config.host}:{settings.bookie_metrics_port}/metrics" if metrics else "",
    )
    await stop.wait()
    log.info("bookie stopping")
    await collector.close()
    await scrubber.close()
    await registration.close()
    await server.close()
    if metrics is not None:
        from app.process_metrics import stop_metrics

        await stop_metrics(metrics)
    await storage.close()
    if registration.replaced is not None:
        raise SystemExit(f"quire bookie: stopped: {registration.replaced}")
    log.info("bookie stopped")


def start_metrics(
    settings: Settings, server: BookieServer, storage: LedgerStorage, scrubber: Scrubber | None = None
) -> WSGIServer | None:
    """Serve the bookie's Prometheus metrics on its listen host, unless the port is 0 (off).

    Bound before the bookie port, so that a metrics port in use stops the bookie at start, where
    whoever waits for its port (`quire standalone`) sees it exit."""
    if not settings.bookie_metrics_port:
        return None
    from app.process_metrics import BookieCollector, metrics_auth, serve_metrics

    scrub = None if scrubber is None else scrubber.counters
    collector = BookieCollector(asyncio.get_running_loop(), server, storage, scrub)
    port, auth = settings.bookie_metrics_port, metrics_auth(settings)
    setting = "QUIRE_BOOKIE_METRICS_PORT (--metrics-port)"
    return serve_metrics(collector, server.config.host, port, "bookie", auth, setting)


def _loop_factory() -> Callable[[], asyncio.AbstractEventLoop] | None:
    try:
        import uvloop
    except ImportError:
        return None
    return uvloop.new_event_loop


def run(settings: Settings, format_disk: bool = False) -> None:
    logging.basicConfig(
        level=logging.INFO, stream=sys.stderr, format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )
    with asyncio.Runner(loop_factory=_loop_factory()) as runner:
        runner.run(serve(settings, format_disk))
