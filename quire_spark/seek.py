"""`startingTime`: the first message published at or after a time, found from the bookies.

A managed ledger's entries are in publish-time order (the broker stamps each batch as it
appends it) and a closed ledger's `timestamp` in internalStats is when it closed, so the first
ledger that closed at or after the time (or the open one) holds the first such entry, and a
binary search over its entries' publish times (one entry read per probe) finds it. Partitioned
topics are searched per partition: the REST reader's `time:` start merges the partitions.
"""

from __future__ import annotations

import asyncio

from managed_ledger.entry_format import batch_publish_time
from quire_spark.offsets import Id
from quire_spark.plan import LedgerRange, LedgerState, TopicPartition
from quire_spark.reader import client_factory, spec_of


async def _first_at(tp: TopicPartition, state: LedgerState, ms: int, secret: str) -> Id:
    lac_ledger, lac_entry = state.last_confirmed
    client = client_factory(secret)
    try:
        for ledger in state.ledgers:
            last = lac_entry if ledger.ledger_id == lac_ledger else ledger.entries - 1
            if last < 0 or ledger.ledger_id > lac_ledger:
                continue
            spec = spec_of(LedgerRange(tp, ledger, 0, last, Id(0, 0, 0), Id(0, 0, 0)))

            async def published(eid: int, spec: object = spec) -> int:
                (payload,) = await client.read_entries(spec, eid, eid)  # type: ignore[arg-type]
                return batch_publish_time(payload)

            if await published(last) < ms:
                continue
            lo, hi = 0, last  # the first entry with publish time >= ms is in lo..hi
            while lo < hi:
                mid = (lo + hi) // 2
                if await published(mid) >= ms:
                    hi = mid
                else:
                    lo = mid + 1
            return Id(ledger.ledger_id, lo, 0)
    finally:
        await client.close()
    return state.latest()


def first_at(tp: TopicPartition, state: LedgerState, ms: int, secret: str) -> Id:
    return asyncio.run(_first_at(tp, state, ms, secret))
