"""The ledger client over TCP: `BookieLedgerClient` implements `bookie.api.LedgerClient`.

One multiplexed connection per bookie address (per event loop), opened on first use and again
after a failure; any number of requests in flight on it, each with a deadline. Replies are
matched by request id and handed to a plain callback, not a future, so an add costs one future
(the caller's) and no task.

Writing (BookKeeper's rules, E/Qw/Qa from the LedgerSpec): entry ids are dense and assigned in
call order; entry e goes to `spec.write_set(e)` with the writer's LAC piggybacked; it is
acknowledged once `ack_quorum` bookies made it durable, and callers complete strictly in id
order, so the LAC only moves over a gap-free prefix. The first entry that can no longer reach
its ack quorum fails the writer: it and every later entry fail (ensemble change, i.e. replacing
a failed bookie mid-ledger, is not implemented; a failed writer's ledger must be recovered and
a new one started, as the managed ledger does on any write error).

Recovery: fence on enough bookies that no ack quorum can form behind our back (E - Qa + 1),
take the highest LAC they report, then read forward from LAC + 1 until an entry is missing on
enough bookies of its write set to prove it was never acknowledged; entries found on some but
not all of their write set are re-added there with the recovery flag (an unreachable member
is skipped: the entry stays, under-replicated, rather than risk dropping an acknowledged one).

`read_last_add_confirmed` is the highest LAC the bookies have heard. As in BookKeeper it trails
the writer's own (`LedgerWriter.last_add_confirmed`) by the adds in flight: the LAC rides on the
next add, so after the last add of a ledger the bookies know LAC = last - 1.

The constructor does nothing but store its configuration: a Spark task may build a client and
use it inside its own `asyncio.run`. Connections are bound to the loop that opened them; on a
new loop the client opens new ones.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import json
import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, cast

from bookie.errors import BookieError, ErrorCode, NoSuchEntryError, error_from_code
from bookie.protocol import (
    CODE,
    DEFAULT_MAX_FRAME_BYTES,
    FLAG_RECOVERY,
    I64,
    LAST_ENTRY,
    LEDGER,
    LEDGER_ENTRY,
    RANGE,
    FrameDecoder,
    Op,
    decode_range_body,
    encode_add,
    encode_frame,
)
from bookie.types import LedgerSpec

log = logging.getLogger("quire.bookie.client")
_OK_BODY = CODE.pack(ErrorCode.OK)
_NOT_THERE = (ErrorCode.NO_SUCH_ENTRY, ErrorCode.NO_SUCH_LEDGER)

# A reply handler: (context, reply body starting with the u16 code).
Callback = Callable[[Any, bytes], None]


@dataclass(frozen=True, slots=True)
class BookieClientConfig:
    connect_timeout_s: float = 5.0
    request_timeout_s: float = 30.0
    max_frame_bytes: int = DEFAULT_MAX_FRAME_BYTES
    read_chunk_entries: int = 4_096  # entries asked for by one READ_RANGE
    read_chunk_bytes: int = 4 * 1024 * 1024  # reply size bound asked for by one READ_RANGE
    read_parallelism: int = 4  # READ_RANGE requests in flight for one read_entries
    coalesce_max_frames: int = 128  # frames sent in one write at most
    # The bookies `healthy()` checks (readiness); ledgers name their own ensembles.
    bookies: tuple[str, ...] = ()
    health_timeout_s: float = 2.0


def reply_code(body: bytes) -> int:
    return body[0] | (body[1] << 8) if len(body) >= 2 else int(ErrorCode.BAD_REQUEST)


def reply_error(body: bytes, ledger_id: int, entry_id: int = -1) -> BookieError:
    """The typed error for a non-OK reply body, so callers can catch NoSuchEntryError etc."""
    return error_from_code(reply_code(body), body[2:].decode(errors="replace"), ledger_id, entry_id)


def _local_error(code: ErrorCode, message: str) -> bytes:
    return CODE.pack(code) + message.encode()


class _Connection(asyncio.Protocol):
    """One TCP connection to one bookie, shared by every ledger and request of the client."""

    def __init__(self, address: str, config: BookieClientConfig, loop: asyncio.AbstractEventLoop) -> None:
        self.address = address
        self._config = config
        self._loop = loop
        self._timeout_s = config.request_timeout_s
        self._flush_parts = 3 * config.coalesce_max_frames  # encoders return 3 parts a frame
        self._decoder = FrameDecoder(config.max_frame_bytes)
        self._transport: asyncio.Transport | None = None
        self._pending: dict[int, tuple[Callback, Any, float]] = {}
        self._out: list[bytes] = []
        self._flush_scheduled = False
        self._next_request_id = 1
        self._sweeper: asyncio.TimerHandle | None = None
        self.closed = False
        self.ready: asyncio.Task[None] = loop.create_task(self._connect())

    async def _connect(self) -> None:
        host, _, port = self.address.rpartition(":")
        try:
            await asyncio.wait_for(
                self._loop.create_connection(lambda: self, host or "127.0.0.1", int(port)),
                self._config.connect_timeout_s,
            )
        except (OSError, TimeoutError, ValueError) as exc:
            self._lost(f"cannot connect to bookie {self.address}: {exc}")
            raise BookieError(ErrorCode.UNAVAILABLE, f"bookie {self.address}: {exc}") from exc

    # --- asyncio.Protocol --------------------------------------------------------------------
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # uvloop's transports are not asyncio.Transport subclasses, but they behave as one.
        self._transport = cast(asyncio.Transport, transport)
        if self.closed:  # closed while connecting
            transport.close()

    def connection_lost(self, exc: Exception | None) -> None:
        self._lost(f"connection to bookie {self.address} lost: {exc or 'closed'}")

    def data_received(self, data: bytes) -> None:
        pending = self._pending
        for _op, _flags, request_id, body in self._decoder.feed(data):
            handler = pending.pop(request_id, None)
            if handler is not None:
                handler[0](handler[1], body)
        if self._decoder.error is not None:
            self._lost(f"bad frame from bookie {self.address}: {self._decoder.error}")

    # --- requests ------------------------------------------------------------------------------
    def send(self, parts: list[bytes], request_id: int, callback: Callback, context: Any) -> None:
        """Queue a frame; `callback(context, body)` runs once: on the reply, a timeout or a loss."""
        if self.closed:
            body = _local_error(ErrorCode.UNAVAILABLE, f"connection to bookie {self.address} is closed")
            self._loop.call_soon(callback, context, body)
            return
        self._pending[request_id] = (callback, context, self._loop.time() + self._timeout_s)
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
            encode_add(request_id, ledger_id, entry_id, lac, payload, flags), request_id, callback, context
        )

    async def call(self, op: Op, body: bytes = b"") -> bytes:
        """One request; returns the reply body (code included) whatever the code."""
        future: asyncio.Future[bytes] = self._loop.create_future()
        request_id = self.new_request_id()
        self.send(encode_frame(op, 0, request_id, body), request_id, _resolve, future)
        return await future

    def _scheduled_flush(self) -> None:
        self._flush_scheduled = False
        self._flush()

    def _flush(self) -> None:
        if self._transport is not None and self._out and not self.closed:
            self._transport.write(b"".join(self._out))
        self._out.clear()

    def _sweep_interval(self) -> float:
        return min(max(self._timeout_s / 4, 0.01), 1.0)

    def _sweep(self) -> None:
        """Fail requests past their deadline; the dict is in send order, so stop at a live one."""
        self._sweeper = None
        now = self._loop.time()
        expired = []
        for request_id, (_, _, deadline) in self._pending.items():
            if deadline > now:
                break
            expired.append(request_id)
        for request_id in expired:
            callback, context, _ = self._pending.pop(request_id)
            callback(context, _local_error(ErrorCode.TIMEOUT, f"no reply from bookie {self.address}"))
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
        body = _local_error(ErrorCode.UNAVAILABLE, why)
        for callback, context, _ in pending.values():
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


def _resolve(future: asyncio.Future[bytes], body: bytes) -> None:
    if not future.done():
        future.set_result(body)


class _PendingAdd:
    __slots__ = ("acks", "entry_id", "errors", "future")

    def __init__(self, entry_id: int, future: asyncio.Future[int]) -> None:
        self.entry_id = entry_id
        self.future = future
        self.acks = 0
        self.errors = 0


class BookieLedgerWriter:
    """The single writer of one ledger (bookie.api.LedgerWriter), over the client's connections."""

    def __init__(self, spec: LedgerSpec, connections: Sequence[_Connection]) -> None:
        self._spec = spec
        self._ledger_id = spec.ledger_id
        self._connections = tuple(connections)
        self._ensemble_size = len(connections)
        self._write_quorum = spec.write_quorum
        self._ack_quorum = spec.ack_quorum
        self._tolerated_errors = spec.write_quorum - spec.ack_quorum
        self._loop = asyncio.get_running_loop()
        self._next_entry_id = 0
        self._lac = -1
        self._pending: collections.deque[_PendingAdd] = collections.deque()
        self._failed: BookieError | None = None
        self._failed_from = -1
        self._closed = False
        self._drained: asyncio.Future[None] | None = None  # close() waits on it

    @property
    def spec(self) -> LedgerSpec:
        return self._spec

    @property
    def last_add_confirmed(self) -> int:
        return self._lac

    def add_entry_future(self, payload: bytes) -> asyncio.Future[int]:
        """`add_entry` without a coroutine: the future completes with the entry id.

        Cheaper when a caller keeps many adds in flight itself (benchmarks, batch writers)."""
        future: asyncio.Future[int] = self._loop.create_future()
        if self._closed or self._failed is not None:
            future.set_exception(self._failed or BookieError(ErrorCode.BAD_REQUEST, "writer is closed"))
            return future
        entry_id = self._next_entry_id
        self._next_entry_id = entry_id + 1
        add = _PendingAdd(entry_id, future)
        self._pending.append(add)
        if self._ensemble_size == 1:
            self._connections[0].send_add(
                self._ledger_id, entry_id, self._lac, payload, 0, self._on_reply, add
            )
            return future
        for i in range(self._write_quorum):
            conn = self._connections[(entry_id + i) % self._ensemble_size]
            conn.send_add(self._ledger_id, entry_id, self._lac, payload, 0, self._on_reply, add)
        return future

    async def add_entry(self, payload: bytes) -> int:
        return await self.add_entry_future(payload)

    def _on_reply(self, add: _PendingAdd, body: bytes) -> None:
        if body == _OK_BODY:
            add.acks += 1
            if add.acks == self._ack_quorum and self._pending and self._pending[0] is add:
                self._advance()
            return
        add.errors += 1
        if add.errors > self._tolerated_errors and add.acks < self._ack_quorum:
            # This entry can no longer reach its ack quorum: it and every later one fail.
            if self._failed is None or add.entry_id < self._failed_from:
                self._failed = reply_error(body, self._ledger_id, add.entry_id)
                self._failed_from = add.entry_id
            self._advance()

    def _advance(self) -> None:
        """Complete callers in id order over the acknowledged (or failed) prefix."""
        pending = self._pending
        quorum = self._ack_quorum
        failed_from = self._failed_from if self._failed is not None else -1
        while pending:
            head = pending[0]
            if failed_from >= 0 and head.entry_id >= failed_from:
                assert self._failed is not None
                pending.popleft()
                if not head.future.done():
                    head.future.set_exception(self._failed)
            elif head.acks >= quorum:
                pending.popleft()
                self._lac = head.entry_id
                if not head.future.done():
                    head.future.set_result(head.entry_id)
            else:
                break
        if not pending and self._drained is not None and not self._drained.done():
            self._drained.set_result(None)

    async def close(self) -> int:
        """Refuse new adds, wait for those in flight (their errors are their callers'), return LAC."""
        self._closed = True
        if self._pending:
            # Not the callers' futures: a caller may have cancelled its own while the add runs.
            self._drained = self._loop.create_future()
            await self._drained
        return self._lac


class BookieLedgerClient:
    """`bookie.api.LedgerClient` over TCP to bookie processes; see the module docstring."""

    def __init__(self, config: BookieClientConfig | None = None) -> None:
        self.config = config or BookieClientConfig()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._connections: dict[str, _Connection] = {}

    # --- connections -----------------------------------------------------------------------------
    async def _connection(self, address: str) -> _Connection:
        loop = asyncio.get_running_loop()
        if loop is not self._loop:
            # A new event loop (e.g. a Spark task's asyncio.run): the old connections belong
            # to a loop that is gone or busy elsewhere.
            self._abandon_connections()
            self._loop = loop
        conn = self._connections.get(address)
        if conn is None or conn.closed:
            conn = self._connections[address] = _Connection(address, self.config, loop)
        await asyncio.shield(conn.ready)
        if conn.closed:
            raise BookieError(ErrorCode.UNAVAILABLE, f"connection to bookie {address} closed")
        return conn

    async def _call(self, address: str, op: Op, body: bytes = b"") -> bytes:
        """One request to one bookie: the reply body, or a BookieError(UNAVAILABLE) if unreachable."""
        try:
            conn = await self._connection(address)
        except BookieError as exc:
            return _local_error(exc.code, exc.message)
        return await conn.call(op, body)

    # --- LedgerClient ----------------------------------------------------------------------------
    async def create_ledger(self, spec: LedgerSpec) -> BookieLedgerWriter:
        connections = await asyncio.gather(*(self._connection(a) for a in spec.ensemble))
        return BookieLedgerWriter(spec, connections)

    async def read_entries(self, spec: LedgerSpec, first_entry_id: int, last_entry_id: int) -> list[bytes]:
        if first_entry_id < 0 or first_entry_id > last_entry_id:
            raise NoSuchEntryError(spec.ledger_id, first_entry_id)
        if spec.write_quorum < len(spec.ensemble):
            return await self._read_striped(spec, first_entry_id, last_entry_id)
        step = self.config.read_chunk_entries
        chunks = [
            (a, min(a + step - 1, last_entry_id)) for a in range(first_entry_id, last_entry_id + 1, step)
        ]
        out: list[bytes] = []
        width = self.config.read_parallelism
        for i in range(0, len(chunks), width):
            parts = await asyncio.gather(*(self._read_chunk(spec, a, b) for a, b in chunks[i : i + width]))
            for part in parts:
                out += part
        return out

    async def _read_chunk(self, spec: LedgerSpec, first: int, last: int) -> list[bytes]:
        """Entries first..last from bookies holding all of them, READ_RANGE after READ_RANGE (each
        starting at the write set of its first entry, which spreads chunks over the ensemble)."""
        out: list[bytes] = []
        while first <= last:
            body = RANGE.pack(spec.ledger_id, first, last, self.config.read_chunk_bytes)
            reply = await self._call_any(spec, first, Op.READ_RANGE, body)
            entries = decode_range_body(reply)
            if not entries:
                raise BookieError(ErrorCode.INTERNAL, "bookie returned an empty READ_RANGE")
            out += entries
            first += len(entries)
        return out

    async def _call_any(self, spec: LedgerSpec, entry_id: int, op: Op, body: bytes) -> bytes:
        """Ask the write set of `entry_id` in turn until one answers; an OK body or the error."""
        members = spec.write_set(entry_id)
        error: BookieError | None = None
        for address in members:
            reply = await self._call(address, op, body)
            if reply_code(reply) == ErrorCode.OK:
                return reply
            candidate = reply_error(reply, spec.ledger_id, entry_id)
            # "Not there" from a live bookie outranks "unreachable" from another.
            if error is None or (error.retriable and not candidate.retriable):
                error = candidate
        assert error is not None
        raise error

    async def _read_striped(self, spec: LedgerSpec, first: int, last: int) -> list[bytes]:
        """Qw < E: each bookie holds only some entries, so read them one by one (pipelined)."""
        out: list[bytes] = []
        width = 256
        for a in range(first, last + 1, width):
            ids = range(a, min(a + width - 1, last) + 1)
            replies = await asyncio.gather(
                *(self._call_any(spec, e, Op.READ, LEDGER_ENTRY.pack(spec.ledger_id, e)) for e in ids)
            )
            out += [r[2:] for r in replies]
        return out

    async def read_last_add_confirmed(self, spec: LedgerSpec) -> int:
        replies = await asyncio.gather(
            *(self._call(a, Op.READ_LAC, LEDGER.pack(spec.ledger_id)) for a in spec.ensemble)
        )
        lacs: list[int] = [I64.unpack_from(r, 2)[0] for r in replies if reply_code(r) == ErrorCode.OK]
        if lacs:
            return max(lacs)
        raise _most_telling([reply_error(r, spec.ledger_id) for r in replies])

    async def delete_ledger(self, spec: LedgerSpec) -> None:
        replies = await asyncio.gather(
            *(self._call(a, Op.DELETE_LEDGER, LEDGER.pack(spec.ledger_id)) for a in spec.ensemble)
        )
        errors = [reply_error(r, spec.ledger_id) for r in replies if reply_code(r) not in (0, *_NOT_THERE)]
        if errors:
            raise errors[0]

    async def recover(self, spec: LedgerSpec) -> int:
        lac = await self._fence(spec)
        if len(spec.ensemble) == 1:
            return await self._last_readable(spec, lac)
        entry_id = lac + 1
        while await self._recover_entry(spec, entry_id, lac):
            entry_id += 1
        return entry_id - 1

    async def _fence(self, spec: LedgerSpec) -> int:
        """Fence on every bookie; enough of them (E - Qa + 1) must answer. Returns the highest LAC."""
        replies = await asyncio.gather(
            *(self._call(a, Op.FENCE, LEDGER.pack(spec.ledger_id)) for a in spec.ensemble)
        )
        lacs: list[int] = [I64.unpack_from(r, 2)[0] for r in replies if reply_code(r) == ErrorCode.OK]
        if len(lacs) < len(spec.ensemble) - spec.ack_quorum + 1:
            errors = [reply_error(r, spec.ledger_id) for r in replies if reply_code(r) != ErrorCode.OK]
            raise BookieError(
                ErrorCode.UNAVAILABLE,
                f"fenced ledger {spec.ledger_id} on {len(lacs)} of {len(spec.ensemble)} bookies: {errors[0]}",
            )
        return max(lacs)

    async def _last_readable(self, spec: LedgerSpec, lac: int) -> int:
        """One bookie: LAST_ENTRY bounds the search, then read forward from LAC + 1 in ranges
        (which also proves every entry up to the answer readable) until one is missing."""
        address = spec.ensemble[0]
        last, _ = await self.bookie_last_entry(address, spec.ledger_id)
        first = lac + 1
        while first <= last:
            body = RANGE.pack(spec.ledger_id, first, last, self.config.read_chunk_bytes)
            reply = await self._call(address, Op.READ_RANGE, body)
            code = reply_code(reply)
            if code in _NOT_THERE:
                break
            if code != ErrorCode.OK:
                raise reply_error(reply, spec.ledger_id, first)
            first += len(decode_range_body(reply))
        return first - 1

    async def _recover_entry(self, spec: LedgerSpec, entry_id: int, lac: int) -> bool:
        """Whether `entry_id` exists; if so, make sure its whole write set holds it."""
        members = spec.write_set(entry_id)
        body = LEDGER_ENTRY.pack(spec.ledger_id, entry_id)
        replies = await asyncio.gather(*(self._call(a, Op.READ, body) for a in members))
        found = [r[2:] for r in replies if reply_code(r) == ErrorCode.OK]
        if not found:
            missing = sum(1 for r in replies if reply_code(r) in _NOT_THERE)
            # Every ack quorum of the write set includes one of the bookies that said "missing".
            if missing >= spec.write_quorum - spec.ack_quorum + 1:
                return False
            raise _most_telling([reply_error(r, spec.ledger_id, entry_id) for r in replies])
        payload = found[0]
        # Copy it to the members that answered "not there". An unreachable member is left out
        # (no ensemble change): the entry may have been acknowledged, so it is kept even when
        # fewer than an ack quorum of live bookies hold it -- under-replicated, never lost.
        lacking = [a for a, r in zip(members, replies, strict=True) if reply_code(r) in _NOT_THERE]
        results = await asyncio.gather(
            *(self._recovery_add(a, spec, entry_id, lac, payload) for a in lacking), return_exceptions=True
        )
        holders = len(found) + sum(1 for r in results if r is None)
        if holders < spec.ack_quorum:
            log.warning(
                "recovery of ledger %d: entry %d is on %d bookies, ack quorum %d",
                spec.ledger_id,
                entry_id,
                holders,
                spec.ack_quorum,
            )
        return True

    async def _recovery_add(
        self, address: str, spec: LedgerSpec, entry_id: int, lac: int, payload: bytes
    ) -> None:
        conn = await self._connection(address)
        future: asyncio.Future[bytes] = asyncio.get_running_loop().create_future()
        conn.send_add(spec.ledger_id, entry_id, lac, payload, FLAG_RECOVERY, _resolve, future)
        reply = await future
        if reply_code(reply) != ErrorCode.OK:
            raise reply_error(reply, spec.ledger_id, entry_id)

    # --- operations helpers ------------------------------------------------------------------------
    async def bookie_stats(self, address: str) -> dict[str, Any]:
        """The STATS op of one bookie (health check): its engine's and server's counters."""
        reply = await self._call(address, Op.STATS)
        if reply_code(reply) != ErrorCode.OK:
            raise reply_error(reply, -1)
        stats: dict[str, Any] = json.loads(reply[2:])
        return stats

    async def healthy(self) -> bool:
        """True when every configured bookie answers STATS in time (read-only ones count: they
        still serve reads)."""

        async def probe(address: str) -> bool:
            try:
                async with asyncio.timeout(self.config.health_timeout_s):
                    await self.bookie_stats(address)
            except (BookieError, TimeoutError, OSError):
                return False
            return True

        results = await asyncio.gather(*(probe(a) for a in self.config.bookies))
        return all(results)

    async def bookie_last_entry(self, address: str, ledger_id: int) -> tuple[int, int]:
        """(last entry id stored, LAC) of a ledger on one bookie."""
        reply = await self._call(address, Op.LAST_ENTRY, LEDGER.pack(ledger_id))
        if reply_code(reply) != ErrorCode.OK:
            raise reply_error(reply, ledger_id)
        last, lac = LAST_ENTRY.unpack_from(reply, 2)
        return int(last), int(lac)

    def _abandon_connections(self) -> None:
        connections, self._connections = self._connections, {}
        for conn in connections.values():
            conn.abandon()

    async def close(self) -> None:
        if asyncio.get_running_loop() is not self._loop:
            self._abandon_connections()
            return
        connections, self._connections = self._connections, {}
        for conn in connections.values():
            conn.close()
        await asyncio.sleep(0)  # let the transports run connection_lost


def _most_telling(errors: list[BookieError]) -> BookieError:
    """Of several bookies' errors, the one a caller can act on: a definite answer over 'retry'."""
    for error in errors:
        if not error.retriable:
            return error
    return errors[0]
