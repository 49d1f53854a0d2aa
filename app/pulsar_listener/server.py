"""The Pulsar listener's TCP server: frames in, commands to handlers keyed by type, frames out.

Per connection one task reads frames and runs each command's handler in turn (a producer's
SENDs go on to its own queue, `producers`, so a slow write does not stop the reading; a
consumer's deliveries run in its own task, `consumers`). Writes go straight to the transport.

A connection must send CONNECT first, within `connect_timeout_s` and in a frame of at most
`pre_connect_max_frame_bytes`; after CONNECTED its frames may be as large as the largest
message plus 10 KiB. Bad input affects only its own connection: a frame that cannot be read
(`frames.PulsarFrameError`: garbage, a size past the limit, a command that does not decode or lacks a
required field) closes it; an unknown command is answered with an ERROR; a handler that fails
answers with the error's `ServerError` where the command has a request id, and a handler bug is
logged and closes the connection.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
import socket
import ssl
from collections.abc import Awaitable, Callable
from typing import Any

from common.errors import QuireError

from .config import PulsarConfig
from .errors import PulsarFrameError, server_error_of
from .frames import FRAME_OVERHEAD_BYTES, command_frame, message_frame, read_frame
from .proto import pulsar_api_pb2 as pb
from .security import Access

log = logging.getLogger("quire.pulsar")

T = pb.BaseCommand
# A handler gets its connection, the command and what followed it in the frame (a SEND's message).
Handler = Callable[["Connection", pb.BaseCommand, memoryview], Awaitable[None]]
_READ_LIMIT = 1024 * 1024
_CLOSE_WAIT_S = 2.0


class PulsarCloseConnection(Exception):
    """Raised by a handler to close its connection."""


class PulsarServer:
    def __init__(
        self,
        handlers: dict[int, Handler],
        config: PulsarConfig,
        access: Access,
        ssl_context: ssl.SSLContext | None = None,
    ) -> None:
        self.handlers = handlers
        self.config = config
        self.access = access
        self._ssl = ssl_context
        self._server: asyncio.Server | None = None
        self.connections: set[Connection] = set()
        self.port = config.port
        self._ids = itertools.count(1)

    async def start(self, sock: socket.socket | None = None) -> None:
        """Listen on host:port, or on `sock` when the process bound it already (`app.listen`)."""
        if sock is not None:
            self._server = await asyncio.start_server(
                self._accept, sock=sock, limit=_READ_LIMIT, ssl=self._ssl
            )
        else:
            self._server = await asyncio.start_server(
                self._accept, self.config.host, self.config.port, limit=_READ_LIMIT, ssl=self._ssl
            )
        self.port = self._server.sockets[0].getsockname()[1]

    async def close(self) -> None:
        if self._server is not None:
            self._server.close()
        for conn in list(self.connections):
            await conn.close()
        if self._server is not None:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._server.wait_closed(), _CLOSE_WAIT_S)
            self._server = None

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        conn = Connection(self, reader, writer, next(self._ids))
        self.connections.add(conn)
        try:
            await conn.serve()
        finally:
            self.connections.discard(conn)
            await conn.close()


class Connection:
    """One client connection and what it opened: producers and consumers by the client's ids."""

    def __init__(
        self, server: PulsarServer, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, number: int
    ) -> None:
        self.server = server
        self.config = server.config
        self.reader = reader
        self.writer = writer
        self.number = number
        peer = writer.get_extra_info("peername")
        self.peer = f"{peer[0]}:{peer[1]}" if isinstance(peer, tuple) else str(peer)
        self.connected = False
        self.protocol_version = 0
        self.client_version = ""
        self.state: dict[str, Any] = {}  # security's: role, token expiry
        self.producers: dict[int, Any] = {}
        self.consumers: dict[int, Any] = {}
        # Reader consumer id -> where it starts when it subscribes again after a SEEK (readers).
        self.seeks: dict[int, Any] = {}
        self.closed = False

    async def serve(self) -> None:
        try:
            await asyncio.wait_for(self._first(), self.config.connect_timeout_s)
            if not self.connected:
                return
            limit = self.config.max_message_bytes + FRAME_OVERHEAD_BYTES
            while not self.closed:
                frame = await read_frame(self.reader, limit)
                if frame is None:
                    return
                await self.dispatch(frame.command, frame.rest)
        except TimeoutError:
            log.info(
                "Pulsar connection %s: no CONNECT within %ss; closing",
                self.peer,
                self.config.connect_timeout_s,
            )
        except PulsarFrameError as exc:
            log.info("Pulsar connection %s: %s; closing", self.peer, exc)
        except PulsarCloseConnection:
            pass
        except (ConnectionError, OSError):
            pass
        except Exception:
            log.exception("Pulsar connection %s: a handler failed; closing", self.peer)

    async def _first(self) -> None:
        """CONNECT, or the connection closes."""
        frame = await read_frame(self.reader, self.config.pre_connect_max_frame_bytes)
        if frame is None:
            return
        if frame.command.type != T.CONNECT:
            raise PulsarFrameError(f"{_name(frame.command)} before CONNECT")
        await self.dispatch(frame.command, frame.rest)

    async def dispatch(self, command: pb.BaseCommand, rest: memoryview) -> None:
        if not command.HasField("type"):
            self.send_error(0, pb.NotAllowedError, "unknown command type")
            return
        handler = self.server.handlers.get(command.type)
        if handler is None:
            self.send_error(0, pb.NotAllowedError, f"command {_name(command)} is not supported")
            return
        if self.connected and self.server.access.expired(self):
            raise PulsarCloseConnection
        if not command.IsInitialized():
            raise PulsarFrameError(f"{_name(command)} lacks required fields")
        await handler(self, command, rest)

    # --- writing -----------------------------------------------------------------------------
    def send(self, command: pb.BaseCommand) -> None:
        if not self.closed:
            self.writer.write(command_frame(command))

    def send_message(self, command: pb.BaseCommand, metadata: bytes, payload: bytes) -> None:
        if not self.closed:
            self.writer.write(message_frame(command, metadata, payload))

    async def drain(self) -> None:
        if not self.closed:
            await self.writer.drain()

    def send_error(self, request_id: int, error: pb.ServerError.ValueType, message: str) -> None:
        self.send(T(type=T.ERROR, error=pb.CommandError(request_id=request_id, error=error, message=message)))

    def send_failure(self, request_id: int, exc: Exception) -> None:
        """An ERROR for a request that failed with `exc`."""
        if not _known(exc):
            log.warning("Pulsar connection %s: request %d failed", self.peer, request_id, exc_info=exc)
        self.send_error(request_id, server_error_of(exc), str(exc))

    def send_success(self, request_id: int) -> None:
        self.send(T(type=T.SUCCESS, success=pb.CommandSuccess(request_id=request_id)))

    async def close(self) -> None:
        if self.closed:
            return
        self.closed = True
        for consumer in list(self.consumers.values()):
            await consumer.close()
        for producer in list(self.producers.values()):
            await producer.close()
        self.consumers.clear()
        self.producers.clear()
        self.writer.close()
        try:
            await asyncio.wait_for(self.writer.wait_closed(), _CLOSE_WAIT_S)
        except (TimeoutError, OSError):
            pass
        finally:
            self.writer.transport.abort()


def _known(exc: Exception) -> bool:
    return isinstance(exc, QuireError)


def _name(command: pb.BaseCommand) -> str:
    try:
        return T.Type.Name(command.type)
    except ValueError:
        return str(command.type)
