"""The single writer of one ledger: dense entry ids, quorum acknowledgement, completion in order,
and the ensemble change that replaces a failed bookie.

BookKeeper's `LedgerHandle` with its `PendingAddOp`s, over the client's connections (the rules
are in the `bookie.client` docstring). Each position of the current ensemble is a `_Slot`: the
bookie there and its connection. Acks are kept per add as a bit per position, so that when the
bookie at a position is replaced, its acks of entries not yet acknowledged to the caller can be
taken back and those entries sent to the replacement.

Ensemble change (when the ledger lifecycle gave the writer an `EnsembleChanger`): an add that
fails or times out on a bookie marks that position broken; nothing more is sent there. A task
then asks the changer for replacements from entry LAC + 1 on; the changer records the new
segment in the ledger's metadata (compare-and-set) and only then returns. While it runs no entry
completes, so no entry of the new segment is acknowledged before the metadata names the bookies
that hold it. Then the adds in flight whose write set includes a replaced position are sent to
the replacement, and writing carries on. A fenced reply is not a bookie failure (someone else
recovered the ledger): the writer fails, as it does when no replacement can be found.
"""

from __future__ import annotations

import asyncio
import collections
import logging
from collections.abc import Awaitable, Callable, Sequence

from bookie.api import EnsembleChanger
from bookie.connection import OK_BODY, Connection, reply_code, reply_error
from bookie.errors import BookieError, ErrorCode
from bookie.types import LedgerSpec

log = logging.getLogger("quire.bookie.writer")
Connect = Callable[[str], Awaitable[Connection]]
MAX_CHANGE_ROUNDS = 16  # replacements tried in a row without success before the writer gives up


class _PendingAdd:
    __slots__ = ("acked", "acks", "entry_id", "errors", "future", "payload")

    def __init__(self, entry_id: int, future: asyncio.Future[int], payload: bytes) -> None:
        self.entry_id = entry_id
        self.future = future
        self.payload = payload  # kept until acknowledged: a replacement bookie may need it
        self.acked = 0  # a bit per ensemble position that acknowledged this add
        self.acks = 0
        self.errors = 0


class _Slot:
    """One position of the current ensemble. Replies reaching a slot that was replaced (a bookie
    that answers late, after a pause) are ignored."""

    __slots__ = ("address", "bit", "conn", "index", "reconnect", "reply", "retired", "writer")

    def __init__(self, writer: BookieLedgerWriter, index: int, address: str, conn: Connection | None) -> None:
        self.writer = writer
        self.index = index
        self.bit = 1 << index
        self.address = address
        self.conn = conn
        self.retired = False
        # An add was sent here on a connection already closed (the bookie went away while the
        # ledger was idle): try the same bookie again before replacing it.
        self.reconnect = False
        self.reply = self._on_reply  # bound once: it is the callback of every add sent here

    def _on_reply(self, add: _PendingAdd, body: bytes) -> None:
        if self.retired:
            return
        if body == OK_BODY:
            add.acked |= self.bit
            add.acks += 1
            writer = self.writer
            if add.acks == writer._ack_quorum and writer._pending and writer._pending[0] is add:
                writer._advance()
            return
        self.writer._add_failed(self, add, body)


class BookieLedgerWriter:
    """The single writer of one ledger (bookie.api.LedgerWriter), over the client's connections.

    `connections` are those of `spec.last_ensemble`, None where a bookie could not be reached
    (allowed only with an `on_ensemble_change`: that position is replaced before the first add
    goes there). `connect` opens a connection to a replacement bookie.
    """

    def __init__(
        self,
        spec: LedgerSpec,
        connections: Sequence[Connection | None],
        on_ensemble_change: EnsembleChanger | None = None,
        connect: Connect | None = None,
    ) -> None:
        self._spec = spec
        self._ledger_id = spec.ledger_id
        self._ensemble_size = len(connections)
        self._write_quorum = spec.write_quorum
        self._ack_quorum = spec.ack_quorum
        self._tolerated_errors = spec.write_quorum - spec.ack_quorum
        self._loop = asyncio.get_running_loop()
        self._slots = [
            _Slot(self, i, a, c) for i, (a, c) in enumerate(zip(spec.last_ensemble, connections, strict=True))
        ]
        self._changer = on_ensemble_change
        self._connect = connect
        self._broken: set[int] = {i for i, c in enumerate(connections) if c is None}
        self._bad: set[str] = {self._slots[i].address for i in self._broken}  # failed for this writer
        self._changing: asyncio.Task[None] | None = None
        self._next_entry_id = 0
        self._lac = -1
        self._pending: collections.deque[_PendingAdd] = collections.deque()
        self._failed: BookieError | None = None
        self._failed_from = -1
        self._closed = False
        self._drained: asyncio.Future[None] | None = None  # close() waits on it
        if self._broken:
            if on_ensemble_change is None:
                raise ValueError("a writer without an ensemble changer needs every connection")
            self._start_change()

    @property
    def spec(self) -> LedgerSpec:
        """The ledger's spec with every ensemble change this writer made."""
        return self._spec

    @property
    def last_add_confirmed(self) -> int:
        return self._lac

    @property
    def failure(self) -> BookieError | None:
        return self._failed

    def add_entry_future(self, payload: bytes) -> asyncio.Future[int]:
        """`add_entry` without a coroutine: the future completes with the entry id.

        Cheaper when a caller keeps many adds in flight itself (benchmarks, batch writers)."""
        future: asyncio.Future[int] = self._loop.create_future()
        if self._closed or self._failed is not None:
            future.set_exception(self._failed or BookieError(ErrorCode.BAD_REQUEST, "writer is closed"))
            return future
        entry_id = self._next_entry_id
        self._next_entry_id = entry_id + 1
        add = _PendingAdd(entry_id, future, payload)
        self._pending.append(add)
        if self._ensemble_size == 1 and not self._broken:
            slot = self._slots[0]
            if slot.conn.closed:  # type: ignore[union-attr]
                slot.reconnect = True
            slot.conn.send_add(self._ledger_id, entry_id, self._lac, payload, 0, slot.reply, add)  # type: ignore[union-attr]
            return future
        broken = self._broken
        for i in range(self._write_quorum):
            index = (entry_id + i) % self._ensemble_size
            if index in broken:
                continue  # sent to the replacement once the ensemble change has one
            slot = self._slots[index]
            if slot.conn.closed:  # type: ignore[union-attr]
                slot.reconnect = True
            slot.conn.send_add(self._ledger_id, entry_id, self._lac, payload, 0, slot.reply, add)  # type: ignore[union-attr]
        return future

    async def add_entry(self, payload: bytes) -> int:
        return await self.add_entry_future(payload)

    # --- failures ------------------------------------------------------------------------------
    def _add_failed(self, slot: _Slot, add: _PendingAdd, body: bytes) -> None:
        if reply_code(body) == ErrorCode.FENCED:
            # Someone recovered the ledger: no replacement can help; fail from here on.
            self._fail(max(add.entry_id, self._lac + 1), reply_error(body, self._ledger_id, add.entry_id))
            return
        if self._changer is None:
            add.errors += 1
            if add.errors > self._tolerated_errors and add.acks < self._ack_quorum:
                # This entry can no longer reach its ack quorum: it and every later one fail.
                self._fail(add.entry_id, reply_error(body, self._ledger_id, add.entry_id))
            return
        if slot.index in self._broken:
            return
        log.warning(
            "ledger %d: add of entry %d failed on bookie %s (%s); replacing it",
            self._ledger_id,
            add.entry_id,
            slot.address,
            reply_error(body, self._ledger_id, add.entry_id),
        )
        self._broken.add(slot.index)
        self._bad.add(slot.address)
        self._start_change()

    def _fail(self, from_entry: int, error: BookieError) -> None:
        if self._failed is None or from_entry < self._failed_from:
            self._failed = error
            self._failed_from = from_entry
        self._advance()

    # --- ensemble change -----------------------------------------------------------------------
    def _start_change(self) -> None:
        if self._changing is None and self._failed is None:
            self._changing = self._loop.create_task(self._change_ensemble())

    async def _change_ensemble(self) -> None:
        """Replace broken positions until none is left, the writer failed, or too many rounds."""
        try:
            for _ in range(MAX_CHANGE_ROUNDS):
                if not self._broken or self._failed is not None:
                    return
                await self._replace_broken()
            if self._broken:
                raise BookieError(
                    ErrorCode.UNAVAILABLE,
                    f"no working replacement after {MAX_CHANGE_ROUNDS} ensemble changes",
                )
        except Exception as exc:  # no replacement, metadata store down, ledger fenced: writer fails
            error = exc if isinstance(exc, BookieError) else BookieError(ErrorCode.UNAVAILABLE, str(exc))
            log.warning("ledger %d: ensemble change failed: %s", self._ledger_id, error)
            self._fail(self._lac + 1, error)
        finally:
            self._changing = None
            self._advance()

    async def _replace_broken(self) -> None:
        assert self._changer is not None and self._connect is not None
        start = self._lac + 1  # every entry before it is acknowledged: it stays where it is
        await self._reconnect(start)
        indices = sorted(self._broken)
        if not indices:
            return
        current = self._spec.last_ensemble
        new = await self._changer(start, current, frozenset(self._bad))
        if len(new) != len(current) or any(
            new[i] != current[i] for i in range(len(current)) if i not in indices
        ):
            raise BookieError(ErrorCode.INTERNAL, f"ensemble change returned {new} for {current}")
        self._spec = self._spec.with_segment(start, new)
        log.warning("ledger %d: ensemble from entry %d is %s", self._ledger_id, start, ",".join(new))
        conns = await asyncio.gather(*(self._connect(new[i]) for i in indices), return_exceptions=True)
        for index, conn in zip(indices, conns, strict=True):
            self._slots[index].retired = True
            if isinstance(conn, BaseException):
                self._slots[index] = _Slot(self, index, new[index], None)
                self._bad.add(new[index])  # still broken: the next round replaces it
                continue
            slot = self._slots[index] = _Slot(self, index, new[index], conn)
            self._broken.discard(index)
            self._resend(slot, start)

    async def _reconnect(self, start: int) -> None:
        """A broken position whose connection was already closed when an add was sent there
        (its bookie restarted while the ledger was idle) keeps its bookie if a new connection
        opens, as BookKeeper's client reconnects a closed channel on the next request, but only
        if the same instance answers: one formatted as new since (or another process under its
        id) holds none of the entries it acknowledged, so it is replaced instead. Adds that
        were in flight when a connection broke, or that timed out, get the bookie replaced, as
        in BookKeeper. The adds from `start` are sent again; a bookie stores each entry once."""
        assert self._connect is not None
        for index in sorted(self._broken):
            old = self._slots[index]
            if old.conn is None or not old.reconnect:
                continue
            was = old.conn.known_instance  # None: never asked (judged as before instance ids)
            try:
                conn = await self._connect(old.address)
                instance = was if was is None else await conn.instance()
            except BookieError:
                continue
            if instance != was:
                log.warning(
                    "ledger %d: bookie %s is another instance now (%s, was %s); replacing it",
                    self._ledger_id,
                    old.address,
                    instance,
                    was,
                )
                continue
            log.info("ledger %d: bookie %s reconnected; keeping it", self._ledger_id, old.address)
            old.retired = True
            slot = self._slots[index] = _Slot(self, index, old.address, conn)
            self._broken.discard(index)
            self._bad.discard(old.address)
            self._resend(slot, start)

    def _resend(self, slot: _Slot, start: int) -> None:
        """Send every add in flight from `start` whose write set includes the slot's position to
        its new bookie (an ack from the bookie it replaced no longer counts)."""
        assert slot.conn is not None
        e, bit = self._ensemble_size, slot.bit
        for add in self._pending:
            if add.entry_id < start or (slot.index - add.entry_id) % e >= self._write_quorum:
                continue
            if add.acked & bit:
                add.acked &= ~bit
                add.acks -= 1
            slot.conn.send_add(self._ledger_id, add.entry_id, self._lac, add.payload, 0, slot.reply, add)

    # --- completion ----------------------------------------------------------------------------
    def _advance(self) -> None:
        """Complete callers in id order over the acknowledged (or failed) prefix; nothing
        completes while an ensemble change is being recorded."""
        pending = self._pending
        quorum = self._ack_quorum
        failed_from = self._failed_from if self._failed is not None else -1
        blocked = self._changing is not None
        while pending:
            head = pending[0]
            if failed_from >= 0 and head.entry_id >= failed_from:
                assert self._failed is not None
                pending.popleft()
                if not head.future.done():
                    head.future.set_exception(self._failed)
            elif head.acks >= quorum and not blocked:
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
        if self._changing is not None:
            await asyncio.shield(self._changing)
        return self._lac
