"""The compaction rules in plain Python: the oracle the Spark job is tested against.

Written for clarity, not speed: it reads every range through the ledger client in order, keeps a
dict of the newest message per key in memory and sorts the survivors. The rules (docs/semantics.md,
Pulsar's TwoPhaseCompactor with Quire's key-less policy):

- the input is the previous compacted view (a fold: its base and delta layers) plus the topic's
  messages with old_horizon < id <= new_horizon (a delta run: those alone); a topic ledger deleted
  meanwhile (retention) contributes what was read of it, as its data is gone;
- a delta's tombstones were never served (deltas are written only under rules that keep none):
  in a fold each still wins its key, and then goes with it whatever the fold's rules;
- per key, the message with the highest id wins; if its value is empty (a tombstone) the key is
  deleted: the tombstone stays in the view while it is younger than the rules'
  delete_retention_ms (so a consumer rebuilding state from the view sees the delete), and goes
  at the first run after that (at once with 0, Pulsar's rule);
- key-less messages are dropped (policy "drop", the default) or all kept ("keep");
- survivors are written in id order, each with its original id, key, properties and times.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable, Iterator
from dataclasses import replace

from bookie.api import LedgerClient, read_ranges
from bookie.errors import NoSuchLedgerError
from compactor.config import HIDDEN_TOMBSTONE, CompactionRules
from compactor.plan import CompactionPlan, ReadRange
from managed_ledger.entry_format import StoredMessage, encode_compacted, iter_messages

EntrySink = Callable[[bytes, int], Awaitable[None]]
READ_CHUNK_ENTRIES = 64


async def read_messages(client: LedgerClient, plan: CompactionPlan) -> list[StoredMessage]:
    """Every input message of the plan, in range order."""
    out: list[StoredMessage] = []
    for r in plan.ranges:
        out.extend(await _read_range(client, plan, r))
    return out


async def _read_range(client: LedgerClient, plan: CompactionPlan, r: ReadRange) -> list[StoredMessage]:
    out: list[StoredMessage] = []
    for first, last in read_ranges(r.first_entry_id, r.last_entry_id, READ_CHUNK_ENTRIES):
        try:
            payloads = await client.read_entries(r.spec, first, last)
        except NoSuchLedgerError:
            if r.compacted:
                raise
            return out  # trimmed by retention: its data is gone from the view too
        for entry_id, payload in enumerate(payloads, start=first):
            for m in iter_messages(r.ledger_id, entry_id, payload):
                if r.compacted and r.layer > 0 and m.key is not None and not m.value:
                    out.append(replace(m, publish_time=HIDDEN_TOMBSTONE))  # never served: it goes
                elif r.compacted or _in_window(plan, m):
                    out.append(m)
    return out


def _in_window(plan: CompactionPlan, m: StoredMessage) -> bool:
    if plan.old_horizon is not None and m.message_id <= plan.old_horizon:
        return False
    return plan.new_horizon is None or m.message_id <= plan.new_horizon


def survivors(messages: Iterable[StoredMessage], rules: CompactionRules) -> list[StoredMessage]:
    """The compaction rules proper: newest per key, tombstones deleted (or kept while young),
    key-less by policy."""
    latest: dict[str, StoredMessage] = {}
    keyless: list[StoredMessage] = []
    for m in messages:
        if m.key is None:
            if rules.keyless_policy == "keep":
                keyless.append(m)
            continue
        seen = latest.get(m.key)
        if seen is None or m.message_id > seen.message_id:
            latest[m.key] = m
    kept = [m for m in latest.values() if m.value or rules.keeps_tombstone(m.publish_time)] + keyless
    kept.sort(key=lambda m: m.message_id)
    return kept


def pack_entries(
    messages: list[StoredMessage], max_messages: int, max_bytes: int
) -> Iterator[tuple[bytes, int]]:
    """Group messages (in order) into compacted entries of bounded count and approximate size."""
    batch: list[StoredMessage] = []
    size = 0
    for m in messages:
        m_size = len(m.value) + len(m.key or "") + 64
        if batch and (len(batch) >= max_messages or size + m_size > max_bytes):
            yield encode_compacted(batch), len(batch)
            batch, size = [], 0
        batch.append(m)
        size += m_size
    if batch:
        yield encode_compacted(batch), len(batch)


class ReferenceEngine:
    """Runs a plan with the plain-Python rules (the same interface as the Spark job)."""

    name = "reference"

    def __init__(self, client: LedgerClient, entry_max_messages: int = 1_000, entry_max_bytes: int = 1 << 20):
        self._client = client
        self._max_messages = entry_max_messages
        self._max_bytes = entry_max_bytes

    async def compute(self, plan: CompactionPlan, rules: CompactionRules, sink: EntrySink) -> int:
        """Feed the compacted entries to `sink` in id order; returns the number of messages read."""
        messages = await read_messages(self._client, plan)
        for payload, count in pack_entries(survivors(messages, rules), self._max_messages, self._max_bytes):
            await sink(payload, count)
        return len(messages)
