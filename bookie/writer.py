"""The single writer of one ledger: dense entry ids, quorum acknowledgement, completion in order.

BookKeeper's `LedgerHandle` with its `PendingAddOp`s, over the client's connections (the rules
are in the `bookie.client` docstring).
"""

from __future__ import annotations

import asyncio
import collections
from collections.abc import Sequence

from bookie.connection import OK_BODY, Connection, reply_error
from bookie.errors import BookieError, ErrorCode
from bookie.types import LedgerSpec


class _PendingAdd:
    __slots__ = ("acks", "entry_id", "errors", "future")

    def __init__(self, entry_id: int, future: asyncio.Future[int]) -> None:
        self.entry_id = entry_id
        self.future = future
        self.acks = 0
        self.errors = 0


class BookieLedgerWriter:
    """The single writer of one ledger (bookie.api.LedgerWriter), over the client's connections."""

    def __init__(self, spec: LedgerSpec, connections: Sequence[Connection]) -> None:
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
        if body == OK_BODY:
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
