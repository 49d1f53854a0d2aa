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
import json
import logging
from typing import Any

from bookie.connection import (
    BookieClientConfig,
    Connection,
    local_error,
    reply_code,
    reply_error,
    resolve_reply,
)
from bookie.errors import BookieError, ErrorCode, NoSuchEntryError
from bookie.protocol import (
    FLAG_RECOVERY,
    I64,
    LAST_ENTRY,
    LEDGER,
    LEDGER_ENTRY,
    RANGE,
    Op,
    decode_range_body,
)
from bookie.types import LedgerSpec
from bookie.writer import BookieLedgerWriter

__all__ = ["BookieClientConfig", "BookieLedgerClient", "BookieLedgerWriter", "reply_code", "reply_error"]

log = logging.getLogger("quire.bookie.client")
_NOT_THERE = (ErrorCode.NO_SUCH_ENTRY, ErrorCode.NO_SUCH_LEDGER)


class BookieLedgerClient:
    """`bookie.api.LedgerClient` over TCP to bookie processes; see the module docstring."""

    def __init__(self, config: BookieClientConfig | None = None) -> None:
        self.config = config or BookieClientConfig()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._connections: dict[str, Connection] = {}

    # --- connections -----------------------------------------------------------------------------
    async def _connection(self, address: str) -> Connection:
        loop = asyncio.get_running_loop()
        if loop is not self._loop:
            # A new event loop (e.g. a Spark task's asyncio.run): the old connections belong
            # to a loop that is gone or busy elsewhere.
            self._abandon_connections()
            self._loop = loop
        conn = self._connections.get(address)
        if conn is None or conn.closed:
            conn = self._connections[address] = Connection(address, self.config, loop)
        await asyncio.shield(conn.ready)
        if conn.closed:
            raise BookieError(ErrorCode.UNAVAILABLE, f"connection to bookie {address} closed")
        return conn

    async def _call(self, address: str, op: Op, body: bytes = b"") -> bytes:
        """One request to one bookie: the reply body, or a BookieError(UNAVAILABLE) if unreachable."""
        try:
            conn = await self._connection(address)
        except BookieError as exc:
            return local_error(exc.code, exc.message)
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
        conn.send_add(spec.ledger_id, entry_id, lac, payload, FLAG_RECOVERY, resolve_reply, future)
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
