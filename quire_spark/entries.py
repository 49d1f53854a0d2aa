"""The one way a Spark task reads a ledger: entries in chunks, the next chunk already asked for.

Both the connector's tasks (quire_spark.reader) and the compactor's (compactor.tasks) read their
ledger ranges through `entry_chunks`: chunks of `step` entries from the bookies, the read of the
next chunk started before the current one is handed over, so the bookies work while the caller
decodes. Errors of the read (NoSuchLedgerError when retention removed the ledger) come out of
the iteration at the chunk they hit; what to make of them is the caller's.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncGenerator

from bookie.api import LedgerClient
from bookie.types import LedgerSpec


async def entry_chunks(
    client: LedgerClient, spec: LedgerSpec, first: int, last: int, step: int
) -> AsyncGenerator[tuple[int, list[bytes]], None]:
    """(first entry id, payloads) of entries first..last, about `step` at a time, in order."""
    step = max(1, step)
    pending: asyncio.Future[list[bytes]] | None = None
    if first <= last:
        pending = asyncio.ensure_future(client.read_entries(spec, first, min(first + step - 1, last)))
    try:
        while pending is not None:
            payloads = await pending
            start, first = first, first + len(payloads)
            nxt = min(first + step - 1, last)
            pending = asyncio.ensure_future(client.read_entries(spec, first, nxt)) if first <= last else None
            yield start, payloads
    finally:
        if pending is not None:  # the caller stopped early: the read in flight is not wanted
            pending.cancel()
            with contextlib.suppress(BaseException):
                await pending
