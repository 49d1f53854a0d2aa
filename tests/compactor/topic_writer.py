"""Writes a topic's managed ledger straight through the metadata store and a ledger client, as a
broker would (ledger metadata, ML ledger list, entries of kind-0 batches), so compactor tests and
the benchmark do not depend on the broker. Also the dict model of the compaction rules."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import replace

from bookie.api import LedgerClient, LedgerWriter
from bookie.ledgers import LedgerManager
from bookie.types import LedgerSpec
from managed_ledger.entry_format import Message, StoredMessage, decode_batch, encode_batch
from managed_ledger.metadata.api import LedgerMetadata, LedgerState, MetadataStore
from managed_ledger.position import MessageId


class TopicWriter:
    def __init__(
        self, store: MetadataStore, client: LedgerClient, ml_name: str, bookies: Sequence[str] = ("b:1",)
    ) -> None:
        self.store = store
        self.client = client
        self.ml_name = ml_name
        self.bookies = tuple(bookies)
        self.meta: LedgerMetadata | None = None
        self.writer: LedgerWriter | None = None
        self.size = 0
        self.written: list[StoredMessage] = []  # every message, in id order
        if store.get_managed_ledger(ml_name) is None:
            store.create_managed_ledger(ml_name)

    async def roll(self) -> None:
        """Close the current ledger (if any) and open a new one."""
        await self.close_ledger()
        meta = self.store.create_ledger(self.bookies, 1, 1, 0)
        ml = self.store.get_managed_ledger(self.ml_name)
        assert ml is not None
        self.store.update_managed_ledger(replace(ml, ledger_ids=(*ml.ledger_ids, meta.ledger_id)))
        spec = LedgerSpec(meta.ledger_id, meta.ensemble, meta.write_quorum, meta.ack_quorum)
        self.writer = await self.client.create_ledger(spec)
        self.meta, self.size = meta, 0

    async def append(self, messages: Sequence[Message], publish_time: int = 1) -> list[MessageId]:
        if self.writer is None:
            await self.roll()
        assert self.writer is not None and self.meta is not None
        payload = encode_batch(publish_time, "p", messages)
        entry_id = await self.writer.add_entry(payload)
        self.size += len(payload)
        stored = decode_batch(self.meta.ledger_id, entry_id, payload)
        self.written.extend(stored)
        return [m.message_id for m in stored]

    async def append_many(self, batches: Sequence[Sequence[Message]], in_flight: int = 64) -> None:
        """Pipelined appends of many batches (for big workloads); ids are not returned."""
        if self.writer is None:
            await self.roll()
        assert self.writer is not None
        sem = asyncio.Semaphore(in_flight)

        async def one(payload: bytes) -> int:
            async with sem:
                assert self.writer is not None
                return await self.writer.add_entry(payload)

        payloads = [encode_batch(1, "p", b) for b in batches]
        await asyncio.gather(*(one(p) for p in payloads))
        self.size += sum(len(p) for p in payloads)

    async def append_payloads(self, payloads: Sequence[bytes], in_flight: int = 256) -> None:
        """Pipelined appends of encoded batches (benchmarks); nothing is kept in `written`."""
        if self.writer is None:
            await self.roll()
        writer = self.writer
        assert writer is not None
        for i in range(0, len(payloads), in_flight):
            chunk = payloads[i : i + in_flight]
            await asyncio.gather(*(writer.add_entry(p) for p in chunk))
            self.size += sum(len(p) for p in chunk)

    async def trim(self, horizon: MessageId | None) -> list[int]:
        """Retention's trim of a topic whose compaction holds what it has not read: the ledgers
        wholly before the horizon's ledger go (the current one never), the list first."""
        ml = self.store.get_managed_ledger(self.ml_name)
        assert ml is not None
        current = self.meta.ledger_id if self.meta is not None else None
        gone = [i for i in ml.ledger_ids if horizon is not None and i < horizon.ledger_id and i != current]
        if gone:
            self.store.update_managed_ledger(
                replace(ml, ledger_ids=tuple(i for i in ml.ledger_ids if i not in gone))
            )
            for ledger_id in gone:
                await LedgerManager(self.store, self.client).delete(ledger_id)
        return gone

    async def close_ledger(self) -> None:
        if self.writer is None or self.meta is None:
            return
        last = await self.writer.close()
        self.store.update_ledger(
            replace(self.meta, state=LedgerState.CLOSED, last_entry_id=last, length_bytes=self.size)
        )
        self.writer = self.meta = None


def model(
    messages: Sequence[StoredMessage],
    horizon: MessageId | None,
    keyless: str,
    tombstones_after_ms: int | None = None,
) -> list[StoredMessage]:
    """The compaction rules over everything written up to the horizon (no trimming); a
    tombstone published after `tombstones_after_ms` stays (None: none stays)."""
    latest: dict[str, StoredMessage] = {}
    kept: list[StoredMessage] = []
    for m in messages:
        if horizon is None or m.message_id > horizon:
            continue
        if m.key is None:
            if keyless == "keep":
                kept.append(m)
        else:
            latest[m.key] = m
    after = tombstones_after_ms
    survivors = [m for m in latest.values() if m.value or (after is not None and m.publish_time > after)]
    return sorted(survivors + kept, key=lambda m: m.message_id)
