"""The bookie registry's composition: config objects from the settings, the bookie's identity
check at start, and the broker's wait for enough live bookies before it serves.

Kept apart from `app/wiring.py` so the broker's topic stack and the registry can be built and
tested on their own; both open the same metadata store (the settings' database URL).
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from app.settings import Settings
from bookie.registration import RegistrationConfig
from bookie.registry import BookieRegistry, BookieState, MetadataBookieRegistry, RegistryConfig

if TYPE_CHECKING:
    from managed_ledger.metadata.sql import SqlMetadataStore

WAIT_POLL_S = 0.25
EXIT_SETTINGS = 2  # the exit code of every refusal an operator must fix (as bad settings)


def registry_config(settings: Settings) -> RegistryConfig:
    return RegistryConfig(heartbeat_timeout_ms=settings.bookie_heartbeat_timeout_ms)


def bookie_id(settings: Settings, listen_host: str) -> str:
    """The id a bookie registers under: the address clients dial, `host:port`."""
    return settings.bookie_advertised_address or f"{listen_host}:{settings.bookie_port}"


def registration_config(settings: Settings, listen_host: str, instance_id: str) -> RegistrationConfig:
    return RegistrationConfig(
        bookie_id=bookie_id(settings, listen_host),
        instance_id=instance_id,
        data_dir=settings.data_dir.resolve(),
        heartbeat_interval_ms=settings.bookie_heartbeat_interval_ms,
        heartbeat_timeout_ms=settings.bookie_heartbeat_timeout_ms,
    )


def open_store(settings: Settings, who: str) -> SqlMetadataStore:
    """The metadata store, or exit naming why it cannot be opened."""
    from managed_ledger.metadata.api import MetadataError
    from managed_ledger.metadata.sql import SqlMetadataStore

    settings.data_dir.mkdir(parents=True, exist_ok=True)
    try:
        return SqlMetadataStore(settings.effective_database_url, auto_upgrade=settings.auto_migrate)
    except MetadataError as exc:
        raise SystemExit(f"quire {who}: cannot open the metadata store: {exc}") from exc


def check_cookie(settings: Settings, store: SqlMetadataStore, listen_host: str, format_disk: bool) -> str:
    """Check the bookie's cookie (see `bookie.cookie`); return its instance id, or exit 2 with
    the reason when the disk is not the one this bookie registered with."""
    from bookie.cookie import CookieMismatchError, establish_cookie
    from managed_ledger.metadata.api import MetadataError

    try:
        cookie = establish_cookie(
            store, bookie_id(settings, listen_host), Path(settings.data_dir), format_disk=format_disk
        )
    except CookieMismatchError as exc:
        print(f"quire bookie: refusing to start: {exc}", file=sys.stderr, flush=True)
        raise SystemExit(EXIT_SETTINGS) from None
    except MetadataError as exc:  # e.g. another process registered the same id just now
        raise SystemExit(f"quire bookie: cannot record its cookie in the metadata store: {exc}") from exc
    return cookie.instance_id


def wait_for_bookies(
    registry: BookieRegistry,
    needed: int,
    timeout_s: float,
    monotonic: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
) -> int:
    """Wait until at least `needed` bookies are live; return how many are, or exit naming the
    shortfall after `timeout_s` (a ledger needs ensemble_size distinct bookies)."""
    deadline = monotonic() + timeout_s
    while True:
        statuses = registry.all_bookies()
        live = [b for b in statuses if b.state not in (BookieState.DOWN, BookieState.DECOMMISSIONED)]
        if len(live) >= needed:
            return len(live)
        if monotonic() >= deadline:
            break
        sleep(WAIT_POLL_S)
    writable = sum(1 for b in live if b.state == BookieState.WRITABLE)
    down = sorted(b.bookie_id for b in statuses if b.state == BookieState.DOWN)
    raise SystemExit(
        f"quire broker: ensemble_size is {needed} but only {len(live)} bookie(s) are live "
        f"({writable} writable) after waiting {timeout_s:g}s"
        + (f"; down: {', '.join(down)}" if down else "")
        + ": start more bookies (each registers itself in the metadata store) or lower "
        "QUIRE_ENSEMBLE_SIZE"
    )


def broker_registry(settings: Settings) -> tuple[MetadataBookieRegistry, SqlMetadataStore]:
    """The broker's registry over its own store handle (closed by the caller), after waiting
    for ensemble_size live bookies."""
    store = open_store(settings, "broker")
    registry = MetadataBookieRegistry(store, registry_config(settings))
    try:
        wait_for_bookies(registry, settings.ensemble_size, settings.bookie_wait_timeout_ms / 1000)
    except BaseException:
        store.close()
        raise
    return registry, store
