"""The managed ledger's stored record: its ordered ledger ids and its properties.

Every change is one compare-and-set of the record (through `Fence`, so losing it fences this
owner), made under one lock so that this owner's changes never race each other. The `deleting`
property lists ledgers that left the list but are not deleted yet (see `retention`).
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from dataclasses import replace

from managed_ledger.fencing import Fence
from managed_ledger.metadata.api import ManagedLedgerMetadata, MetadataStore
from managed_ledger.offsets import parse_offsets, with_offsets

DELETING = "deleting"  # property: ledger ids removed from the list but not yet deleted


def deleting_ids(properties: Mapping[str, str]) -> list[int]:
    text = properties.get(DELETING, "")
    return [int(x) for x in text.split(",") if x]


def with_deleting(properties: Mapping[str, str], ids: Sequence[int]) -> dict[str, str]:
    """The properties with `deleting` set to `ids` (removed when empty)."""
    out = dict(properties)
    if ids:
        out[DELETING] = ",".join(str(i) for i in sorted(set(ids)))
    else:
        out.pop(DELETING, None)
    return out


class ManagedLedgerRecord:
    def __init__(self, store: MetadataStore, meta: ManagedLedgerMetadata, fence: Fence) -> None:
        self._store = store
        self._meta = meta
        self._fence = fence
        self._lock = asyncio.Lock()

    @property
    def meta(self) -> ManagedLedgerMetadata:
        return self._meta

    @property
    def deleting(self) -> list[int]:
        return deleting_ids(self._meta.properties)

    async def claim(self, ledger_ids: Sequence[int], properties: Mapping[str, str]) -> None:
        """Store the recovered list; an older owner's next change then loses and fences it."""
        async with self._lock:
            await self._put(replace(self._meta, ledger_ids=tuple(ledger_ids), properties=dict(properties)))

    async def add_ledger(self, ledger_id: int, first_offset: int) -> None:
        """The list gains the ledger, the `offsets` property its first offset."""
        async with self._lock:
            meta = self._meta
            offsets = {**parse_offsets(meta.properties), ledger_id: first_offset}
            await self._put(
                replace(
                    meta,
                    ledger_ids=(*meta.ledger_ids, ledger_id),
                    properties=with_offsets(meta.properties, offsets, None),
                )
            )

    async def move_to_deleting(self, ids: Sequence[int], offset_floor: int) -> None:
        """The list loses `ids` and `deleting` gains them, in one compare-and-set; the offsets
        lose them too and the floor becomes `offset_floor` (the first offset still stored)."""
        async with self._lock:
            meta = self._meta
            offsets = {i: o for i, o in parse_offsets(meta.properties).items() if i not in ids}
            properties = with_deleting(meta.properties, [*deleting_ids(meta.properties), *ids])
            await self._put(
                replace(
                    meta,
                    ledger_ids=tuple(i for i in meta.ledger_ids if i not in ids),
                    properties=with_offsets(properties, offsets, offset_floor),
                )
            )

    async def forget_deleting(self, ids: Sequence[int]) -> None:
        """`deleting` loses `ids` (they are deleted)."""
        async with self._lock:
            remaining = [i for i in deleting_ids(self._meta.properties) if i not in ids]
            await self._put(replace(self._meta, properties=with_deleting(self._meta.properties, remaining)))

    async def update_properties(self, changes: Mapping[str, str]) -> None:
        """Set some properties (the others are kept) in one compare-and-set."""
        async with self._lock:
            await self._put(replace(self._meta, properties={**self._meta.properties, **changes}))

    async def _put(self, meta: ManagedLedgerMetadata) -> None:
        self._meta = await self._fence.call(self._store.update_managed_ledger, meta)
