"""Prometheus metrics of the bookie and compactor processes, each served on a port of its own.

The figures are plain numbers that `bookie/` and `compactor/` keep on their event loop (the
engine counts once per group commit, the server once per read request, the compactor once per
run): nothing on the hot path calls prometheus_client. A scrape runs in a thread of
prometheus_client's HTTP server; it asks the process's event loop for a snapshot of the figures
(`on_loop`), so that it never reads a histogram half-updated, and turns the snapshot into metric
families. A loop too busy to answer within `SCRAPE_TIMEOUT_S` fails the scrape rather than
stalling it.

With authentication and `QUIRE_METRICS_REQUIRE_TOKEN` on, these ports ask for what the broker's
`/metrics` asks for (`MetricsAuth`): a Bearer token that verifies with the brokers' key and, with
authorization on, names a super-user role; 401 or 403 otherwise, never echoing the token.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import socket
import threading
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypeVar
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server

from prometheus_client import CollectorRegistry, make_wsgi_app
from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
)
from prometheus_client.exposition import ThreadingWSGIServer
from prometheus_client.registry import Collector

from app.listen import cannot_listen
from bookie.metadata_calls import LaneFigures, MetadataCalls, metadata_calls
from common.histogram import HistogramSnapshot

if TYPE_CHECKING:
    from wsgiref.types import StartResponse, WSGIApplication, WSGIEnvironment

    from app.auth.tokens import TokenVerifier
    from app.settings import Settings
    from bookie.scrubber import ScrubCounters
    from bookie.server import BookieServer
    from bookie.storage.engine import LedgerStorage
    from compactor.stats import CompactionStats

SCRAPE_TIMEOUT_S = 5.0
T = TypeVar("T")


def on_loop(loop: asyncio.AbstractEventLoop, fn: Callable[[], T], timeout_s: float = SCRAPE_TIMEOUT_S) -> T:
    """Call `fn` on `loop`'s thread between two of its callbacks, and wait for its result."""
    future: concurrent.futures.Future[T] = concurrent.futures.Future()

    def call() -> None:
        if not future.set_running_or_notify_cancel():
            return
        try:
            future.set_result(fn())
        except BaseException as exc:
            future.set_exception(exc)

    loop.call_soon_threadsafe(call)
    try:
        return future.result(timeout_s)
    except TimeoutError:
        future.cancel()  # the call, when the loop gets to it, does nothing
        raise


def _buckets(snapshot: HistogramSnapshot) -> list[tuple[str, float]]:
    return [("+Inf" if le == float("inf") else repr(le), count) for le, count in snapshot.buckets]


def histogram(name: str, documentation: str, snapshot: HistogramSnapshot) -> HistogramMetricFamily:
    return HistogramMetricFamily(name, documentation, buckets=_buckets(snapshot), sum_value=snapshot.sum)


# --- metadata store calls (every process) ------------------------------------------------------


class MetadataCallsCollector(Collector):
    """The metadata store seam's figures per lane (`bookie.metadata_calls`): how long calls took,
    queueing included, and how many ran past their timeout. With a `loop`, read on it (a scrape
    from another thread); without, read in place (the broker's `/metrics` runs on its loop)."""

    def __init__(
        self, loop: asyncio.AbstractEventLoop | None = None, calls: MetadataCalls = metadata_calls
    ) -> None:
        self.loop = loop
        self.calls = calls

    def collect(self) -> Iterator[Metric]:
        figures: dict[str, LaneFigures]
        figures = self.calls.figures() if self.loop is None else on_loop(self.loop, self.calls.figures)
        seconds = HistogramMetricFamily(
            "quire_metadata_call_seconds",
            "Time of a metadata store call as its caller waited for it (queueing included), by lane",
            labels=["lane"],
        )
        timeouts = CounterMetricFamily(
            "quire_metadata_call_timeouts",
            "Metadata store calls that ran past their timeout",
            labels=["lane"],
        )
        for lane, lane_figures in sorted(figures.items()):
            seconds.add_metric([lane], _buckets(lane_figures.seconds), lane_figures.seconds.sum)
            timeouts.add_metric([lane], lane_figures.timeouts)
        yield seconds
        yield timeouts


# --- bookie ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class BookieFigures:
    stats: dict[str, Any]  # BookieServer.stats(): the engine's figures and a "server" part
    sync_seconds: HistogramSnapshot
    group_entries: HistogramSnapshot


class BookieCollector(Collector):
    """The bookie's metrics, after BookKeeper's: adds and reads (bookie_journal_JOURNAL_ADD_ENTRY,
    READ_ENTRY), fsync time and entries per fsync (JOURNAL_SYNC, the force-write batch size),
    read-only (SERVER_STATUS), disk usage and ledgers."""

    def __init__(
        self,
        loop: asyncio.AbstractEventLoop,
        server: BookieServer,
        storage: LedgerStorage,
        scrub: ScrubCounters | None = None,
    ) -> None:
        self.loop = loop
        self.server = server
        self.storage = storage
        self.scrub = scrub

    def figures(self) -> BookieFigures:
        """On the loop: the figures as they stand between two of its callbacks."""
        journal = self.storage.journal_stats
        return BookieFigures(
            self.server.stats(), journal.sync_seconds.snapshot(), journal.group_entries.snapshot()
        )

    def collect(self) -> Iterator[Metric]:
        figures = on_loop(self.loop, self.figures)
        stats, server = figures.stats, figures.stats["server"]
        for name, documentation, value in (
            ("add_entries", "Entries stored: written and fdatasynced, then acknowledged", stats["adds"]),
            ("add_bytes", "Payload bytes of the entries stored", stats["add_bytes"]),
            ("read_entries", "Entries read (READ and READ_RANGE replies)", server["read_entries"]),
            ("read_bytes", "Payload bytes of the entries read", server["read_bytes"]),
            ("requests", "Requests received, of every op", server["requests"]),
            ("request_errors", "Requests answered with an error code", server["errors"]),
            ("auth_refusals", "Connections refused: no AUTH first, or a wrong one", server["auth_refusals"]),
            ("journal_rolls", "Journal segments sealed and rolled over", stats["rolls"]),
            ("gc_runs", "Garbage collector runs", stats["gc_runs"]),
        ):
            yield CounterMetricFamily(f"quire_bookie_{name}", documentation, value=value)
        if self.scrub is not None:
            for name, documentation, value in (
                ("scrub_passes", "Scrubs done: every entry held read back", self.scrub.passes),
                ("scrub_entries", "Entries read by the scrub", self.scrub.entries_scrubbed),
                ("rotten_copies", "Copies found rotten (checksum failed; by the scrub or a read)",
                 self.scrub.rotten_found),
                ("rotten_copies_listed", "Rotten copies listed for repair", self.scrub.rotten_listed),
            ):  # fmt: skip
                yield CounterMetricFamily(f"quire_bookie_{name}", documentation, value=value)
        yield histogram(
            "quire_bookie_journal_sync_seconds",
            "Time of the fdatasync of one group commit",
            figures.sync_seconds,
        )
        yield histogram(
            "quire_bookie_journal_group_entries",
            "Entries covered by one group commit's fdatasync (0 for a group of fences or deletes)",
            figures.group_entries,
        )
        read_only = 1 if stats["read_only"] else 0
        for name, documentation, value in (
            ("read_only", "1 while adds are refused (disk past its high-water mark, or full)", read_only),
            ("disk_usage_ratio", "Used fraction of the data disk, as last measured", stats["disk_usage"]),
            ("ledgers", "Ledgers stored (deleted ones excluded)", stats["ledgers"]),
            ("journal_bytes", "Bytes of the journal segment files", stats["journal_bytes"]),
            ("connections", "Open client connections", server["connections"]),
        ):
            yield GaugeMetricFamily(f"quire_bookie_{name}", documentation, value=value)


# --- compactor ---------------------------------------------------------------------------------


class CompactorCollector(Collector):
    def __init__(self, loop: asyncio.AbstractEventLoop, stats: CompactionStats) -> None:
        self.loop = loop
        self.stats = stats

    def figures(self) -> tuple[int, int, int, int, int, HistogramSnapshot]:
        s = self.stats
        snapshot = s.duration_seconds.snapshot()
        return s.succeeded, s.failed, s.running, s.messages_read, s.messages_kept, snapshot

    def collect(self) -> Iterator[Metric]:
        succeeded, failed, running, read, kept, durations = on_loop(self.loop, self.figures)
        runs = CounterMetricFamily(
            "quire_compaction_runs", "Compaction runs this compactor took, by result", labels=["result"]
        )
        runs.add_metric(["success"], succeeded)
        runs.add_metric(["error"], failed)
        yield runs
        yield histogram("quire_compaction_duration_seconds", "Duration of a compaction run", durations)
        yield CounterMetricFamily(
            "quire_compaction_messages_read",
            "Messages successful runs read: the previous compacted view's and the new ones",
            value=read,
        )
        yield CounterMetricFamily(
            "quire_compaction_messages_kept",
            "Messages successful runs wrote to their compacted ledgers",
            value=kept,
        )
        yield GaugeMetricFamily("quire_compaction_running", "Compaction runs in progress", value=running)


# --- serving -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class MetricsAuth:
    """The broker's rule for `/metrics` with QUIRE_METRICS_REQUIRE_TOKEN, for a metrics port."""

    verifier: TokenVerifier
    authorization: bool
    super_user_roles: frozenset[str]
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False, compare=False)

    def refusal(self, header: str | None) -> tuple[str, str] | None:
        """None when the `Authorization` header may read the metrics; else (status, reason)."""
        from app.auth.tokens import TokenRefused, bearer_token

        token = bearer_token(header.encode("latin-1", "replace") if header else None)
        if token is None:
            return "401 Unauthorized", "authentication required: send `Authorization: Bearer <token>`"
        try:
            with self._lock:  # scrapes come on threads; the verifier's cache is not thread-safe
                role = self.verifier.role(token)
        except TokenRefused as exc:
            return "401 Unauthorized", f"invalid token: {exc}"
        if self.authorization and role not in self.super_user_roles:
            return "403 Forbidden", f"role {role!r} is not a super-user: metrics are for super-users"
        return None


def metrics_auth(settings: Settings) -> MetricsAuth | None:
    """The metrics ports' rule from the settings: None (open) unless authentication and
    QUIRE_METRICS_REQUIRE_TOKEN are both on, as for the broker's `/metrics`."""
    if not (settings.authentication_enabled and settings.metrics_require_token):
        return None
    from app.auth.tokens import TokenVerifier

    return MetricsAuth(
        TokenVerifier(settings.token_verification_key()),
        settings.effective_authorization_enabled,
        frozenset(settings.super_user_roles),
    )


def _guarded(app: WSGIApplication, auth: MetricsAuth) -> WSGIApplication:
    def guarded(environ: WSGIEnvironment, start_response: StartResponse) -> Iterable[bytes]:
        refused = auth.refusal(environ.get("HTTP_AUTHORIZATION"))
        if refused is None:
            return app(environ, start_response)
        status, reason = refused
        headers = [("Content-Type", "text/plain; charset=utf-8")]
        if status.startswith("401"):
            headers.append(("WWW-Authenticate", 'Bearer realm="quire"'))
        start_response(status, headers)
        return [reason.encode() + b"\n"]

    return guarded


class _QuietHandler(WSGIRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:  # no line per scrape on stderr
        pass


def serve_metrics(
    collector: Collector,
    host: str,
    port: int,
    process: str,
    auth: MetricsAuth | None,
    setting: str,
) -> WSGIServer:
    """Serve `collector` at http://host:port/metrics (asking for a token with `auth`), from a
    daemon thread; one line naming `setting` and exit 2 when it cannot listen there
    (`app.listen`). Stop it with `stop_metrics`. Called on the process's event loop: every
    process with a metrics port calls the metadata store, and its calls are served beside."""
    registry = CollectorRegistry()
    registry.register(collector)
    registry.register(MetadataCallsCollector(asyncio.get_running_loop()))
    app = make_wsgi_app(registry)
    if auth is not None:
        app = _guarded(app, auth)

    class Server(ThreadingWSGIServer):
        pass

    try:
        Server.address_family = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)[0][0]
        server = make_server(host, port, app, Server, handler_class=_QuietHandler)
    except OSError as exc:
        cannot_listen(process, "metrics", host, port, setting, exc)
    threading.Thread(target=server.serve_forever, name=f"{process}-metrics", daemon=True).start()
    return server


async def stop_metrics(server: WSGIServer) -> None:
    # shutdown() waits for the serving thread's next poll (up to half a second): not on the loop.
    await asyncio.to_thread(server.shutdown)
    server.server_close()
