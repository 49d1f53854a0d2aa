"""The one async seam onto the metadata store: every async caller reaches the (synchronous) store
through `call_store`, and this module alone owns the threads those calls run on.

The store is synchronous (SQLAlchemy Core, or the in-memory store of tests), and the broker,
bookie, compactor and auto-recovery are asyncio programs. A call runs on a thread of a *lane*:

- `DEFAULT`: the pool every store call uses unless it says otherwise, as many threads as
  `asyncio.to_thread`'s default pool (min(32, CPUs + 4)), so moving the callers here changed
  nothing in how many calls may be in flight at once;
- `HEARTBEAT`: threads of its own for lease renewal (the broker's session heartbeat). Behind a
  queue of slow calls in the default pool a renewal could arrive after its lease ended and cost
  the broker every topic it owns; on its own threads it waits for nobody but the store. A broker
  renews one call at a time, so one thread would do; there are a few because tests run several
  brokers in one process, and one broker's held renewal must not hold up another's.

Each call may carry a timeout (`timeout_s`; none unless the caller or the seam's default gives one):
past it the caller gets `MetadataUnavailableError`, retriable, and the thread finishes the call
in the background, unseen (a thread cannot be interrupted; a store call is a short transaction).
Every call is timed from submission to result, queueing included (what the caller waited), into
a histogram per lane; the figures are plain numbers and `app/` exports them
(`app/process_metrics.py`, `quire_metadata_call_seconds`). Observations are made on the calling
event loop's thread, after the call; one process runs one loop.

Errors: the store's own `MetadataError`s pass through untouched. A foreign error that reached
the seam untranslated (a raw SQLAlchemy `OperationalError`, a DBAPI connection error) is put
through the seam's translators; the SQL store installs its own when it is built
(`managed_ledger.metadata.sql_errors.unavailable`), because this package may not know SQLAlchemy
(the import contracts keep it in the metadata store). A translator returns the error to raise
instead, or None to let the original through.

Why here, in `bookie/`: the ledger lifecycle (`bookie.ledgers`), the rereplication worker and the
checker call the store too, and `bookie/` sits below `managed_ledger/` in the layers, so the one
seam must live at the lowest layer that calls the store, next to the store's errors
(`bookie.ledger_metadata`). Every caller above imports it from here.
"""

from __future__ import annotations

import asyncio
import contextvars
import functools
import os
import time
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, Final, TypeVar

from bookie.ledger_metadata import MetadataError, MetadataUnavailableError
from common.histogram import Histogram, HistogramSnapshot

T = TypeVar("T")
Translator = Callable[[Exception], Exception | None]

DEFAULT: Final = "default"
HEARTBEAT: Final = "heartbeat"
# 0.5 ms (a SQLite read) to 10 s (a database failing over); past that, the +Inf bucket.
CALL_SECONDS_BOUNDS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)
_THREAD_NAMES = {DEFAULT: "quire-metadata", HEARTBEAT: "quire-lease"}
_UNSET: Any = object()


def default_lanes() -> dict[str, int]:
    return {DEFAULT: min(32, (os.cpu_count() or 1) + 4), HEARTBEAT: 4}


@dataclass(frozen=True, slots=True)
class LaneFigures:
    seconds: HistogramSnapshot
    timeouts: int


class _Lane:
    __slots__ = ("executor", "seconds", "timeouts")

    def __init__(self, name: str, threads: int) -> None:
        prefix = _THREAD_NAMES.get(name, f"quire-metadata-{name}")
        self.executor = ThreadPoolExecutor(max_workers=threads, thread_name_prefix=prefix)
        self.seconds = Histogram(CALL_SECONDS_BOUNDS)
        self.timeouts = 0


class MetadataCalls:
    """Lanes of threads for store calls, with timeouts, timing and error translation."""

    def __init__(self, lanes: Mapping[str, int] | None = None, *, timeout_s: float | None = None) -> None:
        lanes = default_lanes() if lanes is None else dict(lanes)
        if DEFAULT not in lanes or any(n < 1 for n in lanes.values()):
            raise ValueError(f"lanes need a {DEFAULT!r} lane and at least one thread each: {lanes}")
        self._lanes = {name: _Lane(name, threads) for name, threads in lanes.items()}
        self.timeout_s = timeout_s
        self._translators: list[Translator] = []

    def translate_with(self, translator: Translator) -> None:
        """Add a translator for foreign errors (once; adding the same one again does nothing)."""
        if translator not in self._translators:
            self._translators.append(translator)

    async def call(
        self, fn: Callable[..., T], *args: Any, lane: str = DEFAULT, timeout_s: float | None = _UNSET
    ) -> T:
        """`fn(*args)` on a thread of `lane`; its result, or its error (translated)."""
        where = self._lanes[lane]
        limit = self.timeout_s if timeout_s is _UNSET else timeout_s
        # Like asyncio.to_thread: the call sees the caller's context variables.
        run = functools.partial(contextvars.copy_context().run, fn, *args)
        started = time.monotonic()
        try:
            future = asyncio.get_running_loop().run_in_executor(where.executor, run)
            if limit is None:
                return await future
            try:
                return await asyncio.wait_for(future, limit)
            except TimeoutError:
                if not future.cancelled():
                    raise  # the call's own TimeoutError (a socket's, say), not the seam's limit
                where.timeouts += 1
                name = getattr(fn, "__qualname__", repr(fn))
                raise MetadataUnavailableError(f"metadata call {name} took over {limit} s") from None
        except MetadataError:
            raise
        except Exception as exc:
            translated = self._translate(exc)
            if translated is None:
                raise
            raise translated from exc
        finally:
            where.seconds.observe(time.monotonic() - started)

    def _translate(self, exc: Exception) -> Exception | None:
        for translator in self._translators:
            translated = translator(exc)
            if translated is not None:
                return translated
        return None

    def figures(self) -> dict[str, LaneFigures]:
        """Per lane, on the loop that makes the calls: the call times and the timeouts so far."""
        return {
            name: LaneFigures(lane.seconds.snapshot(), lane.timeouts) for name, lane in self._lanes.items()
        }

    def shutdown(self) -> None:
        """Let the threads go once their calls end (the process's instance is never shut down)."""
        for lane in self._lanes.values():
            lane.executor.shutdown(wait=False)


# The process's seam: one pool per process, like the default executor it replaces.
metadata_calls = MetadataCalls()


async def call_store(fn: Callable[..., T], *args: Any, lane: str = DEFAULT) -> T:
    """`fn(*args)`, a call into the metadata store, through the process's seam."""
    return await metadata_calls.call(fn, *args, lane=lane)
