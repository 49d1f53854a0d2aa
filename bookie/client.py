"""The ledger client over TCP: `BookieLedgerClient` implements `bookie.api.LedgerClient`.

One multiplexed connection per bookie address (per event loop), opened on first use and again
after a failure; any number of requests in flight on it, each with a deadline. Replies are
matched by request id and handed to a plain callback, not a future, so an add costs one future
(the caller's) and no task.

Writing (BookKeeper's rules, E/Qw/Qa from the LedgerSpec): entry ids are dense and assigned in
call order; entry e goes to `spec.write_set(e)` with the writer's LAC piggybacked; it is
acknowledged once `ack_quorum` bookies made it durable, and callers complete strictly in id
order, so the LAC only moves over a gap-free prefix. Given an `EnsembleChanger`, the writer
replaces a bookie whose add fails or times out (`bookie/writer.py`); without one, or when no
replacement exists, the first entry that can no longer reach its ack quorum fails the writer:
it and every later entry fail, and the ledger must be recovered and a new one started, as the
managed ledger does on any write error.

Reading: each entry is read from its write set in the segment of the ensemble history that
holds it; one replica first, the next one too when it fails or is slower than the speculative
read timeout (`_speculative`). With Qw = E whole ranges are read from one bookie of a segment.

Recovery: fence the last ensemble until every write set has Qw - Qa + 1 fenced members, so no
ack quorum can form behind our back (a bookie that is down or hangs does not block it); start
from the highest LAC they report, or the entry before the last segment if later (every entry
before a segment was acknowledged before it was recorded), then read forward until an entry is
missing on enough bookies of its write set to prove it was never acknowledged; entries found on
some but not all of their write set are re-added there with the recovery flag (an unreachable
member is skipped: the entry stays, under-replicated, rather than risk dropping an acknowledged
one).

`read_last_add_confirmed` is the highest LAC the bookies have heard. As in BookKeeper it trails
the writer's own (`LedgerWriter.last_add_confirmed`) by the adds in flight: the LAC rides on the
next add, so after the last add of a ledger the bookies know LAC = last - 1.

The constructor does nothing but store its configuration: a Spark task may build a client and
use it inside its own `asyncio.run`. Connections are bound to the loop that opened them; on a
new loop the client opens new ones. Each one authenticates with the config's secret and speaks
TLS with its CA, when it has them (`bookie.auth`); the SSL context is built on first use.
"""

from __future__ import annotations

import asyncio
import json
import logging
import ssl
from asyncio import FIRST_COMPLETED
from collections.abc import Mapping, Sequence
from typing import Any

from bookie.api import EnsembleChanger
from bookie.connection import (
    BookieClientConfig,
    Connection,
    local_error,
    reply_code,
    reply_error,
    resolve_reply,
)
from bookie.errors import BookieError, ErrorCode, NoSuchEntryError, ShortOfQuorumError
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
        self._ssl: ssl.SSLContext | None = None

    # --- connections -----------------------------------------------------------------------------
    async def connection(self, address: str) -> Connection:
        """The shared connection to one bookie (opened again after a failure); raises
        BookieError(UNAVAILABLE) when it cannot be opened. Re-replication speaks to named bookies
        through it (`bookie.replica_io`)."""
        loop = asyncio.get_running_loop()
        if loop is not self._loop:
            # A new event loop (e.g. a Spark task's asyncio.run): the old connections belong
            # to a loop that is gone or busy elsewhere.
            self._abandon_connections()
            self._loop = loop
        conn = self._connections.get(address)
        if conn is None or conn.closed:
            if self._ssl is None:
                self._ssl = self._ssl_context()
            conn = self._connections[address] = Connection(address, self.config, loop, self._ssl)
        await asyncio.shield(conn.ready)
        if conn.closed:
            raise BookieError(ErrorCode.UNAVAILABLE, f"connection to bookie {address} closed")
        return conn

    def _ssl_context(self) -> ssl.SSLContext | None:
        try:
            return self.config.security.ssl_context()
        except (OSError, ssl.SSLError) as exc:  # the settings check the files at start: rare
            raise BookieError(ErrorCode.NOT_AUTHENTICATED, f"cannot use the bookie TLS files: {exc}") from exc

    async def _call(self, address: str, op: Op, body: bytes = b"") -> bytes:
        """One request to one bookie: the reply body, or a BookieError(UNAVAILABLE) if unreachable."""
        try:
            conn = await self.connection(address)
        except BookieError as exc:
            return local_error(exc.code, exc.message)
        return await conn.call(op, body)

    # --- LedgerClient ----------------------------------------------------------------------------
    async def create_ledger(
        self, spec: LedgerSpec, on_ensemble_change: EnsembleChanger | None = None
    ) -> BookieLedgerWriter:
        """A writer of the ledger's last ensemble. A bookie that cannot be reached fails the
        create, unless the writer can replace it (`on_ensemble_change`)."""
        results = await asyncio.gather(
            *(self.connection(a) for a in spec.last_ensemble), return_exceptions=True
        )
        connections: list[Connection | None] = []
        for result in results:
            if isinstance(result, BookieError) and on_ensemble_change is not None:
                connections.append(None)
            elif isinstance(result, BaseException):
                raise result
            else:
                connections.append(result)
        return BookieLedgerWriter(spec, connections, on_ensemble_change, self.connection)

    async def read_entries(self, spec: LedgerSpec, first_entry_id: int, last_entry_id: int) -> list[bytes]:
        if first_entry_id < 0 or first_entry_id > last_entry_id:
            raise NoSuchEntryError(spec.ledger_id, first_entry_id)
        if spec.write_quorum < len(spec.ensemble):
            return await self._read_striped(spec, first_entry_id, last_entry_id)
        # Qw == E: each bookie of a segment holds all of that segment's entries, so ranges are
        # read whole from one of them; a range never crosses into another segment.
        step = self.config.read_chunk_entries
        chunks = [
            (a, min(a + step - 1, seg_last))
            for seg_first, seg_last in segment_ranges(spec, first_entry_id, last_entry_id)
            for a in range(seg_first, seg_last + 1, step)
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
        """Ask the write set of `entry_id`: an OK body from any member, or the most telling error."""
        members = spec.write_set(entry_id)
        if len(members) == 1:
            reply = await self._call(members[0], op, body)
            if reply_code(reply) == ErrorCode.OK:
                return reply
            raise reply_error(reply, spec.ledger_id, entry_id)
        return await self._speculative(members, spec.ledger_id, entry_id, op, body)

    async def _speculative(
        self, members: tuple[str, ...], ledger_id: int, entry_id: int, op: Op, body: bytes
    ) -> bytes:
        """Ask the first member; the next one is asked as soon as one fails or none has answered
        within the speculative timeout; the first OK wins (BookKeeper's speculative reads).
        "Not there" from one replica falls through to the others."""
        asked = 0
        waiting: set[asyncio.Future[bytes]] = set()
        errors: list[BookieError] = []
        try:
            while True:
                if asked < len(members):
                    waiting.add(asyncio.ensure_future(self._call(members[asked], op, body)))
                    asked += 1
                timeout = self.config.speculative_read_timeout_s if asked < len(members) else None
                done, waiting = await asyncio.wait(waiting, timeout=timeout, return_when=FIRST_COMPLETED)
                for task in done:
                    reply = task.result()
                    if reply_code(reply) == ErrorCode.OK:
                        return reply
                    errors.append(reply_error(reply, ledger_id, entry_id))
                if not waiting and asked == len(members):
                    raise _read_verdict(errors)
        finally:
            for task in waiting:
                task.cancel()

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
        """The highest LAC the last ensemble's bookies heard; at least the entry before the last
        segment (every entry before a segment was acknowledged when the segment was recorded)."""
        replies = await asyncio.gather(
            *(self._call(a, Op.READ_LAC, LEDGER.pack(spec.ledger_id)) for a in spec.last_ensemble)
        )
        lacs: list[int] = [I64.unpack_from(r, 2)[0] for r in replies if reply_code(r) == ErrorCode.OK]
        confirmed = spec.ensembles[-1][0] - 1
        if lacs or confirmed >= 0:
            return max([*lacs, confirmed])
        raise _most_telling([reply_error(r, spec.ledger_id) for r in replies])

    async def delete_ledger(self, spec: LedgerSpec) -> None:
        """Delete on every bookie of every segment."""
        replies = await asyncio.gather(
            *(self._call(a, Op.DELETE_LEDGER, LEDGER.pack(spec.ledger_id)) for a in spec.bookies)
        )
        errors = [reply_error(r, spec.ledger_id) for r in replies if reply_code(r) not in (0, *_NOT_THERE)]
        if errors:
            raise errors[0]

    async def recover(
        self,
        spec: LedgerSpec,
        fresh: frozenset[str] = frozenset(),
        instances: Mapping[str, str] | None = None,
    ) -> int:
        """Fence the last ensemble, then read forward from what is known to be acknowledged
        (the highest LAC heard, and every entry before the last segment). `fresh`: bookies a
        recovery put into the ensemble; their "not there" proves nothing about an entry.
        `instances`: the instance id recorded for each bookie of the last segment; a "not there"
        from another instance (wiped and formatted since, or another process under its id)
        proves nothing either. A bookie with none recorded, or that names none, is judged as
        before instance ids existed."""
        lac = max(await self._fence(spec), spec.ensembles[-1][0] - 1)
        if len(spec.ensemble) == 1:
            return await self._last_readable(spec, lac)
        entry_id = lac + 1
        while await self._recover_entry(spec, entry_id, lac, fresh, instances or {}):
            entry_id += 1
        return entry_id - 1

    async def bookie_instance(self, address: str) -> str | None:
        """The instance id of the bookie now at `address`; None when it cannot be reached or
        does not say (an older bookie)."""
        try:
            async with asyncio.timeout(self.config.add_timeout_s):
                return await (await self.connection(address)).instance()
        except (BookieError, TimeoutError):
            return None

    async def _read_within(self, address: str, body: bytes) -> tuple[bytes, str | None]:
        """A READ bounded by the add timeout, with the instance id of the bookie that answered."""
        try:
            async with asyncio.timeout(self.config.add_timeout_s):
                conn = await self.connection(address)
                instance = await conn.instance()
                return await conn.call(Op.READ, body), instance
        except BookieError as exc:
            return local_error(exc.code, exc.message), None
        except TimeoutError:
            return local_error(ErrorCode.TIMEOUT, f"no reply from bookie {address}"), None

    async def _call_within(self, address: str, op: Op, body: bytes) -> bytes:
        """`_call` bounded by the add timeout: recovery must not wait on a bookie that hangs."""
        try:
            async with asyncio.timeout(self.config.add_timeout_s):
                return await self._call(address, op, body)
        except TimeoutError:
            return local_error(ErrorCode.TIMEOUT, f"no reply from bookie {address}")

    async def _fence(self, spec: LedgerSpec) -> int:
        """Fence on the last ensemble until every write set has Qw - Qa + 1 fenced members, so no
        ack quorum can form behind our back (BookKeeper's coverage rule: a bookie that is down
        or hangs does not block recovery when the others cover it). Returns the highest LAC."""
        bookies = spec.last_ensemble
        body = LEDGER.pack(spec.ledger_id)
        e, qw, qa = len(bookies), spec.write_quorum, spec.ack_quorum
        asked: dict[asyncio.Future[bytes], int] = {
            asyncio.ensure_future(self._call_within(a, Op.FENCE, body)): i for i, a in enumerate(bookies)
        }
        waiting: set[asyncio.Future[bytes]] = set(asked)
        fenced: set[int] = set()
        lacs: list[int] = []
        errors: list[BookieError] = []
        try:
            while waiting and not covered(fenced, e, qw, qa):
                done, waiting = await asyncio.wait(waiting, return_when=FIRST_COMPLETED)
                for task in done:
                    reply = task.result()
                    if reply_code(reply) == ErrorCode.OK:
                        fenced.add(asked[task])
                        lacs.append(I64.unpack_from(reply, 2)[0])
                    else:
                        errors.append(reply_error(reply, spec.ledger_id))
        finally:
            for task in waiting:
                task.cancel()
        if not covered(fenced, e, qw, qa):
            raise BookieError(
                ErrorCode.UNAVAILABLE,
                f"fenced ledger {spec.ledger_id} on {len(fenced)} of {len(bookies)} bookies, not enough "
                f"to cover every write set: {errors[0] if errors else 'no answer'}",
            )
        return max(lacs)

    async def _last_readable(self, spec: LedgerSpec, lac: int) -> int:
        """One bookie: LAST_ENTRY bounds the search, then read forward from LAC + 1 in ranges
        (which also proves every entry up to the answer readable) until one is missing."""
        address = spec.last_ensemble[0]
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

    async def _recover_entry(
        self, spec: LedgerSpec, entry_id: int, lac: int, fresh: frozenset[str], instances: Mapping[str, str]
    ) -> bool:
        """Whether `entry_id` exists; if so, make sure its whole write set holds it."""
        members = spec.write_set(entry_id)
        body = LEDGER_ENTRY.pack(spec.ledger_id, entry_id)
        answers = await asyncio.gather(*(self._read_within(a, body) for a in members))
        replies = [reply for reply, _ in answers]
        found = [r[2:] for r in replies if reply_code(r) == ErrorCode.OK]
        if not found:
            missing = sum(
                1
                for a, (r, instance) in zip(members, answers, strict=True)
                if reply_code(r) in _NOT_THERE
                and a not in fresh
                and _same_instance(instances.get(a), instance)
            )
            # Every ack quorum of the write set includes one of the bookies that said "missing".
            if missing >= spec.write_quorum - spec.ack_quorum + 1:
                return False
            raise _read_verdict([reply_error(r, spec.ledger_id, entry_id) for r in replies])
        payload = found[0]
        # Copy it to the members that answered "not there" (a read-only bookie takes recovery
        # adds). The entry may have been acknowledged, so it must be kept; and a ledger is only
        # closed with each entry on at least an ack quorum of its write set, as BookKeeper's
        # recovery writes each entry back before it closes. When too few members can take it
        # (one is down or hangs and no copy can be made), recovery fails and is tried again
        # later: the ledger stays in recovery, unavailable rather than one loss from losing it.
        lacking = [a for a, r in zip(members, replies, strict=True) if reply_code(r) in _NOT_THERE]
        results = await asyncio.gather(
            *(self._recovery_add(a, spec, entry_id, lac, payload) for a in lacking), return_exceptions=True
        )
        holders = len(found) + sum(1 for r in results if r is None)
        if holders < spec.ack_quorum:
            took = {a for a, r in zip(lacking, results, strict=True) if r is None}
            held = {a for a, r in zip(members, replies, strict=True) if reply_code(r) == ErrorCode.OK}
            unreachable = tuple(a for a in members if a not in held and a not in took)
            raise ShortOfQuorumError(spec.ledger_id, entry_id, holders, unreachable)
        return True

    async def _recovery_add(
        self, address: str, spec: LedgerSpec, entry_id: int, lac: int, payload: bytes
    ) -> None:
        conn = await self.connection(address)
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

    async def healthy(self, bookies: Sequence[str] | None = None) -> bool:
        """True when enough of `bookies` (default: the configured ones) answer STATS in time
        (read-only ones count: they still serve reads): `health_min_bookies` of them (0: all),
        and at least one; an empty list is not healthy."""

        async def probe(address: str) -> bool:
            try:
                async with asyncio.timeout(self.config.health_timeout_s):
                    await self.bookie_stats(address)
            except (BookieError, TimeoutError, OSError):
                return False
            return True

        addresses = self.config.bookies if bookies is None else bookies
        results = await asyncio.gather(*(probe(a) for a in addresses))
        return sum(results) >= max(self.config.health_min_bookies or len(addresses), 1)

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


def _read_verdict(errors: list[BookieError]) -> BookieError:
    """Why no replica served a read. "Not there" only when every replica asked says so: a replica
    that could not answer (down, hung, out of space) may hold the entry, so the read is to be
    retried, not answered "no such message" (a recovered or re-replicated replica that never got
    the entry would otherwise hide it while the one holding it is away)."""
    answered = [e for e in errors if e.code not in _NOT_THERE]
    return _most_telling(answered) if answered else errors[0]


def _same_instance(recorded: str | None, answered: str | None) -> bool:
    """Whether a bookie's "not there" can be judged: it comes from the instance recorded in the
    segment, or one side does not know its instance (rows and bookies from before instance ids)."""
    return recorded is None or answered is None or recorded == answered


def covered(answered: set[int], ensemble_size: int, write_quorum: int, ack_quorum: int) -> bool:
    """Whether every write set of an ensemble has at least Qw - Qa + 1 members in `answered`
    (positions): then no ack quorum of any write set lies wholly outside it."""
    need = write_quorum - ack_quorum + 1
    return all(
        sum(1 for i in range(write_quorum) if (start + i) % ensemble_size in answered) >= need
        for start in range(ensemble_size)
    )


def segment_ranges(spec: LedgerSpec, first: int, last: int) -> list[tuple[int, int]]:
    """first..last cut at the ledger's segment boundaries."""
    out: list[tuple[int, int]] = []
    starts = [start for start, _ in spec.ensembles]
    for i, start in enumerate(starts):
        end = starts[i + 1] - 1 if i + 1 < len(starts) else last
        lo, hi = max(first, start), min(last, end)
        if lo <= hi:
            out.append((lo, hi))
    return out
