"""`quire bookie --data-dir D --port P`: one storage engine behind the bookie TCP server.

Start: build the engine's StorageConfig from the settings, open the engine (journal replay,
index rebuild), bind the server, log where it listens. SIGTERM or SIGINT: stop accepting, let
requests in flight finish (bounded), close the engine, exit 0. Runs on uvloop when installed.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import signal
import sys
from collections.abc import Callable
from typing import Any

from app.settings import Settings
from bookie.server import BookieServer, ServerConfig

log = logging.getLogger("quire.bookie")


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
    )


async def serve(settings: Settings) -> None:
    from bookie.storage.engine import LedgerStorage

    settings.data_dir.mkdir(parents=True, exist_ok=True)
    storage = LedgerStorage(storage_config(settings))
    await storage.start()
    server = BookieServer(storage, server_config(settings))
    try:
        await server.start()
    except OSError as exc:
        await storage.close()
        raise SystemExit(
            f"quire bookie: cannot listen on {server.config.host}:{settings.bookie_port}: {exc}"
        ) from exc
    log.info(
        "bookie listening on %s:%d, data in %s",
        server.config.host,
        server.port,
        settings.data_dir.resolve(),
    )
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    await stop.wait()
    log.info("bookie stopping")
    await server.close()
    await storage.close()
    log.info("bookie stopped")


def _loop_factory() -> Callable[[], asyncio.AbstractEventLoop] | None:
    try:
        import uvloop
    except ImportError:
        return None
    return uvloop.new_event_loop


def run(settings: Settings) -> None:
    logging.basicConfig(
        level=logging.INFO, stream=sys.stderr, format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )
    with asyncio.Runner(loop_factory=_loop_factory()) as runner:
        runner.run(serve(settings))
