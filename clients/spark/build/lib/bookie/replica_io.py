"""Entry copies between named bookies, for re-replication: read entries from one bookie, and
write them to another as recovery adds.

The ledger client reads from "any replica of the write set" and writes to a whole write set; a
recovery worker needs the opposite: it picks the bookie to read from (a survivor) and the one
to write to (the replacement, not yet in the ledger's metadata). This module speaks the bookie
protocol (`bookie.protocol`) over its own connections (the ledger client's shared `Connection`s), one per
bookie address, with any number of requests in flight on each, each bounded by a timeout.

Reads come in ranges: `read_range` asks one bookie for every `step`-th entry of a span in
one request, which is how the entries of one write set of a striped ledger sit on a bookie.
Writes go through a `RecoveryAdds` window: many adds of one ledger in flight on the target's
connection, bounded in count and in bytes, each counted only once the target says it is
durable; `drain` waits for the last one and raises the first failure.

The add carries the recovery flag, so a bookie that already holds the ledger fenced (it is in
another segment of the same ledger) still takes it; it is answered only once it is fsynced on
the replacement, which is what lets the worker swap the replacement into the metadata after.
Adding an entry the bookie already holds with the same bytes is a no-op there, so a copy that a
crashed worker left half done may simply be copied again.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from bookie.auth import ClientSecurity
from bookie.client import BookieLedgerClient
from bookie.connection import BookieClientConfig, Connection, reply_code, reply_error
from bookie.errors import BookieError, ErrorCode
from bookie.protocol import (
    DEFAULT_MAX_FRAME_BYTES,
    FLAG_RECOVERY,
    LEDGER_ENTRY,
    RANGE_STRIDED,
    Op,
    decode_range_body,
    encode_add,
)

NOT_THERE = (ErrorCode.NO_SUCH_ENTRY, ErrorCode.NO_SUCH_LEDGER)
_OK = int(ErrorCode.OK)


@dataclass(frozen=True, slots=True)
class ReplicaIOConfig:
    connect_timeout_s: float = 5.0
    request_timeout_s: float = 10.0
    max_frame_bytes: int = DEFAULT_MAX_FRAME_BYTES
    security: ClientSecurity = field(default_factory=ClientSecurity)  # as every bookie client's


class ReplicaIO:
    def __init__(self, config: ReplicaIOConfig | None = None) -> None:
        self.config = config or ReplicaIOConfig()
        # The ledger client's connection cache: one connection per bookie, shared by every read
        # and window of adds, opened again after a failure.
        self._client = BookieLedgerClient(
            BookieClientConfig(
                connect_timeout_s=self.config.connect_timeout_s,
                request_timeout_s=self.config.request_timeout_s,
                max_frame_bytes=self.config.max_frame_bytes,
                security=self.config.security,
            )
        )

    async def _call(self, address: str, op: Op, body: bytes) -> bytes:
        return await (await self._client.connection(address)).call(op, body)

    async def read_entry(self, address: str, ledger_id: int, entry_id: int) -> bytes | None:
        """The entry as stored on `address`; None when that bookie says it does not have it.
        Raises BookieError when the bookie cannot answer (down, timed out, corrupt entry)."""
        reply = await self._call(address, Op.READ, LEDGER_ENTRY.pack(ledger_id, entry_id))
        code = reply_code(reply)
        if code == _OK:
            return reply[2:]
        if code in NOT_THERE:
            return None
        raise reply_error(reply, ledger_id, entry_id)

    async def read_range(self, address: str, ledger_id: int, entries: range, max_bytes: int) -> list[bytes]:
        """Entries `entries[0]`, `entries[1]`, ... (a range with a positive step) as stored on
        `address`, in one request: a prefix of them, at least the first one. Raises BookieError
        (NoSuchEntryError when the first one is not there)."""
        body = RANGE_STRIDED.pack(ledger_id, entries[0], entries[-1], max_bytes, entries.step)
        reply = await self._call(address, Op.READ_RANGE, body)
        if reply_code(reply) != _OK:
            raise reply_error(reply, ledger_id, entries[0])
        try:
            payloads = decode_range_body(reply)
        except (ValueError, IndexError) as exc:
            raise BookieError(ErrorCode.INTERNAL, f"bookie {address}: bad READ_RANGE reply: {exc}") from exc
        if not payloads or len(payloads) > len(entries):
            raise BookieError(
                ErrorCode.INTERNAL, f"bookie {address}: READ_RANGE gave {len(payloads)} entries"
            )
        return payloads

    async def recovery_adds(
        self,
        address: str,
        ledger_id: int,
        lac: int,
        max_count: int,
        max_bytes: int,
        on_durable: Callable[[int], None] | None = None,
    ) -> RecoveryAdds:
        """A window of recovery adds of one ledger to `address` (see `RecoveryAdds`)."""
        conn = await self._client.connection(address)
        return RecoveryAdds(conn, ledger_id, lac, max_count, max_bytes, on_durable)

    async def recovery_add(
        self, address: str, ledger_id: int, entry_id: int, lac: int, payload: bytes
    ) -> None:
        """Write one entry to `address` with the recovery flag; returns once it is durable there."""
        adds = await self.recovery_adds(address, ledger_id, lac, 1, len(payload) + 1)
        await adds.add(entry_id, payload)
        await adds.drain()

    async def close(self) -> None:
        await self._client.close()


class RecoveryAdds:
    """Recovery adds of one ledger to one bookie, pipelined on its connection: `add` returns as
    soon as the frame is queued, waiting only while `max_count` adds or `max_bytes` of payload
    are unanswered. Each add the bookie acknowledges (fsynced) is reported to `on_durable` with
    its size; the first failure is kept, refuses every later add and is raised by `drain`."""

    def __init__(
        self,
        conn: Connection,
        ledger_id: int,
        lac: int,
        max_count: int,
        max_bytes: int,
        on_durable: Callable[[int], None] | None,
    ) -> None:
        self._conn = conn
        self.ledger_id = ledger_id
        self._lac = lac
        self._max_count = max(1, max_count)
        self._max_bytes = max(1, max_bytes)
        self._on_durable = on_durable
        self._count = 0
        self._bytes = 0
        self._waiters: list[asyncio.Future[None]] = []
        self.error: BookieError | None = None

    def _full(self) -> bool:
        return self._count >= self._max_count or self._bytes >= self._max_bytes

    async def add(self, entry_id: int, payload: bytes) -> None:
        await self.add_all([entry_id], [payload])

    async def add_all(self, entries: Sequence[int], payloads: list[bytes]) -> None:
        """`payloads[i]` as entry `entries[i]`, in order, each sent once the window has room."""
        # Not `Connection.send_add`: a copy is bounded by this module's request timeout, not by
        # a writer's add timeout.
        conn = self._conn
        send, new_request_id = conn.send, conn.new_request_id
        ledger_id, lac, done = self.ledger_id, self._lac, self._done
        for entry_id, payload in zip(entries, payloads, strict=False):
            while self._full() and self.error is None:
                await self._wait()
            if self.error is not None:
                raise self.error
            size = len(payload)
            self._count += 1
            self._bytes += size
            request_id = new_request_id()
            parts = encode_add(request_id, ledger_id, entry_id, lac, payload, FLAG_RECOVERY)
            send(parts, request_id, done, (entry_id, size))

    async def drain(self) -> None:
        """Wait until every add sent is answered; raise the first failure, if any."""
        while self._count:
            await self._wait()
        if self.error is not None:
            raise self.error

    async def _wait(self) -> None:
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._waiters.append(future)
        await future

    def _done(self, context: tuple[int, int], body: bytes) -> None:
        entry_id, size = context
        self._count -= 1
        self._bytes -= size
        if reply_code(body) == _OK:
            if self._on_durable is not None:
                self._on_durable(size)
        elif self.error is None:
            self.error = reply_error(body, self.ledger_id, entry_id)
        # Wake the sender once there is room (not on every ack of a full window it could not
        # use yet) and `drain` once nothing is left.
        if self._waiters and (self._count == 0 or self.error is not None or not self._full()):
            waiters, self._waiters = self._waiters, []
            for future in waiters:
                if not future.done():
                    future.set_result(None)
