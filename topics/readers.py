"""Non-durable reads: pages of messages from a start position, over one managed ledger or the
partitions of a partitioned topic, optionally through the compacted view.

Every start is normalised to an inclusive message id per managed ledger: `earliest` is 0:0:0
(reads skip positions in trimmed ledgers), `latest` is just past the last entry's messages,
`after:L:E:B` is L:E:B+1. A read asks the managed ledger for entries at positions >= the start's
entry and skips the messages of that first entry before the start's batch index.

Read-compacted (Pulsar's branch rule): while the start is at or before the compaction horizon,
messages come from the compacted view (first compacted message >= start); the rest of the page
continues in the topic right after the horizon.
"""

from __future__ import annotations

import heapq
import logging
from typing import Protocol

from managed_ledger.api import ManagedLedger
from managed_ledger.entry_format import EntryFormatError, StoredMessage, decode_batch
from managed_ledger.position import MessageId

log = logging.getLogger("quire.topics")

# A batch index past any real one: L:E:BEYOND is "after every message of entry L:E".
BEYOND = 2**31 - 1
EARLIEST = MessageId(0, 0, 0)
_ENTRIES_PER_READ = 256


class CompactedSource(Protocol):
    """What reads need of the compacted view (topics.compacted.CompactedView)."""

    async def horizon(self, ml_name: str) -> MessageId | None: ...

    async def read(
        self, ml_name: str, start: MessageId, max_messages: int, until: MessageId | None = None
    ) -> list[StoredMessage]: ...

    async def last_message_id(self, ml_name: str) -> MessageId | None: ...

    def invalidate(self, ml_name: str | None = None) -> None:
        """Forget what is cached of the view (of one managed ledger, or of all): a run was
        requested, so the next read looks at the store again."""
        ...


class NoCompactedView:
    """A view of topics that were never compacted."""

    async def horizon(self, ml_name: str) -> MessageId | None:
        return None

    async def read(
        self, ml_name: str, start: MessageId, max_messages: int, until: MessageId | None = None
    ) -> list[StoredMessage]:
        return []

    async def last_message_id(self, ml_name: str) -> MessageId | None:
        return None

    def invalidate(self, ml_name: str | None = None) -> None:
        pass


def after(message_id: MessageId) -> MessageId:
    """The inclusive start right after `message_id`."""
    return MessageId(message_id.ledger_id, message_id.entry_id, message_id.batch_index + 1)


def before(start: MessageId) -> MessageId | None:
    """An id whose `after` is equivalent to the inclusive `start` (None: from the beginning).

    Ledger ids are unique across the cluster, so L-1:BEYOND:BEYOND holds no entry of this
    managed ledger beyond it: after it comes the first entry at or after L:0."""
    lid, eid, bidx = start
    if bidx > 0:
        return MessageId(lid, eid, bidx - 1)
    if eid > 0:
        return MessageId(lid, eid - 1, BEYOND)
    if lid > 0:
        return MessageId(lid - 1, BEYOND, BEYOND)
    return None


def latest(ml: ManagedLedger) -> MessageId:
    last = ml.last_confirmed_position
    return EARLIEST if last is None else MessageId(last.ledger_id, last.entry_id, BEYOND)


def entries_wanted(messages_wanted: int, messages_seen: int, entries_seen: int) -> int:
    """How many entries to read for `messages_wanted` more messages, at the batch size seen so
    far (one entry to learn it): reading 256 entries of 1,000-message batches for a page of 100
    would decode 2,560 times what is returned."""
    if entries_seen == 0:
        return 1
    per_entry = max(1, messages_seen // entries_seen)
    return max(1, min(-(-messages_wanted // per_entry), _ENTRIES_PER_READ))


def decode_entry(ml_name: str, ledger_id: int, entry_id: int, payload: bytes) -> list[StoredMessage]:
    try:
        return decode_batch(ledger_id, entry_id, payload)
    except EntryFormatError as exc:
        # Not ours to serve (a foreign or damaged payload): skipped, never a reason to fail reads.
        log.warning("%s: skipping undecodable entry %d:%d: %s", ml_name, ledger_id, entry_id, exc)
        return []


async def read_ledger(ml: ManagedLedger, start: MessageId, max_messages: int) -> list[StoredMessage]:
    """Up to max_messages topic messages with id >= start, in order."""
    out: list[StoredMessage] = []
    position = start.position
    entries_read = messages_read = 0
    if start.batch_index >= BEYOND:
        position = ml.next_position(position)  # `latest`: nothing of that entry is wanted
    while len(out) < max_messages:
        wanted = entries_wanted(max_messages - len(out), messages_read, entries_read)
        entries = await ml.read_entries(position, wanted)
        if not entries:
            break
        entries_read += len(entries)
        for pos, payload in entries:
            messages = decode_entry(ml.name, pos.ledger_id, pos.entry_id, payload)
            messages_read += len(messages)
            if pos == start.position and start.batch_index > 0:
                messages = messages[start.batch_index :]
            out.extend(messages)
        position = ml.next_position(entries[-1][0])
    del out[max_messages:]
    return out


async def read_one(
    ml: ManagedLedger, view: CompactedSource, start: MessageId, max_messages: int, read_compacted: bool
) -> list[StoredMessage]:
    """A page of one managed ledger, through the compacted view when asked (the branch rule)."""
    out: list[StoredMessage] = []
    if read_compacted:
        horizon = await view.horizon(ml.name)
        if horizon is not None and start <= horizon:
            # up to the horizon read first, which the topic is read after (a run may commit between)
            out = await view.read(ml.name, start, max_messages, until=horizon)
            if len(out) >= max_messages:
                return out[:max_messages]
            start = after(horizon)
    out.extend(await read_ledger(ml, start, max_messages - len(out)))
    return out


async def read_merged(
    mls: list[ManagedLedger],
    view: CompactedSource,
    starts: list[MessageId],
    max_messages: int,
    read_compacted: bool,
) -> tuple[list[StoredMessage], list[MessageId | None]]:
    """A page over several managed ledgers merged by publish time (each one's order kept), and
    the `next` slots: per managed ledger, the id to read after."""
    pages = [
        await read_one(ml, view, s, max_messages, read_compacted) for ml, s in zip(mls, starts, strict=True)
    ]
    if len(pages) == 1:
        merged = pages[0]
        tagged = [(0, m) for m in merged]
    else:
        streams = [[(m.publish_time, i, m) for m in page] for i, page in enumerate(pages)]
        tagged = [(i, m) for _, i, m in heapq.merge(*streams, key=lambda t: t[0])][:max_messages]
        merged = [m for _, m in tagged]
    slots: list[MessageId | None] = [before(s) for s in starts]
    for i, m in tagged:
        slots[i] = m.message_id
    return merged, slots
