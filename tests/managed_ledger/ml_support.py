"""Helpers for the managed ledger tests: configs, an environment of seams, and a "crash"
(a factory abandoned without closing, its successor opened on the same store and bookies)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from bookie.api import LedgerClient
from bookie.memory import InMemoryLedgerClient
from managed_ledger.api import ManagedLedgerConfig, RetentionPolicy, RolloverPolicy
from managed_ledger.clock import ManualClock
from managed_ledger.entry_format import Message, encode_batch
from managed_ledger.factory import ManagedLedgerFactory
from managed_ledger.metadata.api import MetadataStore
from managed_ledger.metadata.memory import InMemoryMetadataStore

BOOKIES = ("127.0.0.1:1",)


def config(
    max_entries: int = 50_000,
    *,
    max_size_bytes: int = 2 * 1024**3,
    min_rollover_ms: int = 0,
    max_rollover_ms: int = 240 * 60_000,
    retention_minutes: int = -1,
    retention_mb: int = -1,
    dedup: bool = False,
    dedup_entries: int = 1_000,
) -> ManagedLedgerConfig:
    return ManagedLedgerConfig(
        rollover=RolloverPolicy(max_entries, max_size_bytes, max_rollover_ms, min_rollover_ms),
        retention=RetentionPolicy(retention_minutes, retention_mb),
        dedup_enabled=dedup,
        dedup_snapshot_interval_entries=dedup_entries,
    )


def batch(publish_time: int, producer: str | None = None, *seqs: int) -> bytes:
    msgs = [Message(value=b"v%d" % s, sequence_id=s) for s in seqs] or [Message(value=b"x")]
    return encode_batch(publish_time, producer, msgs)


@dataclass
class Env:
    store: MetadataStore = field(default_factory=InMemoryMetadataStore)
    client: LedgerClient = field(default_factory=InMemoryLedgerClient)
    clock: ManualClock = field(default_factory=ManualClock)
    bookies: tuple[str, ...] = BOOKIES

    def factory(self) -> ManagedLedgerFactory:
        return ManagedLedgerFactory(self.client, self.store, self.bookies, clock=self.clock, timers=False)


class CountingStore:
    """Wraps a store and counts the calls of each method (the in-memory store has no SQL)."""

    def __init__(self, inner: MetadataStore) -> None:
        self.inner = inner
        self.calls: dict[str, int] = {}

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self.inner, name)
        if not callable(attr):
            return attr

        def counted(*args: Any, **kwargs: Any) -> Any:
            self.calls[name] = self.calls.get(name, 0) + 1
            return attr(*args, **kwargs)

        return counted

    def total(self) -> int:
        return sum(self.calls.values())


def ledgers_of(ml: Any) -> list[dict[str, int]]:
    """internal_stats()["ledgers"], typed for the tests."""
    ledgers: list[dict[str, int]] = ml.internal_stats()["ledgers"]
    return ledgers
