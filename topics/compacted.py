"""The read side of topic compaction: messages of a managed ledger's compacted ledger.

Readers and subscriptions with `read_compacted` branch by message id (Pulsar's rule): while their
position is at or before `horizon(ml)` they read here — from the first compacted message at or
after their position — then continue with the topic after the horizon.

A compacted ledger holds kind-1 entries (managed_ledger.entry_format): each a batch of surviving
messages in id order with their original ids, so entry first ids increase. `read(start)` finds
the last entry whose first id <= start by binary search over entries, reading only the head of
each probed entry (msgpack array header + first row), and caches those first ids and a few
decoded entries per compacted ledger; sequential paging costs one decode per entry, no scan.
Compacted ledgers are CLOSED and immutable, so their caches never go stale; a new run makes a new
ledger (and a fold deletes the ones it replaced): a read that finds a ledger gone reloads the state.

The view is layered (compactor/runner.py): a base ledger and delta ledgers, oldest first, each
layer's ids above every older layer's. A row is served iff its key appears in no newer layer
(key-less rows always are); a delta's tombstones only hide keys and are never served (deltas are
written only under rules that keep no tombstones). `read` walks the layers in order, the base by
binary search as above, each delta the same way; the keys of each delta are loaded once per
delta ledger (cost: the delta's size) and cached with it.
"""

from __future__ import annotations

import time
from collections import OrderedDict
from dataclasses import dataclass, field

import msgpack

from bookie.api import LedgerClient
from bookie.errors import NoSuchLedgerError
from bookie.ledgers import LedgerManager, ledger_spec
from bookie.metadata_calls import call_store
from bookie.types import LedgerSpec
from common.errors import ErrorKind, QuireError
from managed_ledger.entry_format import (
    KIND_COMPACTED,
    StoredMessage,
    body_start,
    decode_compacted,
    entry_kind,
)
from managed_ledger.metadata.api import CompactionState, MetadataStore, NotFoundError
from managed_ledger.position import MessageId

DECODED_ENTRIES_CACHED = 4  # per compacted ledger: enough for readers paging through it
LEDGERS_CACHED = 256
KEY_READ_ENTRIES = 64  # entries per read while loading a delta's keys


class CompactedViewError(QuireError):
    """A compacted ledger's entry is not a compacted batch (a bug or a foreign ledger)."""

    kind = ErrorKind.internal


def first_message_id(payload: bytes) -> MessageId | None:
    """The id of the first message of a compacted entry, without decoding the rest."""
    if entry_kind(payload) != KIND_COMPACTED:
        raise CompactedViewError("not a compacted entry")
    unpacker = msgpack.Unpacker(raw=False, strict_map_key=False)
    unpacker.feed(memoryview(payload)[body_start(payload) :])
    if unpacker.read_array_header() == 0:
        return None
    if unpacker.read_array_header() < 3:
        raise CompactedViewError("compacted row too short")
    return MessageId(unpacker.unpack(), unpacker.unpack(), unpacker.unpack())


@dataclass
class _LedgerCache:
    spec: LedgerSpec
    last_entry_id: int
    first_ids: dict[int, MessageId | None] = field(default_factory=dict)
    decoded: OrderedDict[int, list[StoredMessage]] = field(default_factory=OrderedDict)
    keys: frozenset[str] | None = None  # a delta's keys, loaded on first use


@dataclass(frozen=True, slots=True)
class _Layer:
    """One layer of the view as a read walks it: its ledger, the key sets of the newer layers
    (a row whose key is in one is shadowed) and whether its tombstones are hidden (deltas)."""

    ledger_id: int
    newer: tuple[frozenset[str], ...]
    hide_tombstones: bool

    def visible(self, m: StoredMessage) -> bool:
        if m.key is None:
            return True
        if self.hide_tombstones and not m.value:
            return False
        return not any(m.key in keys for keys in self.newer)


class CompactedView:
    """Reads compacted ledgers. `state_ttl_s` > 0 caches each topic's compaction state that long
    (0: one metadata read per call, always current)."""

    def __init__(self, store: MetadataStore, client: LedgerClient, state_ttl_s: float = 0.0) -> None:
        self._store = store
        self._client = client
        self._ledger_manager = LedgerManager(store, client)
        self._state_ttl_s = state_ttl_s
        self._states: dict[str, tuple[float, CompactionState]] = {}
        self._ledgers: OrderedDict[int, _LedgerCache] = OrderedDict()

    # --- public surface ------------------------------------------------------------------------
    async def horizon(self, ml_name: str) -> MessageId | None:
        """The id of the last topic message the compacted view covers (None: never compacted)."""
        state = await self._state(ml_name)
        return MessageId(*state.horizon) if state.horizon is not None else None

    async def read(
        self, ml_name: str, start: MessageId, max_messages: int, until: MessageId | None = None
    ) -> list[StoredMessage]:
        """Compacted messages with id >= start in id order, at most max_messages; with `until`
        (the horizon a caller read before, which it goes on reading the topic after), none past
        it, though a run that committed since may have moved the view's horizon further."""
        for attempt in range(2):
            state = await self._state(ml_name, refresh=attempt > 0)
            if state.compacted_ledger_id is None or max_messages <= 0:
                return []
            try:
                out: list[StoredMessage] = []
                for layer in await self._layers(state):
                    await self._read(layer, start, max_messages, out)
                    if len(out) >= max_messages:
                        break
                return out if until is None else [m for m in out if m.message_id <= until]
            except (NoSuchLedgerError, NotFoundError):
                if attempt:  # a newer run replaced the ledgers between our reads twice: give up
                    raise
                for ledger_id in state.layer_ledger_ids:
                    self._ledgers.pop(ledger_id, None)
        raise AssertionError("unreachable")

    async def last_message_id(self, ml_name: str) -> MessageId | None:
        """The last message of the compacted view (None when empty or never compacted): the last
        visible row, from the newest layer backwards."""
        state = await self._state(ml_name)
        for layer in reversed(await self._layers(state)):
            cache = await self._ledger(layer.ledger_id)
            for entry_id in range(cache.last_entry_id, -1, -1):
                for m in reversed(await self._entry(cache, entry_id)):
                    if layer.visible(m):
                        return m.message_id
        return None

    def invalidate(self, ml_name: str | None = None) -> None:
        """Forget cached states (all, or one topic's); the topics service calls it after a trigger."""
        if ml_name is None:
            self._states.clear()
        else:
            self._states.pop(ml_name, None)

    # --- internals -----------------------------------------------------------------------------
    async def _state(self, ml_name: str, refresh: bool = False) -> CompactionState:
        cached = self._states.get(ml_name)
        now = time.monotonic()
        if cached is not None and not refresh and now - cached[0] < self._state_ttl_s:
            return cached[1]
        state = await call_store(self._store.get_compaction, ml_name)
        if self._state_ttl_s > 0:
            self._states[ml_name] = (now, state)
        return state

    async def _ledger(self, ledger_id: int) -> _LedgerCache:
        cache = self._ledgers.get(ledger_id)
        if cache is None:
            meta = await self._ledger_manager.get(ledger_id)
            cache = self._ledgers[ledger_id] = _LedgerCache(ledger_spec(meta), meta.last_entry_id)
            while len(self._ledgers) > LEDGERS_CACHED:
                self._ledgers.popitem(last=False)
        self._ledgers.move_to_end(ledger_id)
        return cache

    async def _first_id(self, cache: _LedgerCache, entry_id: int) -> MessageId | None:
        if entry_id not in cache.first_ids:
            if entry_id in cache.decoded:
                msgs = cache.decoded[entry_id]
                cache.first_ids[entry_id] = msgs[0].message_id if msgs else None
            else:
                (payload,) = await self._client.read_entries(cache.spec, entry_id, entry_id)
                cache.first_ids[entry_id] = first_message_id(payload)
        return cache.first_ids[entry_id]

    async def _entry(self, cache: _LedgerCache, entry_id: int) -> list[StoredMessage]:
        msgs = cache.decoded.get(entry_id)
        if msgs is None:
            (payload,) = await self._client.read_entries(cache.spec, entry_id, entry_id)
            msgs = decode_compacted(payload)
            cache.decoded[entry_id] = msgs
            cache.first_ids[entry_id] = msgs[0].message_id if msgs else None
            while len(cache.decoded) > DECODED_ENTRIES_CACHED:
                cache.decoded.popitem(last=False)
        cache.decoded.move_to_end(entry_id)
        return msgs

    async def _find_entry(self, cache: _LedgerCache, start: MessageId) -> int:
        """The last entry whose first id <= start (0 when start precedes everything)."""
        lo, hi, found = 0, cache.last_entry_id, 0
        while lo <= hi:
            mid = (lo + hi) // 2
            first = await self._first_id(cache, mid)
            if first is None or first <= start:  # an empty entry never occurs; treat as "before"
                found, lo = mid, mid + 1
            else:
                hi = mid - 1
        return found

    async def _layers(self, state: CompactionState) -> list[_Layer]:
        """The view's layers, oldest first, each with the keys of the layers newer than it."""
        keys = [await self._keys(d) for d in state.delta_ledger_ids]
        ids = state.layer_ledger_ids
        return [_Layer(ledger_id, tuple(keys[i:]), i > 0) for i, ledger_id in enumerate(ids)]

    async def _keys(self, ledger_id: int) -> frozenset[str]:
        """Every key of a (delta) ledger, read once per ledger."""
        cache = await self._ledger(ledger_id)
        if cache.keys is None:
            keys: set[str] = set()
            for first in range(0, cache.last_entry_id + 1, KEY_READ_ENTRIES):
                last = min(first + KEY_READ_ENTRIES - 1, cache.last_entry_id)
                for payload in await self._client.read_entries(cache.spec, first, last):
                    keys.update(m.key for m in decode_compacted(payload) if m.key is not None)
            cache.keys = frozenset(keys)
        return cache.keys

    async def _read(
        self, layer: _Layer, start: MessageId, max_messages: int, out: list[StoredMessage]
    ) -> None:
        """Append the layer's visible messages with id >= start to `out` until it holds max_messages."""
        cache = await self._ledger(layer.ledger_id)
        if cache.last_entry_id < 0:
            return
        entry_id = await self._find_entry(cache, start)
        while entry_id <= cache.last_entry_id and len(out) < max_messages:
            for m in await self._entry(cache, entry_id):
                if m.message_id >= start and layer.visible(m):
                    out.append(m)
                    if len(out) >= max_messages:
                        break
            entry_id += 1
