"""Admission control for streaming reads: where `maxMessagesPerTrigger` messages end.

The driver reads the entries after each topic-partition's start from the bookies and counts
their messages from each entry's header (version 2 entries carry the count; older ones are
decoded), until the trigger's budget is spent. That reads the trigger's bytes once more on the
driver, which is the price of an exact limit: entries are batches of any size, so entry counts
alone cannot bound messages.
"""

from __future__ import annotations

import asyncio

from managed_ledger.entry_format import decode_batch_header, entry_offsets
from quire_spark.offsets import Id
from quire_spark.plan import LedgerRange
from quire_spark.reader import client_factory, spec_of

CHUNK_ENTRIES = 256


def _count(payload: bytes) -> int:
    offsets = entry_offsets(payload)
    if offsets is not None:
        return offsets[1]
    return len(decode_batch_header(payload)[2])


async def _cap(ranges: list[LedgerRange], budget: int, secret: str) -> tuple[Id | None, int]:
    """The end (exclusive) after `budget` messages of `ranges` (in id order), or None when they
    hold fewer; and the messages counted."""
    client = client_factory(secret)
    taken = 0
    try:
        for r in ranges:
            spec = spec_of(r)
            first = r.first_entry
            while first <= r.last_entry:
                last = min(r.last_entry, first + CHUNK_ENTRIES - 1)
                for eid, payload in enumerate(await client.read_entries(spec, first, last), start=first):
                    lo = r.start.batch_index if Id(r.ledger.ledger_id, eid, 0) < r.start else 0
                    n = _count(payload) - lo
                    if taken + n >= budget:
                        return Id(r.ledger.ledger_id, eid, lo + budget - taken), budget
                    taken += n
                first = last + 1
    finally:
        await client.close()
    return None, taken


def cap(ranges: list[LedgerRange], budget: int, secret: str) -> tuple[Id | None, int]:
    return asyncio.run(_cap(ranges, budget, secret))
