"""The Kafka listener's TCP server: frames in, kio requests to handlers, kio responses out.

`KafkaServer(handlers)` serves the APIs it is given handlers for (a mapping from API key to
`Handler`) plus ApiVersions, built in, which advertises exactly those APIs at the ranges of
`versions.ADVERTISED` -- a client never sees an API advertised that nothing answers.

Per connection, one reader and one writer. The reader reads a frame (int32 size, then the
request), decodes it with kio and starts its handler at once, so requests are pipelined: a slow
handler (a Fetch long poll) does not stop the next requests being read and started. OffsetCommit
and OffsetFetch (`SERIAL`) are the exception: each starts once the connection's previous one has
ended, so that their effects follow the request order, as Kafka applies them; likewise a Produce
starts once the connection's earlier Produces naming any of its partitions have ended (produce
to other partitions, and every other request, still runs concurrently). The writer
sends the responses strictly in request order, as Kafka clients require, waiting for each in
turn. At most `max_in_flight` requests (read, not yet answered) and about `max_in_flight_bytes`
of their frames are held per connection; past that the reader stops reading and TCP pushes
back on the client.

A handler returns a kio response object of the request's API and version, or None for no
response (Produce with acks=0); it may raise `CloseConnection` to close its connection.

Bad input affects only its own connection, never the server:

- with authentication on (`authenticated`), a connection that has not authenticated within
  `auth_timeout_s` (10 s), or a frame over 512 KiB before it has: closed;
- a size <= 0 or > `max_request_bytes` (100 MiB, Kafka's socket.request.max.bytes), a frame too
  short for a header or cut short by the end of input, an undecodable header or body: the
  connection is closed;
- an API key that is unknown or not served: closed (logged at info, as every closing is);
- ApiVersions above 3: error 35 in the v0 layout listing ApiVersions 0-3, so the client retries
  with a version we serve (KIP-511);
- Produce v0-2 (advertised, not served): error 35 for each partition named (acks=0: closed);
- another served API at a version outside its range: error 35 when that version's response has
  a top-level error code, else closed;
- a handler raising, or answering with the wrong response type: logged with its traceback, and
  the connection closed.

Responses already due before the bad request are still written, then the connection closes.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import socket
import ssl
from collections.abc import Awaitable, Callable, Coroutine, Hashable, Mapping
from dataclasses import dataclass
from typing import Any, Final, TypeAlias

from app.kafka_listener import wire
from app.kafka_listener.versions import ADVERTISED, PRODUCE_MIN_SERVED, ApiKey, advertised, served_range

log = logging.getLogger("quire.kafka_listener.server")

DEFAULT_MAX_REQUEST_BYTES: Final = 100 * 1024 * 1024  # Kafka's socket.request.max.bytes
DEFAULT_MAX_IN_FLIGHT: Final = 100
DEFAULT_MAX_IN_FLIGHT_BYTES: Final = 64 * 1024 * 1024
_READ_BUFFER_LIMIT: Final = 1024 * 1024  # the stream reader pauses the socket past twice this
_CLOSE_WAIT_S: Final = 1.0


@dataclass(frozen=True, slots=True)
class RequestContext:
    """What a handler knows of its request besides the body. `state` is the connection's own
    dict, the same object for every request of the connection, for handlers to keep state in
    (ApiVersions v3 puts the client's software name and version there as "client_software")."""

    api_key: int
    api_version: int
    correlation_id: int
    client_id: str | None
    peer: str
    state: dict[str, Any]


# A kio request dataclass of the context's API and version (kio.static.protocol.RequestPayload),
# and a kio response dataclass of the same API and version (ResponsePayload).
Request: TypeAlias = Any
Response: TypeAlias = Any
PRE_AUTH_MAX_BYTES: Final = 512 * 1024  # Kafka's sasl.server.max.receive.size
AUTH_TIMEOUT_S: Final = 10.0
Handler: TypeAlias = Callable[[RequestContext, Request], Awaitable[Response | None]]


class CloseConnection(Exception):
    """Raised by a handler: close this connection without answering (logged at info)."""


class _Stop(Exception):
    """The connection must close (the reason is logged where it is raised)."""


@dataclass(slots=True)
class _Item:
    """One request read, in the order read: its response as bytes already, or still running."""

    ctx: RequestContext | None
    outcome: asyncio.Future[Response | None] | bytes
    size: int


class KafkaServer:
    """Serves the Kafka protocol on one TCP port. `start` binds (port 0 picks a free port, then
    `port` tells which); `close` stops it and closes every connection, bounded in time."""

    def __init__(
        self,
        handlers: Mapping[int, Handler],
        *,
        host: str = "127.0.0.1",
        port: int = 9092,
        max_request_bytes: int = DEFAULT_MAX_REQUEST_BYTES,
        max_in_flight: int = DEFAULT_MAX_IN_FLIGHT,
        max_in_flight_bytes: int = DEFAULT_MAX_IN_FLIGHT_BYTES,
        ssl_context: ssl.SSLContext | None = None,
        authenticated: Callable[[dict[str, Any]], bool] | None = None,
        auth_timeout_s: float = AUTH_TIMEOUT_S,
    ) -> None:
        self._ssl = ssl_context
        # With authentication on: whether a connection (by its state) has authenticated. Before
        # it has, a frame is at most PRE_AUTH_MAX_BYTES and the connection is closed when it
        # has not authenticated within auth_timeout_s (a client holds no memory it has no right to).
        self.authenticated = authenticated
        self.auth_timeout_s = auth_timeout_s
        for key in handlers:
            if key == ApiKey.API_VERSIONS or served_range(key) is None:
                raise ValueError(
                    f"no handler can be registered for API key {key}: not in versions.ADVERTISED"
                )
        self.host = host
        self.max_request_bytes = max_request_bytes
        self.max_in_flight = max_in_flight
        self.max_in_flight_bytes = max_in_flight_bytes
        self.handlers: dict[int, Handler] = {**handlers, ApiKey.API_VERSIONS: self._api_versions}
        self.advertised = advertised(self.handlers)
        self.served: dict[int, tuple[int, int]] = {}
        for key in self.handlers:
            served = served_range(key)
            assert served is not None
            self.served[key] = served
        self._api_versions_responses = {
            version: wire.api_versions_response(version, self.advertised)
            for version in range(ADVERTISED[ApiKey.API_VERSIONS][1] + 1)
        }
        self._port = port
        self._server: asyncio.Server | None = None
        self._closing = False
        self.connections: set[_Connection] = set()

    async def start(self, sock: socket.socket | None = None) -> None:
        """Listen on host:port, or on `sock` when the process bound it already (`app.listen`)."""
        if sock is not None:
            self._server = await asyncio.start_server(
                self._accept, sock=sock, limit=_READ_BUFFER_LIMIT, ssl=self._ssl
            )
        else:
            self._server = await asyncio.start_server(
                self._accept,
                self.host,
                self._port,
                limit=_READ_BUFFER_LIMIT,
                reuse_address=True,
                ssl=self._ssl,
            )
        self._port = int(self._server.sockets[0].getsockname()[1])
        log.info("Kafka listener on %s:%d", self.host, self._port)

    @property
    def port(self) -> int:
        return self._port

    async def close(self, timeout_s: float = 5.0) -> None:
        """Stop accepting, then close every connection (requests in flight are abandoned);
        returns within about `timeout_s`."""
        self._closing = True
        if self._server is not None:
            self._server.close()
        tasks = [conn.task for conn in self.connections if conn.task is not None]
        for task in tasks:
            task.cancel()
        if tasks:
            await asyncio.wait(tasks, timeout=timeout_s)
        if self._server is not None:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._server.wait_closed(), timeout_s)
            self._server = None

    async def __aenter__(self) -> KafkaServer:
        await self.start()
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.close()

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        # The connection runs in a task of its own, not in the stream's callback task: Python
        # 3.11's streams ask that task for its exception when it ends, which fails when `close`
        # has cancelled it.
        if self._closing:  # accepted just before `close`
            writer.transport.abort()
            return
        conn = _Connection(self, reader, writer)
        self.connections.add(conn)
        conn.task = asyncio.create_task(self._serve(conn))

    async def _serve(self, conn: _Connection) -> None:
        try:
            await conn.serve()
        finally:
            self.connections.discard(conn)

    async def _api_versions(self, ctx: RequestContext, request: Request) -> Response:
        if ctx.api_version >= 3:
            ctx.state["client_software"] = (request.client_software_name, request.client_software_version)
        return self._api_versions_responses[ctx.api_version]


def _peer_name(writer: asyncio.StreamWriter) -> str:
    peer = writer.get_extra_info("peername")
    if isinstance(peer, tuple) and len(peer) >= 2:
        return f"{peer[0]}:{peer[1]}"
    return str(peer)


# Requests whose effects must follow the request order of their connection, as Kafka applies
# every request of a connection one after the other: two pipelined OffsetCommits of one partition
# (async commits) must not land in reverse, and an OffsetFetch after them sees the last one. Other
# requests run concurrently (a Fetch long poll must not hold the next request up).
SERIAL = frozenset({ApiKey.OFFSET_COMMIT, ApiKey.OFFSET_FETCH})
_OFFSETS: Final = ("offsets",)


def _serial_keys(api_key: int, request: Request) -> tuple[Hashable, ...]:
    """The order keys of a request: it starts once the connection's earlier requests sharing a
    key have ended. A Produce is keyed by each partition it names: an idempotent producer's
    retried batches (up to five in flight) must be checked in the order sent, or a later one
    checked first makes the earlier one look like a gap or a duplicate; other partitions' batches
    need no wait, so a connection's produce throughput across partitions is kept."""
    if api_key in SERIAL:
        return _OFFSETS
    if api_key == ApiKey.PRODUCE:
        return tuple({("produce", t.name, p.index) for t in request.topic_data for p in t.partition_data})
    return ()


async def _after(previous: list[asyncio.Future[Any]], handling: Awaitable[Any]) -> Any:
    """Run `handling` once every one of `previous` (the connection's earlier requests it must
    follow) has ended."""
    try:
        waiting = [f for f in previous if not f.done()]
        if waiting:
            await asyncio.wait(waiting)
    except BaseException:
        if isinstance(handling, Coroutine):
            handling.close()  # cancelled before it started (the connection is closing)
        raise
    return await handling


class _Connection:
    def __init__(
        self, server: KafkaServer, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> None:
        self.server = server
        self.reader = reader
        self.writer = writer
        self.peer = _peer_name(writer)
        self.state: dict[str, Any] = {}
        self.task: asyncio.Task[None] | None = None
        self.queue: asyncio.Queue[_Item | None] = asyncio.Queue()
        self.slots = asyncio.Semaphore(server.max_in_flight)
        self.in_flight_bytes = 0
        self.space = asyncio.Event()
        # The last request started per order key (_serial_keys), while it runs.
        self.tails: dict[Hashable, asyncio.Future[Any]] = {}

    async def serve(self) -> None:
        reading = asyncio.create_task(self._read_loop())
        watchdog = None
        if self.server.authenticated is not None:
            watchdog = asyncio.get_running_loop().call_later(self.server.auth_timeout_s, self._auth_overdue)
        try:
            await self._write_loop()
        except (_Stop, ConnectionError):
            pass
        finally:
            if watchdog is not None:
                watchdog.cancel()
            reading.cancel()
            self._abandon()
            await self._close_transport()
            await asyncio.gather(reading, return_exceptions=True)

    # -- reading ---------------------------------------------------------------------------

    async def _read_loop(self) -> None:
        try:
            while True:
                await self.slots.acquire()
                size = await self._read_size()
                if size is None:
                    return
                await self._wait_for_space(size)
                frame = await self.reader.readexactly(size)
                item = self._dispatch(frame)
                if item is None:
                    return
                self.in_flight_bytes += item.size
                self.queue.put_nowait(item)
        except asyncio.IncompleteReadError as exc:
            log.debug(
                "Kafka connection %s: closed inside a frame (%d bytes read)", self.peer, len(exc.partial)
            )
        except ConnectionError as exc:
            log.debug("Kafka connection %s: %s", self.peer, exc)
        finally:
            self.queue.put_nowait(None)

    def _unauthenticated(self) -> bool:
        """Authentication is on and this connection has not authenticated yet."""
        check = self.server.authenticated
        return check is not None and not check(self.state)

    def _auth_overdue(self) -> None:
        if self._unauthenticated():
            timeout = self.server.auth_timeout_s
            log.info("Kafka connection %s: not authenticated within %.0f s; closing", self.peer, timeout)
            self.writer.close()

    async def _read_size(self) -> int | None:
        """The next frame's size, or None at a clean end of input or a size out of bounds."""
        head = await self.reader.read(4)
        if not head:
            return None
        if len(head) < 4:
            head += await self.reader.readexactly(4 - len(head))
        size = int.from_bytes(head, "big", signed=True)
        bound = self.server.max_request_bytes
        if self._unauthenticated():
            bound = min(bound, PRE_AUTH_MAX_BYTES)
        if size <= 0 or size > bound:
            log.info(
                "Kafka connection %s: request size %d out of bounds (1..%d); closing", self.peer, size, bound
            )
            return None
        return size

    async def _wait_for_space(self, size: int) -> None:
        while self.in_flight_bytes and self.in_flight_bytes + size > self.server.max_in_flight_bytes:
            self.space.clear()
            await self.space.wait()

    def _dispatch(self, frame: bytes) -> _Item | None:
        """Start the request in `frame`: an item to answer in order, or None to close."""
        try:
            api_key, api_version, correlation_id = wire.peek(frame)
            served = self.server.served.get(api_key)
            if served is None:
                log.info("Kafka connection %s: API key %d is not served; closing", self.peer, api_key)
                return None
            if not served[0] <= api_version <= served[1]:
                return self._unsupported(frame, api_key, api_version, correlation_id)
            request_cls = wire.request_type(api_key, api_version)
            assert request_cls is not None, "versions.ADVERTISED lists a version kio has no layout for"
            client_id, request, _ = wire.decode_request(frame, request_cls)
        except wire.WireError as exc:
            log.info("Kafka connection %s: %s; closing", self.peer, exc)
            return None
        ctx = RequestContext(api_key, api_version, correlation_id, client_id, self.peer, self.state)
        try:
            handling = self.server.handlers[api_key](ctx, request)
            keys = _serial_keys(api_key, request)
            if keys:
                handling = _after([self.tails[k] for k in keys if k in self.tails], handling)
            running = asyncio.ensure_future(handling)
            if keys:
                self._follow(keys, running)
        except Exception:
            log.exception(
                "Kafka connection %s: handler of API key %d failed to start; closing", self.peer, api_key
            )
            return None
        return _Item(ctx, running, len(frame))

    def _follow(self, keys: tuple[Hashable, ...], running: asyncio.Future[Any]) -> None:
        """Make `running` the request the next ones with these keys wait for, until it ends."""
        for key in keys:
            self.tails[key] = running

        def ended(done: asyncio.Future[Any]) -> None:
            for key in keys:
                if self.tails.get(key) is done:
                    del self.tails[key]

        running.add_done_callback(ended)

    def _unsupported(self, frame: bytes, api_key: int, api_version: int, correlation_id: int) -> _Item | None:
        if api_key == ApiKey.API_VERSIONS:
            answer: bytes | None = wire.api_versions_unsupported(correlation_id)
        elif api_key == ApiKey.PRODUCE and ADVERTISED[ApiKey.PRODUCE][0] <= api_version < PRODUCE_MIN_SERVED:
            answer = wire.produce_unsupported(frame, api_version)
        else:
            response = wire.unsupported_version_response(api_key, api_version)
            answer = None if response is None else wire.encode_response(correlation_id, response)
        # An ApiVersions version above ours is the normal start of a negotiation (kafka-python
        # sends v4 first): not worth more than a debug line.
        level = logging.DEBUG if api_key == ApiKey.API_VERSIONS else logging.INFO
        log.log(
            level,
            "Kafka connection %s: API key %d version %d is not served; %s",
            self.peer,
            api_key,
            api_version,
            "answered UNSUPPORTED_VERSION" if answer is not None else "closing",
        )
        return None if answer is None else _Item(None, answer, len(frame))

    # -- writing ---------------------------------------------------------------------------

    async def _write_loop(self) -> None:
        while True:
            item = await self.queue.get()
            if item is None:
                return
            try:
                data = await self._answer(item)
            finally:
                self.in_flight_bytes -= item.size
                self.space.set()
                self.slots.release()
            if data is not None:
                self.writer.writelines(data)  # one gathered write: large records are not copied
                await self.writer.drain()

    async def _answer(self, item: _Item) -> list[bytes] | None:
        """The response frame of an item (as pieces), None for no response; _Stop when the
        connection must close."""
        if isinstance(item.outcome, bytes):
            return [item.outcome]
        ctx = item.ctx
        assert ctx is not None
        try:
            response = await item.outcome
            if response is None:
                return None
            response_cls = type(response)
            if (response_cls.__api_key__, response_cls.__version__) != (ctx.api_key, ctx.api_version):
                raise TypeError(
                    f"handler answered {response_cls.__module__}.{response_cls.__name__} to API key "
                    f"{ctx.api_key} version {ctx.api_version}"
                )
            return wire.response_parts(ctx.correlation_id, response)
        except CloseConnection as exc:
            log.info("Kafka connection %s: handler of API key %d closed it: %s", self.peer, ctx.api_key, exc)
            raise _Stop from exc
        except Exception as exc:
            log.exception(
                "Kafka connection %s: handler of API key %d version %d failed; closing",
                self.peer,
                ctx.api_key,
                ctx.api_version,
            )
            raise _Stop from exc

    # -- closing ---------------------------------------------------------------------------

    def _abandon(self) -> None:
        """Cancel every request still running; collect the errors of those done unanswered."""
        while not self.queue.empty():
            item = self.queue.get_nowait()
            if item is None or isinstance(item.outcome, bytes):
                continue
            if item.outcome.done():
                if not item.outcome.cancelled():
                    item.outcome.exception()
            else:
                item.outcome.cancel()

    async def _close_transport(self) -> None:
        """Close after writing what is buffered; a client that does not read it within
        _CLOSE_WAIT_S, or a second cancellation, gets the connection aborted."""
        self.writer.close()
        try:
            await asyncio.wait_for(self.writer.wait_closed(), _CLOSE_WAIT_S)
        except (TimeoutError, OSError):
            pass
        finally:
            self.writer.transport.abort()
