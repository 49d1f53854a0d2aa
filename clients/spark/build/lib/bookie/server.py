"""The bookie's TCP server: the wire protocol (bookie.protocol) in front of a storage engine.

One `_Connection` per client socket. Requests are pipelined: every frame read is started at once
(adds, fences and deletes as engine coroutines, driven without a Task -- see `_Drive`; reads
answered inline from the engine's synchronous read path) and each reply is queued as its
request completes, matched by request id, in whatever order they finish. Replies queued in one
event-loop pass leave in one `transport.write`, so a group commit of 256 adds costs one send.

Bad input never reaches the engine and never stops the server: a frame that cannot be framed
(length out of bounds, CRC mismatch) gets a BAD_REQUEST reply and the connection is closed; a
well-framed request that makes no sense (unknown op, bad version, short body) gets BAD_REQUEST
and the connection stays usable. Only the one connection is affected either way.

Backpressure: once `max_requests_in_flight` requests of a connection are running, or while
the client does not drain its replies (the transport's write buffer is past its high-water
mark), the server starts none of the connection's further requests and stops reading from it;
frames already read are held back (at most one read's worth) and TCP pushes back on the client,
which just waits. It starts the held frames and reads again once half of the requests are done
and the replies drain. So a connection never has more than the limit running and never gets
TOO_MANY_REQUESTS for pipelining deeply (that code is left to the engine).

Who may talk (`bookie.auth`): with a secret, a connection is served only after its AUTH
handshake; before that every other request is refused (NOT_AUTHENTICATED) and the connection
closed, without the engine seeing anything. With a certificate the port speaks TLS, and with a
CA as well it asks clients for a certificate (mutual TLS).
"""

from __future__ import annotations

import asyncio
import json
import logging
import socket
import struct
import time
from collections.abc import Callable, Coroutine
from dataclasses import dataclass, field
from typing import Any, cast

from bookie.auth import PRE_AUTH_MAX_FRAME_BYTES, AuthRefused, ServerHandshake, ServerSecurity
from bookie.errors import BookieError, ErrorCode, NoSuchEntryError
from bookie.protocol import (
    ADD_BODY,
    DEFAULT_MAX_FRAME_BYTES,
    FLAG_RECOVERY,
    I64,
    LAST_ENTRY,
    LEDGER,
    LEDGER_ENTRY,
    OP_BAD_VERSION,
    OPS,
    RANGE,
    RANGE_STRIDED,
    VERSION,
    Frame,
    FrameDecoder,
    FrameError,
    Op,
    encode_error,
    encode_ok_add_reply,
    encode_range_reply,
    encode_reply,
)
from bookie.storage.api import LedgerStorageApi

log = logging.getLogger("quire.bookie.server")

_ADD = int(Op.ADD)
_ADD_BODY_SIZE = ADD_BODY.size
_unpack_add = ADD_BODY.unpack_from
_FLUSH_NOW_BYTES = 64 * 1024


@dataclass(frozen=True, slots=True)
class ServerConfig:
    host: str = "127.0.0.1"
    port: int = 3181
    max_frame_bytes: int = DEFAULT_MAX_FRAME_BYTES
    max_requests_in_flight: int = 10_000
    max_read_reply_bytes: int = 4 * 1024 * 1024
    max_read_reply_entries: int = 16_384
    security: ServerSecurity = field(default_factory=ServerSecurity)
    # A connection that has not authenticated this long after it opened is closed (with a secret).
    auth_timeout_s: float = 10.0
    # The cookie's instance id, answered to INSTANCE: clients judge this bookie's "not there" by it.
    instance_id: str = ""


class _Connection(asyncio.Protocol):
    def __init__(self, server: BookieServer) -> None:
        self._server = server
        self._storage = server.storage
        self._config = server.config
        self._max_in_flight = server.config.max_requests_in_flight
        self._held: list[Frame] = []  # read while at the in-flight limit, not started yet
        self._decoder = FrameDecoder(server.config.max_frame_bytes)
        self._transport: asyncio.Transport | None = None
        self._loop = asyncio.get_running_loop()
        self._out: list[bytes] = []
        self._flush_scheduled = False
        self._in_flight = 0
        self._paused_in_flight = False
        self._paused_writing = False
        self._stopping = False  # the server is shutting down: take no new requests
        # Until the AUTH handshake succeeds (with a secret), nothing else is served.
        self._handshake: ServerHandshake | None = None
        self._auth_timer: asyncio.TimerHandle | None = None
        self.peer = "?"

    # --- transport callbacks -------------------------------------------------------------------
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # uvloop's transports are not asyncio.Transport subclasses, but they behave as one.
        self._transport = cast(asyncio.Transport, transport)
        self.peer = str(transport.get_extra_info("peername"))
        self._server.connections.add(self)
        secret = self._config.security.secret
        if secret:
            self._handshake = ServerHandshake(secret)
            self._decoder.max_frame_bytes = PRE_AUTH_MAX_FRAME_BYTES
            self._auth_timer = self._loop.call_later(self._config.auth_timeout_s, self._auth_timed_out)

    def connection_lost(self, exc: Exception | None) -> None:
        # Work in flight on the engine runs to its end (an add may already be in the journal);
        # only its reply is dropped.
        self._transport = None
        self._out.clear()
        self._held = []
        self._server.connections.discard(self)
        if self._auth_timer is not None:
            self._auth_timer.cancel()

    def pause_writing(self) -> None:
        self._paused_writing = True
        self._update_reading()

    def resume_writing(self) -> None:
        self._paused_writing = False
        if self._held and not self._paused_in_flight:
            self._loop.call_soon(self._start_held)
        else:
            self._update_reading()

    def data_received(self, data: bytes) -> None:
        if self._stopping:
            return
        frames = self._decoder.feed(data)
        self._server.requests += len(frames)
        if self._handshake is not None:
            frames = self._authenticate(frames)
            if self._handshake is not None:  # not authenticated yet, or refused
                error = self._decoder.error
                if error is not None and not self._stopping:
                    self._refuse(0, error.request_id, f"not authenticated: send AUTH first ({error})")
                return
        if self._held:
            self._held += frames
        else:
            self._start(frames)
        if self._decoder.error is not None:
            self._fatal(self._decoder.error)

    def _start(self, frames: list[Frame]) -> None:
        for i, (op, flags, request_id, body) in enumerate(frames):
            if self._paused_in_flight or self._paused_writing:
                self._held = frames[i:]
                return
            if op == _ADD:
                self._add(flags, request_id, body)
            else:
                self._request(op, flags, request_id, body)

    # --- authentication (bookie.auth) ------------------------------------------------------------
    def _authenticate(self, frames: list[Frame]) -> list[Frame]:
        """Answer the AUTH frames that open the connection; the frames after an accepted PROOF
        are returned, to be served. Any other request first is refused, and so is a bad AUTH."""
        handshake = self._handshake
        assert handshake is not None
        for i, (op, _flags, request_id, body) in enumerate(frames):
            if op != Op.AUTH:
                self._refuse(op, request_id, f"not authenticated: send AUTH first ({_op_name(op)} refused)")
                return []
            try:
                reply = handshake.answer(body)
            except AuthRefused as exc:
                self._refuse(op, request_id, f"not authenticated: {exc}")
                return []
            self._queue_parts(encode_reply(Op.AUTH, request_id, reply))
            if handshake.done:
                self._handshake = None
                self._decoder.max_frame_bytes = self._config.max_frame_bytes
                if self._auth_timer is not None:
                    self._auth_timer.cancel()
                    self._auth_timer = None
                return frames[i + 1 :]
        return []

    def _refuse(self, op: int, request_id: int, reason: str) -> None:
        """Say why (never with the secret), then close; nothing of the connection is served."""
        self._server.auth_refusals += 1
        log.warning("refused connection from %s: %s", self.peer, reason)
        self._stopping = True
        self._held = []
        self._queue_error(op, request_id, ErrorCode.NOT_AUTHENTICATED, reason)
        self._flush()
        if self._transport is not None:
            self._transport.close()

    def _auth_timed_out(self) -> None:
        self._auth_timer = None
        if self._handshake is not None and not self._stopping and self._transport is not None:
            self._refuse(0, 0, f"not authenticated within {self._config.auth_timeout_s:g} s")

    def stop_reading(self) -> None:
        self._stopping = True
        self._held = []
        self._update_reading()

    def _start_held(self) -> None:
        held, self._held = self._held, []
        if self._transport is not None and not self._transport.is_closing() and not self._stopping:
            self._start(held)
            self._update_reading()

    # --- requests --------------------------------------------------------------------------------
    def _add(self, flags: int, request_id: int, body: bytes) -> None:
        if len(body) < _ADD_BODY_SIZE:
            self._queue_error(_ADD, request_id, ErrorCode.BAD_REQUEST, "ADD body too short")
            return
        ledger_id, entry_id, lac = _unpack_add(body)
        coro = self._storage.add_entry(
            ledger_id, entry_id, lac, body[_ADD_BODY_SIZE:], recovery=bool(flags & FLAG_RECOVERY)
        )
        self._spawn(_ADD, request_id, coro, None)

    def _spawn(
        self, op: int, request_id: int, coro: Coroutine[Any, Any, Any], encode: Callable[[Any], bytes] | None
    ) -> None:
        self._in_flight += 1
        self._server.in_flight += 1
        if self._in_flight >= self._max_in_flight:
            self._paused_in_flight = True
            self._update_reading()
        _Drive(self, op, request_id, coro, encode).step()

    def _finished(self, drive: _Drive, result: Any, exc: BaseException | None) -> None:
        self._in_flight -= 1
        self._server.in_flight -= 1
        if self._paused_in_flight and self._in_flight <= self._max_in_flight // 2:
            self._paused_in_flight = False
            if self._held and not self._paused_writing:
                # Not from inside this call: it may run within _start's own loop.
                self._loop.call_soon(self._start_held)
            else:
                self._update_reading()
        if self._transport is None:
            return
        op, request_id = drive.op, drive.request_id
        if exc is None:
            if op == _ADD:
                self._queue(encode_ok_add_reply(request_id))
            else:
                assert drive.encode is not None
                self._queue_parts(encode_reply(op, request_id, drive.encode(result)))
        else:
            self._queue_exception(op, request_id, exc)

    def _request(self, op: int, flags: int, request_id: int, body: bytes) -> None:
        """Every op but ADD: reads are answered inline, fence/delete run as tasks."""
        if op == OP_BAD_VERSION:
            self._queue_error(0, request_id, ErrorCode.BAD_REQUEST, f"unsupported version, speak {VERSION}")
            return
        if op not in OPS:
            self._queue_error(op, request_id, ErrorCode.BAD_REQUEST, f"unknown op {op}")
            return
        if op == Op.AUTH:
            # An AUTH after the handshake, or to a bookie without a secret (bookie.auth).
            on = bool(self._config.security.secret)
            why = "already authenticated" if on else "authentication is off on this bookie"
            self._queue_error(op, request_id, ErrorCode.BAD_REQUEST, why)
            return
        try:
            if op in (Op.FENCE, Op.DELETE_LEDGER):
                self._start_async(op, request_id, body)
                return
            self._queue_parts(self._answer(op, request_id, body))
        except Exception as exc:  # one bad request must not end the connection
            self._queue_exception(op, request_id, exc)

    def _start_async(self, op: int, request_id: int, body: bytes) -> None:
        (ledger_id,) = LEDGER.unpack(body)
        if op == Op.FENCE:
            self._spawn(op, request_id, self._storage.fence(ledger_id), I64.pack)
        else:
            self._spawn(op, request_id, self._storage.delete_ledger(ledger_id), _empty)

    def _answer(self, op: int, request_id: int, body: bytes) -> list[bytes]:
        storage = self._storage
        if op == Op.READ:
            ledger_id, entry_id = LEDGER_ENTRY.unpack(body)
            payload = storage.read_entry(ledger_id, entry_id)
            self._server.entries_read(1, len(payload))
            return encode_reply(op, request_id, payload=payload)
        if op == Op.READ_RANGE:
            return encode_range_reply(request_id, self._read_range(body))
        if op == Op.READ_LAC:
            (ledger_id,) = LEDGER.unpack(body)
            return encode_reply(op, request_id, I64.pack(storage.read_last_add_confirmed(ledger_id)))
        if op == Op.LAST_ENTRY:
            (ledger_id,) = LEDGER.unpack(body)
            last = storage.last_entry_id(ledger_id)
            lac = storage.read_last_add_confirmed(ledger_id)
            return encode_reply(op, request_id, LAST_ENTRY.pack(last, lac))
        if op == Op.INSTANCE:
            return encode_reply(op, request_id, self._config.instance_id.encode())
        assert op == Op.STATS, op
        if body:
            raise BookieError(ErrorCode.BAD_REQUEST, "STATS takes no body")
        return encode_reply(op, request_id, json.dumps(self._server.stats(), default=str).encode())

    def _read_range(self, body: bytes) -> list[bytes]:
        """Entries first, first+stride, ... up to last, stopping at a missing one or at the
        reply's size bound."""
        if len(body) == RANGE_STRIDED.size:
            ledger_id, first, last, max_bytes, stride = RANGE_STRIDED.unpack(body)
            if stride < 1:
                raise BookieError(ErrorCode.BAD_REQUEST, "READ_RANGE stride must be at least 1")
        else:
            ledger_id, first, last, max_bytes = RANGE.unpack(body)
            stride = 1
        if first > last:
            raise BookieError(ErrorCode.BAD_REQUEST, f"first {first} > last {last}")
        budget = min(max_bytes, self._config.max_read_reply_bytes, self._config.max_frame_bytes - 64)
        last = min(last, first + (self._config.max_read_reply_entries - 1) * stride)
        read = self._storage.read_entry
        out: list[bytes] = []
        size = 0
        for entry_id in range(first, last + 1, stride):
            try:
                payload = read(ledger_id, entry_id)
            except NoSuchEntryError:
                if not out:
                    raise
                break
            size += 4 + len(payload)
            if out and size > budget:
                break
            out.append(payload)
        self._server.entries_read(len(out), sum(map(len, out)))
        return out

    # --- replies -------------------------------------------------------------------------------
    def _queue(self, frame: bytes) -> None:
        self._out.append(frame)
        if not self._flush_scheduled:
            self._flush_scheduled = True
            self._loop.call_soon(self._flush)

    def _queue_parts(self, parts: list[bytes]) -> None:
        self._out.extend(parts)
        if len(parts[-1]) + len(parts[1]) > _FLUSH_NOW_BYTES:
            # A big read reply goes out at once, so that a client which does not read its
            # replies makes the transport pause us (pause_writing) before the next request.
            self._flush()
        elif not self._flush_scheduled:
            self._flush_scheduled = True
            self._loop.call_soon(self._flush)

    def _queue_error(self, op: int, request_id: int, code: ErrorCode, message: str) -> None:
        self._server.errors += 1
        self._queue_parts(encode_error(op, request_id, code, message))

    def _queue_exception(self, op: int, request_id: int, exc: BaseException) -> None:
        if isinstance(exc, BookieError):
            self._queue_error(op, request_id, exc.code, exc.message)
        elif isinstance(exc, (struct.error, ValueError, OverflowError)):
            self._queue_error(op, request_id, ErrorCode.BAD_REQUEST, f"malformed {_op_name(op)} body: {exc}")
        else:
            log.error("%s request %d from %s failed", _op_name(op), request_id, self.peer, exc_info=exc)
            self._queue_error(op, request_id, ErrorCode.INTERNAL, f"{type(exc).__name__}: {exc}")

    def _flush(self) -> None:
        self._flush_scheduled = False
        if self._transport is not None and self._out:
            self._transport.write(b"".join(self._out))
        self._out.clear()

    def _fatal(self, error: FrameError) -> None:
        """The stream lost its framing: say why, then close (queued replies go first)."""
        self._server.bad_frames += 1
        log.info("closing connection from %s: %s", self.peer, error)
        self._queue_parts(encode_error(0, error.request_id, ErrorCode.BAD_REQUEST, str(error)))
        self._flush()
        self._held = []
        if self._transport is not None:
            self._transport.close()

    def _update_reading(self) -> None:
        transport = self._transport
        if transport is None or transport.is_closing():
            return
        if self._paused_in_flight or self._paused_writing or self._held or self._stopping:
            if transport.is_reading():
                transport.pause_reading()
        elif not transport.is_reading():
            transport.resume_reading()


class _Drive:
    """Runs one engine coroutine to its end without an asyncio.Task, and reports to the connection.

    Why: a Task per add costs its creation, its registration in asyncio's task WeakSet and two
    trips through the event loop before the reply is queued -- about half of the server's
    per-add time at 256 adds in flight. This does what Task.__step does for the one thing the
    engine awaits (futures): send, and on a yielded future resume when it is done. The first
    step runs at once, inside data_received, so the add joins the engine's open group before
    the next loop pass. Nothing here cancels: the engine finishes every add it has started.
    """

    __slots__ = ("conn", "coro", "encode", "op", "request_id")

    def __init__(
        self,
        conn: _Connection,
        op: int,
        request_id: int,
        coro: Coroutine[Any, Any, Any],
        encode: Callable[[Any], bytes] | None,
    ) -> None:
        self.conn = conn
        self.op = op
        self.request_id = request_id
        self.coro = coro
        self.encode = encode

    def step(self, _: object = None) -> None:
        try:
            awaited = self.coro.send(None)
        except StopIteration as stop:
            self.conn._finished(self, stop.value, None)
            return
        except Exception as exc:
            self.conn._finished(self, None, exc)
            return
        if awaited is None:  # a bare yield (asyncio.sleep(0)): just run again next pass
            self.conn._loop.call_soon(self.step)
            return
        # Every add of a group commit waits on the same future: one callback resumes them all,
        # in the order they started, instead of one loop callback each.
        awaited._asyncio_future_blocking = False  # as Task.__step does, or the next await fails
        waiters = self.conn._server.waiters
        drives = waiters.get(awaited)
        if drives is None:
            waiters[awaited] = [self]
            awaited.add_done_callback(self.conn._server.resume)
        else:
            drives.append(self)


def _empty(_: object) -> bytes:
    return b""


def _op_name(op: int) -> str:
    return Op(op).name if op in OPS else f"op {op}"


class BookieServer:
    """Serves one storage engine on one TCP port. `start` binds (port 0 picks a free port)."""

    def __init__(self, storage: LedgerStorageApi, config: ServerConfig) -> None:
        self.storage = storage
        self.config = config
        self.connections: set[_Connection] = set()
        self.requests = 0
        self.errors = 0
        self.bad_frames = 0
        self.auth_refusals = 0  # connections refused by the AUTH handshake (bookie.auth)
        self.in_flight = 0
        self.read_entries = 0  # entries answered to READ and READ_RANGE, and their bytes
        self.read_bytes = 0
        self.waiters: dict[asyncio.Future[Any], list[_Drive]] = {}  # see _Drive.step
        self._server: asyncio.Server | None = None

    async def start(self, sock: socket.socket | None = None) -> None:
        """Listen on the config's host:port, or on `sock` when the process bound it already."""
        loop = asyncio.get_running_loop()
        ssl_context = self.config.security.ssl_context()
        if sock is not None:
            self._server = await loop.create_server(lambda: _Connection(self), sock=sock, ssl=ssl_context)
            return
        self._server = await loop.create_server(
            lambda: _Connection(self), self.config.host, self.config.port, reuse_address=True, ssl=ssl_context
        )

    def resume(self, awaited: asyncio.Future[Any]) -> None:
        for drive in self.waiters.pop(awaited):
            drive.step()

    def entries_read(self, entries: int, payload_bytes: int) -> None:
        self.read_entries += entries
        self.read_bytes += payload_bytes

    @property
    def port(self) -> int:
        assert self._server is not None and self._server.sockets
        return int(self._server.sockets[0].getsockname()[1])

    def stats(self) -> dict[str, object]:
        return {
            **self.storage.stats(),
            "server": {
                "connections": len(self.connections),
                "requests": self.requests,
                "errors": self.errors,
                "bad_frames": self.bad_frames,
                "auth_refusals": self.auth_refusals,
                "in_flight": self.in_flight,
                "read_entries": self.read_entries,
                "read_bytes": self.read_bytes,
            },
        }

    async def close(self, drain_timeout_s: float = 10.0) -> None:
        """Stop accepting and reading, let requests in flight finish (bounded) so their replies go
        out, then close every connection."""
        if self._server is not None:
            self._server.close()
        for conn in list(self.connections):
            conn.stop_reading()
        deadline = time.monotonic() + drain_timeout_s
        while self.in_flight and time.monotonic() < deadline:
            await asyncio.sleep(0.01)
        for conn in list(self.connections):
            conn._flush()
            if conn._transport is not None:
                conn._transport.close()
        if self._server is not None:
            await self._server.wait_closed()
            self._server = None
