"""A group of records waiting for one fsync (group commit), and the future its writers share."""

from __future__ import annotations

import asyncio
from typing import Any


class GroupFuture(asyncio.Future[None]):
    """Shared by every waiter of a group: a waiter being cancelled must not cancel the others'
    acknowledgement, so cancel() refuses (the cancelled task still stops when the group ends)."""

    def cancel(self, msg: Any = None) -> bool:
        return False


class Group:
    """Records waiting for the next fsync, and the future their writers wait on."""

    __slots__ = ("add_bytes", "adds", "future", "ops", "parts", "size")

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.future = GroupFuture(loop=loop)
        self.parts: list[bytes] = []
        # (type, ledger, entry, lac, offset in group, record length) per record
        self.ops: list[tuple[int, int, int, int, int, int]] = []
        self.size = 0
        self.adds = 0
        self.add_bytes = 0  # the adds' payloads, for the metrics
