"""Entry copies between named bookies, for re-replication: read one entry from one bookie, and
write it to another as a recovery add.

The ledger client reads from "any replica of the write set" and writes to a whole write set; a
recovery worker needs the opposite: it picks the bookie to read from (a survivor) and the one
to write to (the replacement, not yet in the ledger's metadata). This module speaks the bookie
protocol (`bookie.protocol`) over its own connections, one per bookie address, with any number
of requests in flight on each, matched by request id, each bounded by a timeout.

The add carries the recovery flag, so a bookie that already holds the ledger fenced (it is in
another segment of the same ledger) still takes it; it is answered only once it is fsynced on
the replacement, which is what lets the worker swap the replacement into the metadata after.
Adding an entry the bookie already holds with the same bytes is a no-op there, so a copy that a
crashed worker left half done may simply be copied again.
"""

from __future__ import annotations

import asyncio
import contextlib
from dataclasses import dataclass

from bookie.errors import BookieError, ErrorCode, error_from_code
from bookie.protocol import (
    CODE,
    DEFAULT_MAX_FRAME_BYTES,
    FLAG_RECOVERY,
    LEDGER_ENTRY,
    FrameDecoder,
    Op,
    encode_add,
    encode_frame,
)

NOT_THERE = (ErrorCode.NO_SUCH_ENTRY, ErrorCode.NO_SUCH_LEDGER)


@dataclass(frozen=True, slots=True)
class ReplicaIOConfig:
    connect_timeout_s: float = 5.0
    request_timeout_s: float = 10.0
    max_frame_bytes: int = DEFAULT_MAX_FRAME_BYTES


class _Link:
    """One connection to one bookie; requests matched to replies by id."""

    def __init__(self, address: str, config: ReplicaIOConfig) -> None:
        self.address = address
        self.config = config
        self.closed = False
        self._pending: dict[int, asyncio.Future[bytes]] = {}
        self._next_id = 1
        self._writer: asyncio.StreamWriter | None = None
        self._reader_task: asyncio.Task[None] | None = None
        self._opened = asyncio.get_running_loop().create_task(self._open())

    async def _open(self) -> None:
        host, _, port = self.address.rpartition(":")
        try:
            reader, self._writer = await asyncio.wait_for(
                asyncio.open_connection(host or "127.0.0.1", int(port)), self.config.connect_timeout_s
            )
        except (OSError, TimeoutError, ValueError) as exc:
            self.closed = True
            raise BookieError(ErrorCode.UNAVAILABLE, f"bookie {self.address}: {exc}") from exc
        self._reader_task = asyncio.get_running_loop().create_task(self._read(reader))

    async def _read(self, reader: asyncio.StreamReader) -> None:
        decoder = FrameDecoder(self.config.max_frame_bytes)
        why = "closed by the bookie"
        try:
            while data := await reader.read(1 << 20):
                for _op, _flags, request_id, body in decoder.feed(data):
                    future = self._pending.pop(request_id, None)
                    if future is not None and not future.done():
                        future.set_result(body)
                if decoder.error is not None:
                    why = f"bad frame: {decoder.error}"
                    break
        except OSError as exc:
            why = str(exc)
        self._fail(f"connection to bookie {self.address} lost: {why}")

    def _fail(self, why: str) -> None:
        self.closed = True
        pending, self._pending = self._pending, {}
        for future in pending.values():
            if not future.done():
                future.set_exception(BookieError(ErrorCode.UNAVAILABLE, why))
        if self._writer is not None:
            self._writer.close()

    async def call(self, parts: list[bytes], request_id: int) -> bytes:
        """Send one frame; its reply body (code first), or BookieError(UNAVAILABLE / TIMEOUT)."""
        await asyncio.shield(self._opened)
        if self.closed or self._writer is None:
            raise BookieError(ErrorCode.UNAVAILABLE, f"connection to bookie {self.address} is closed")
        future: asyncio.Future[bytes] = asyncio.get_running_loop().create_future()
        self._pending[request_id] = future
        self._writer.write(b"".join(parts))
        try:
            return await asyncio.wait_for(future, self.config.request_timeout_s)
        except TimeoutError:
            self._pending.pop(request_id, None)
            raise BookieError(ErrorCode.TIMEOUT, f"no reply from bookie {self.address}") from None

    def new_request_id(self) -> int:
        request_id = self._next_id
        self._next_id += 1
        return request_id

    async def close(self) -> None:
        self._fail(f"connection to bookie {self.address} closed")
        if self._reader_task is not None:
            self._reader_task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._reader_task
        with contextlib.suppress(BaseException):
            await self._opened


class ReplicaIO:
    def __init__(self, config: ReplicaIOConfig | None = None) -> None:
        self.config = config or ReplicaIOConfig()
        self._links: dict[str, _Link] = {}

    def _link(self, address: str) -> _Link:
        link = self._links.get(address)
        if link is None or link.closed:
            link = self._links[address] = _Link(address, self.config)
        return link

    async def read_entry(self, address: str, ledger_id: int, entry_id: int) -> bytes | None:
        """The entry as stored on `address`; None when that bookie says it does not have it.
        Raises BookieError when the bookie cannot answer (down, timed out, corrupt entry)."""
        link = self._link(address)
        request_id = link.new_request_id()
        body = LEDGER_ENTRY.pack(ledger_id, entry_id)
        reply = await link.call(encode_frame(Op.READ, 0, request_id, body), request_id)
        code = _code(reply)
        if code == ErrorCode.OK:
            return reply[CODE.size :]
        if code in NOT_THERE:
            return None
        raise error_from_code(code, reply[CODE.size :].decode(errors="replace"), ledger_id, entry_id)

    async def recovery_add(
        self, address: str, ledger_id: int, entry_id: int, lac: int, payload: bytes
    ) -> None:
        """Write the entry to `address` with the recovery flag; returns once it is durable there."""
        link = self._link(address)
        request_id = link.new_request_id()
        parts = encode_add(request_id, ledger_id, entry_id, lac, payload, FLAG_RECOVERY)
        reply = await link.call(parts, request_id)
        code = _code(reply)
        if code != ErrorCode.OK:
            raise error_from_code(code, reply[CODE.size :].decode(errors="replace"), ledger_id, entry_id)

    async def close(self) -> None:
        links, self._links = self._links, {}
        for link in links.values():
            await link.close()


def _code(body: bytes) -> ErrorCode:
    if len(body) < CODE.size:
        return ErrorCode.BAD_REQUEST
    try:
        return ErrorCode(CODE.unpack_from(body)[0])
    except ValueError:
        return ErrorCode.INTERNAL
