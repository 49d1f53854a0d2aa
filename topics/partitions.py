"""Routing produce batches over a partitioned topic's partitions.

A keyed message goes to crc32(utf-8 key) mod N: stable across processes, restarts and Python
versions (Python's `hash()` of a str is salted per process, so it would scatter a key). A
key-less message goes round robin, one partition after the other.
"""

from __future__ import annotations

import zlib
from collections.abc import Sequence

from managed_ledger.entry_format import Message


def partition_for_key(key: str, partitions: int) -> int:
    return zlib.crc32(key.encode()) % partitions


class Router:
    """Splits a batch by partition; keeps the round-robin counter of key-less messages."""

    __slots__ = ("_next", "partitions")

    def __init__(self, partitions: int) -> None:
        assert partitions > 0
        self.partitions = partitions
        self._next = 0

    def route(self, messages: Sequence[Message]) -> dict[int, list[int]]:
        """partition -> indexes of the batch's messages that go there, in batch order."""
        n = self.partitions
        out: dict[int, list[int]] = {}
        for i, m in enumerate(messages):
            if m.key is not None:
                p = zlib.crc32(m.key.encode()) % n
            else:
                p = self._next
                self._next = (p + 1) % n
            out.setdefault(p, []).append(i)
        return out
