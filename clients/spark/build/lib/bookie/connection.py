"""One multiplexed connection to one bookie, and the reply helpers the client's parts share.

Any number of requests are in flight on a connection, each with a deadline. Replies are matched
by request id and handed to a plain callback, not a future, so an add costs one future (the
caller's) and no task. A lost connection fails every request waiting on it with UNAVAILABLE.

With a secret in the config's `security`, a connection is ready only once the AUTH handshake
(`bookie.auth`) has succeeded; one the bookie refuses, or that cannot prove itself to us, fails
to open with NOT_AUTHENTICATED. With a CA it speaks TLS and checks the bookie's certificate.
"""

from __future__ import annotations

import asyncio
import contextlib
import ssl
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, cast

from bookie.auth import AuthRefused, ClientSecurity, authenticate
from bookie.errors import BookieError, ErrorCode, error_from_code
from bookie.protocol import (
    CODE,
    DEFAULT_MAX_FRAME_BYTES,
    FrameDecoder,
    Op,
    encode_add,
    encode_frame,
)

OK_BODY = CODE.pack(ErrorCode.OK)

# A reply handler: (context, reply body starting with the u16 code).
Callback = Callable[[Any, bytes], None]


@dataclass(frozen=True, slots=True)
class BookieClientConfig:
    connect_timeout_s: float = 5.0
    request_timeout_s: float = 30.0
    # An add without a reply this long counts as a failure of that bookie: the writer replaces
    # it (ensemble change) rather than wait for a bookie that hangs (QUIRE_ADD_ENTRY_TIMEOUT_MS).
    add_timeout_s: float = 5.0
    # A read that has no answer this long is also sent to the next replica; first answer wins
    # (QUIRE_SPECULATIVE_READ_TIMEOUT_MS).
    speculative_read_timeout_s: float = 0.1
    max_frame_bytes: int = DEFAULT_MAX_FRAME_BYTES
    read_chunk_entries: int = 4_096  # entries asked for by one READ_RANGE
    read_chunk_bytes: int = 4 * 1024 * 1024  # reply size bound asked for by one READ_RANGE
    read_parallelism: int = 4  # READ_RANGE requests in flight for one read_entries
    coalesce_max_frames: int = 128  # frames sent in one write at most
    # The bookies `healthy()` checks (readiness); ledgers name their own ensembles. Healthy
    # means at least `health_min_bookies` of them answer (0: all of them): with replication a
    # broker can place and write ledgers while a bookie is down.
    bookies: tuple[str, ...] = ()
    health_min_bookies: int = 0
    health_timeout_s: float = 2.0
    # The secret and TLS files this client proves itself with (bookie.auth); none by default.
    security: ClientSecurity = field(default_factory=ClientSecurity)


def reply_code(body: bytes) -> int:
    return body[0] | (body[1] << 8) if len(body) >= 2 else int(ErrorCode.BAD_REQUEST)


def reply_error(body: bytes, ledger_id: int, entry_id: int = -1) -> BookieError:
    """The typed error for a non-OK reply body, so callers can catch NoSuchEntryError etc."""
    return error_from_code(reply_code(body), body[2:].decode(errors="replace"), ledger_id, entry_id)


def local_error(code: ErrorCode, message: str) -> bytes:
    return CODE.pack(code) + message.encode()


class Connection(asyncio.Protocol):
    """One TCP connection to one bookie, shared by every ledger and request of the client."""

    def __init__(
        self,
        address: str,
        config: BookieClientConfig,
        loop: asyncio.AbstractEventLoop,
        ssl_context: ssl.SSLContext | None = None,
    ) -> None:
        self.address = address
        self._ssl = ssl_context
        self._config = config
        self._loop = loop
        self._timeout_s = config.request_timeout_s
        self._add_timeout_s = config.add_timeout_s
        # Every request's deadline is at least this far after it was sent (see `_sweep`).
        self._min_timeout_s = min(config.request_timeout_s, config.add_timeout_s)
        self._flush_parts = 3 * config.coalesce_max_frames  # encoders return 3 parts a frame
        self._decoder = FrameDecoder(config.max_frame_bytes)
        self._transport: asyncio.Transport | None = None
        # request id -> (callback, context, deadline, time sent), in send order.
        self._pending: dict[int, tuple[Callback, Any, float, float]] = {}
        self._out: list[bytes] = []
        self._flush_scheduled = False
        self._next_request_id = 1
        self._sweeper: asyncio.TimerHandle | None = None
        self.closed = False
        self._heard = False  # any bytes from the bookie yet (see connection_lost)
        # The bookie's instance id (its cookie's), asked once: every reply on this connection
        # comes from that one process. None until asked, or when the bookie does not say.
        self._instance: asyncio.Task[str | None] | None = None
        self.ready: asyncio.Task[None] = loop.create_task(self._connect())

    async def _connect(self) -> None:
        host, _, port = self.address.rpartition(":")
        host = host or "127.0.0.1"
        secret = self._config.security.secret
        try:
            async with asyncio.timeout(self._config.connect_timeout_s):
                await self._loop.create_connection(
                    lambda: self, host, int(port), ssl=self._ssl, server_hostname=host if self._ssl else None
                )
                if secret:
                    await authenticate(self._call_auth, secret)
        except AuthRefused as exc:
            self._lost(f"bookie {self.address} refused authentication: {exc}")
            raise BookieError(ErrorCode.NOT_AUTHENTICATED, f"bookie {self.address}: {exc}") from None
        except BookieError as exc:  # lost while authenticating
            self._lost(f"bookie {self.address}: {exc.message}")
            raise
        except (OSError, TimeoutError, ValueError) as exc:
            self._lost(f"cannot connect to bookie {self.address}: {exc}")
            raise BookieError(ErrorCode.UNAVAILABLE, f"bookie {self.address}: {exc}") from exc

    async def instance(self) -> str | None:
        """The instance id of the bookie at the other end (asked on first use, then remembered);
        None when it has none or predates the INSTANCE op (protocol docstring)."""
        if self._instance is None:
            self._instance = self._loop.create_task(self._ask_instance())
        return await asyncio.shield(self._instance)

    @property
    def known_instance(self) -> str | None:
        """The instance id if it was asked and answered (also once closed), else None."""
        task = self._instance
        if task is None or not task.done() or task.cancelled() or task.exception() is not None:
            return None
        return task.result()

    async def _ask_instance(self) -> str | None:
        reply = await self.call(Op.INSTANCE)
        if reply_code(reply) == ErrorCode.OK:
            return reply[2:].decode(errors="replace") or None
        if reply_code(reply) == ErrorCode.BAD_REQUEST:
            return None  # a bookie from before INSTANCE: unknown
        raise reply_error(reply, -1)

    async def _call_auth(self, body: bytes) -> bytes:
        return await self.call(Op.AUTH, body)

    # --- asyncio.Protocol --------------------------------------------------------------------
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # uvloop's transports are not asyncio.Transport subclasses, but they behave as one.
        self._transport = cast(asyncio.Transport, transport)
        if self.closed:  # closed while connecting
            transport.close()

    def connection_lost(self, exc: Exception | None) -> None:
        why = f"connection to bookie {self.address} lost: {exc or 'closed'}"
        if self._ssl is not None and not self._heard:
            # TLS 1.3 finishes the client's handshake before the bookie checks its certificate:
            # a refusal of it shows as a connection closed before the first reply.
            why += " before its first reply (with mutual TLS: does it accept our client certificate?)"
        self._lost(why)

    def data_received(self, data: bytes) -> None:
        self._heard = True
        pending = self._pending
        for _op, _flags, request_id, body in self._decoder.feed(data):
            handler = pending.pop(request_id, None)
            if handler is not None:
                handler[0](handler[1], body)
        if self._decoder.error is not None:
            self._lost(f"bad frame from bookie {self.address}: {self._decoder.error}")

    # --- requests ------------------------------------------------------------------------------
    def send(
        self, parts: list[bytes], request_id: int, callback: Callback, context: Any, timeout_s: float = 0.0
    ) -> None:
        """Queue a frame; `callback(context, body)` runs once: on the reply, a timeout or a loss.
        The timeout is the request timeout unless `timeout_s` is given."""
        if self.closed:
            body = local_error(ErrorCode.UNAVAILABLE, f"connection to bookie {self.address} is closed")
            self._loop.call_soon(callback, context, body)
            return
        now = self._loop.time()
        self._pending[request_id] = (callback, context, now + (timeout_s or self._timeout_s), now)
        self._out += parts
        if len(self._out) >= self._flush_parts:
            # Do not hold a long burst until the loop pass ends: the bookie can start its
            # group commit on the first frames while this side still encodes the rest.
            self._flush()
        elif not self._flush_scheduled:
            self._flush_scheduled = True
            self._loop.call_soon(self._scheduled_flush)
        if self._sweeper is None:
            self._sweeper = self._loop.call_later(self._sweep_interval(), self._sweep)

    def new_request_id(self) -> int:
        request_id = self._next_request_id
        self._next_request_id = request_id + 1
        return request_id

    def send_add(self, ledger_id: int, entry_id: int, lac: int, payload: bytes, flags: int,
                 callback: Callback, context: Any) -> None:  # fmt: skip
        request_id = self._next_request_id
        self._next_request_id = request_id + 1
        self.send(
            encode_add(request_id, ledger_id, entry_id, lac, payload, flags),
            request_id,
            callback,
            context,
            self._add_timeout_s,
        )

    async def call(self, op: Op, body: bytes = b"") -> bytes:
        """One request; returns the reply body (code included) whatever the code."""
        future: asyncio.Future[bytes] = self._loop.create_future()
        request_id = self.new_request_id()
        self.send(encode_frame(op, 0, request_id, body), request_id, resolve_reply, future)
        return await future

    def _scheduled_flush(self) -> None:
        self._flush_scheduled = False
        self._flush()

    def _flush(self) -> None:
        if self._transport is not None and self._out and not self.closed:
            # One gathered write (uvloop: writev) of the frames' parts, entry payloads included,
            # rather than a joined copy of them all.
            self._transport.writelines(self._out)
        self._out.clear()

    def _sweep_interval(self) -> float:
        return min(max(self._min_timeout_s / 4, 0.01), 1.0)

    def _sweep(self) -> None:
        """Fail requests past their deadline. The dict is in send order and no timeout is shorter
        than the shortest one, so the scan stops at the first request sent less than that ago."""
        self._sweeper = None
        now = self._loop.time()
        oldest_live = now - self._min_timeout_s
        expired = []
        for request_id, (_, _, deadline, sent) in self._pending.items():
            if sent > oldest_live:
                break
            if deadline <= now:
                expired.append(request_id)
        for request_id in expired:
            callback, context, _, _ = self._pending.pop(request_id)
            callback(context, local_error(ErrorCode.TIMEOUT, f"no reply from bookie {self.address}"))
        if self._pending and not self.closed:
            self._sweeper = self._loop.call_later(self._sweep_interval(), self._sweep)

    def _lost(self, why: str) -> None:
        self.closed = True
        if self._sweeper is not None:
            self._sweeper.cancel()
            self._sweeper = None
        if self._transport is not None:
            self._transport.close()
        pending, self._pending = self._pending, {}
        body = local_error(ErrorCode.UNAVAILABLE, why)
        for callback, context, _, _ in pending.values():
            callback(context, body)
        self._out.clear()

    def close(self) -> None:
        if not self.ready.done():
            self.ready.cancel()
        self._lost(f"client closed its connection to bookie {self.address}")

    def abandon(self) -> None:
        """Close from outside the loop that owns this connection (that loop may be closed)."""
        if not self._loop.is_closed():
            with contextlib.suppress(RuntimeError):  # closed in between
                self._loop.call_soon_threadsafe(self.close)
                return
        self.closed = True
        if self._transport is not None:
            with contextlib.suppress(Exception):
                self._transport.get_extra_info("socket").close()


def resolve_reply(future: asyncio.Future[bytes], body: bytes) -> None:
    if not future.done():
        future.set_result(body)
