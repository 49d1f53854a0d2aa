"""`quire broker`: the FastAPI app on one uvicorn worker with uvloop, on settings host:port.

Before serving it waits (bounded by QUIRE_BOOKIE_WAIT_TIMEOUT_MS) until ensemble_size bookies
are live in the registry, and exits naming the shortfall if they never are: a broker that
cannot place a single ledger would only fail every produce."""

from __future__ import annotations

import gc
import logging

from app.settings import Settings


def run(settings: Settings) -> None:
    import uvicorn

    from app.main import create_app
    from app.registry import broker_registry
    from app.routes.cluster import install_registry
    from app.wiring import bootstrap

    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    registry, registry_store = broker_registry(settings)
    app = create_app(bootstrap(settings), max_request_body_bytes=settings.max_request_body_bytes)
    install_registry(app, registry, registry_store)
    # The broker's heap (cursors, pending maps, decoded entries) is large and long-lived; with
    # CPython's default thresholds the collector re-walks it many times a second under load and
    # takes about half of the consume path's CPU (measured with py-spy and `make bench`).
    gc.set_threshold(100_000, 50, 1000)
    # One worker: the broker owns each topic's managed ledger (a single writer per ledger).
    try:
        uvicorn.run(
            app,
            host=settings.host,
            port=settings.port,
            loop="uvloop",
            http="auto",  # httptools when installed, else h11
            workers=1,
            access_log=False,
            log_level="info",
            timeout_graceful_shutdown=5,
        )
    finally:
        registry_store.close()
