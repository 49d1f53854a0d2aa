"""The entries a process's managed ledgers appended last, kept in memory for the readers that keep
up with the writers (a Kafka consumer at the tail, a subscription dispatching as messages come):
they are served without a bookie round trip. Pulsar's managed ledger entry cache, in its
simplest form: one byte budget for every managed ledger of the process, oldest insert out first.

What is cached is what a bookie would return. An entry goes in only once its add is acknowledged
by its ack quorum (stamped, as stored), under (ledger id, entry id); entries never change and
ids are never reused. Reads ask only for entries of ledgers still in their managed ledger's
list (`LedgerList.read_plan`), so an entry of a trimmed or deleted ledger is never served, only
held until the budget pushes it out.
"""

from __future__ import annotations

from collections import OrderedDict

from managed_ledger.position import Position


class EntryCache:
    def __init__(self, max_bytes: int) -> None:
        self.max_bytes = max_bytes
        self.size = 0
        self.hits = 0
        self._entries: OrderedDict[tuple[int, int], bytes] = OrderedDict()

    def __len__(self) -> int:
        return len(self._entries)

    def put(self, ledger_id: int, entry_id: int, payload: bytes) -> None:
        """Keep a durable entry, pushing out the oldest ones past the budget (an entry larger
        than the whole budget is not kept)."""
        if len(payload) > self.max_bytes:
            return
        old = self._entries.pop((ledger_id, entry_id), None)
        if old is not None:
            self.size -= len(old)
        self._entries[(ledger_id, entry_id)] = payload
        self.size += len(payload)
        while self.size > self.max_bytes:
            _, evicted = self._entries.popitem(last=False)
            self.size -= len(evicted)

    def run(self, ledger_id: int, first: int, last: int) -> list[tuple[Position, bytes]]:
        """The entries first, first + 1, ... (up to last) of the ledger while they are cached:
        the longest cached run from `first`, empty when `first` is not cached."""
        out: list[tuple[Position, bytes]] = []
        get = self._entries.get
        for entry_id in range(first, last + 1):
            payload = get((ledger_id, entry_id))
            if payload is None:
                break
            out.append((Position(ledger_id, entry_id), payload))
        self.hits += len(out)
        return out
