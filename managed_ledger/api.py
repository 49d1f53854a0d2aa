"""The managed ledger's public surface, as the topics layer and the compactor use it.

Implemented by `managed_ledger.factory.ManagedLedgerFactory`, `managed_ledger.ledger.ManagedLedger`
and `managed_ledger.cursor.ManagedCursor` (Pulsar's ManagedLedgerImpl / ManagedCursorImpl rules,
docs/semantics.md). Payloads are opaque bytes here except where a rule needs a field of the entry
format (`managed_ledger.entry_format`): dedup reads producer and sequence ids, reset-by-time
reads publish time.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

from bookie.ledgers import EnsemblePlacement
from managed_ledger.offsets import OffsetIndex
from managed_ledger.position import MessageId, Position
from managed_ledger.ranges import LedgerList

GIB = 1024**3


@dataclass(frozen=True, slots=True)
class RolloverPolicy:
    """Pulsar's rollover rule and defaults: a ledger is full at max entries, max size or max age;
    it rolls only once older than the minimum (0 = no minimum)."""

    max_entries: int = 50_000
    max_size_bytes: int = 2 * GIB
    max_rollover_time_ms: int = 240 * 60_000
    min_rollover_time_ms: int = 10 * 60_000


@dataclass(frozen=True, slots=True)
class RetentionPolicy:
    """-1 = unlimited; 0 = delete as soon as every durable cursor has consumed (Pulsar's default)."""

    time_minutes: int = 0
    size_mb: int = 0


@dataclass(frozen=True, slots=True)
class ManagedLedgerConfig:
    rollover: RolloverPolicy = field(default_factory=RolloverPolicy)
    retention: RetentionPolicy = field(default_factory=RetentionPolicy)
    dedup_enabled: bool = False
    # Compaction is on for the topic: retention keeps every ledger not wholly at or before the
    # compaction horizon (`ManagedLedger.compacted_through`), as Pulsar's `__compaction` cursor.
    retain_uncompacted: bool = False
    ensemble_size: int = 1
    write_quorum: int = 1
    ack_quorum: int = 1
    cursor_flush_interval_ms: int = 1_000
    dedup_snapshot_interval_entries: int = 1_000
    dedup_snapshot_interval_ms: int = 10_000


InitialPosition = Literal["earliest", "latest"]


class Cursor(Protocol):
    """A durable subscription's position: mark-delete plus individually acked ranges beyond it."""

    @property
    def name(self) -> str: ...

    @property
    def mark_delete_position(self) -> Position:
        """Every entry at or before it is acked. Before any entry: (first_ledger_id, -1)."""
        ...

    @property
    def read_position(self) -> Position:
        """The next entry `read_entries` returns (acked entries are skipped)."""
        ...

    @property
    def properties(self) -> dict[str, object]:
        """Free-form durable settings of the subscription (type, ack timeout, ...)."""
        ...

    async def read_entries(self, max_entries: int) -> list[tuple[Position, bytes]]:
        """Entries from the read position on, skipping acked ones; advances the read position."""
        ...

    def ack(self, positions: Iterable[Position]) -> None:
        """Individual acks; the mark-delete position moves over every contiguous acked entry.
        Persisted by the next flush (interval or close), not one SQL write per ack."""
        ...

    def ack_cumulative(self, position: Position) -> None: ...

    def is_acked(self, position: Position) -> bool: ...

    def rewind(self, position: Position | None = None) -> None:
        """Move the read position back (default: to the first entry after mark-delete)."""
        ...

    async def reset(self, position: Position) -> None:
        """Seek: mark-delete just before `position`, acks beyond dropped, read from there."""
        ...

    async def reset_to_time(self, timestamp_ms: int) -> None:
        """Seek to the first entry whose publish time >= timestamp_ms (the end if none)."""
        ...

    @property
    def backlog(self) -> int:
        """Entries after mark-delete not individually acked (exact)."""
        ...

    def individually_deleted_ranges(self) -> list[tuple[Position, Position]]: ...

    async def flush(self) -> None: ...

    async def set_properties(self, properties: dict[str, object]) -> None: ...

    @property
    def delivery_state(self) -> Mapping[str, Any] | None:
        """The owner's opaque delivery state as last stored (read back at open)."""
        ...

    def track_delivery_state(self, source: Callable[[], Mapping[str, Any] | None] | None) -> None:
        """Register the owner's state: asked for once per flush after a change was reported."""
        ...

    def delivery_state_changed(self) -> None:
        """The owner's state changed: the cursor is dirty and the next flush stores it."""
        ...


class ManagedLedger(Protocol):
    compacted_through: Position | None
    """The compaction horizon's entry as the topic's owner last learnt it (None: no run yet, or
    not known yet). With `config.retain_uncompacted`, retention keeps every ledger after it."""

    @property
    def name(self) -> str: ...

    @property
    def config(self) -> ManagedLedgerConfig: ...

    def update_config(self, config: ManagedLedgerConfig) -> None:
        """Policies changed (rollover, retention, dedup): applied from now on."""
        ...

    async def append(
        self,
        payload: bytes,
        *,
        producer_name: str | None = None,
        highest_sequence_id: int | None = None,
    ) -> Position:
        """Durably append one entry; returns its position. Many may be in flight; positions are
        assigned in call order. With dedup on, pass the batch's producer and highest sequence
        id (after `dedup_check`), so the persisted state advances once the entry is durable."""
        ...

    async def append_entry(
        self, payload: bytes, producer_name: str | None = None, highest_sequence_id: int | None = None
    ) -> tuple[Position, int]:
        """`append`, also returning the Kafka offset the entry's first message got."""
        ...

    # --- Kafka offsets (managed_ledger.offsets): continuous per managed ledger -------------------
    @property
    def high_watermark(self) -> int:
        """The offset after the last durable message."""
        ...

    @property
    def offsets(self) -> OffsetIndex: ...

    async def log_start_offset(self) -> int:
        """The first readable offset (the high watermark when nothing is readable)."""
        ...

    async def find_offset(self, offset: int) -> Position | None:
        """The readable entry holding `offset`; None when none does."""
        ...

    def dedup_check(self, producer_name: str, sequence_ids: Sequence[int | None]) -> list[bool]:
        """Pulsar's dedup rule per message: True = duplicate (sequence id <= the highest one
        persisted for this producer, or an earlier id of the same batch). Marks the
        non-duplicates as pushed. Raises managed_ledger.errors.SequenceInFlightError, marking
        nothing, when an id is above the persisted one but not above the pushed one (its write
        is in flight or failed unresolved). With dedup off, or for a None id, False."""
        ...

    def dedup_highest(self, producer_name: str) -> int | None:
        """The highest sequence id persisted for the producer; None when there is none (or
        dedup is off)."""
        ...

    async def read_entries(self, start: Position, max_entries: int) -> list[tuple[Position, bytes]]:
        """Up to max_entries entries at positions >= start (positions in trimmed ledgers are
        skipped), in order, up to the last confirmed entry. Empty at the end."""
        ...

    async def read_entry(self, position: Position) -> bytes:
        """Raises managed_ledger.errors.EntryNotFoundError (trimmed, or never written)."""
        ...

    @property
    def last_confirmed_position(self) -> Position | None:
        """The newest durable entry, None when the managed ledger holds no entry."""
        ...

    @property
    def first_position(self) -> Position | None:
        """The oldest entry still stored, None when none."""
        ...

    def next_position(self, position: Position) -> Position:
        """The position right after `position` (where an 'after:' read starts)."""
        ...

    def position_at(self, index: int) -> Position | None:
        """The stored entry with ordinal `index` (0 = the oldest; -1 = the newest); None when there
        is no such entry."""
        ...

    async def find_position_by_publish_time(self, timestamp_ms: int) -> Position | None:
        """The first entry whose publish time >= timestamp_ms (None if none)."""
        ...

    def count_entries(self, after: Position, up_to: Position) -> int:
        """Number of stored entries in (after, up_to]."""
        ...

    def size_after(self, position: Position) -> int:
        """Estimated bytes stored after `position` (a backlog's size; see LedgerList.size_after)."""
        ...

    def position_keeping(self, max_bytes: int) -> Position | None:
        """The earliest position with at most `max_bytes` after it; None when all of it fits."""
        ...

    async def open_cursor(self, name: str, initial_position: InitialPosition = "latest") -> Cursor:
        """Open (creating if absent) a durable cursor."""
        ...

    @property
    def cursors(self) -> Mapping[str, Cursor]: ...

    async def delete_cursor(self, name: str) -> None: ...

    async def rollover(self) -> None:
        """Close the current ledger now (unload); the next append opens a new one."""
        ...

    async def trim(self) -> None:
        """Apply retention now (it also runs on a timer)."""
        ...

    @property
    def is_terminated(self) -> bool:
        """Terminated: every append raises ManagedLedgerTerminatedError, for good."""
        ...

    @property
    def terminated_at(self) -> MessageId | None:
        """The last message id stored by terminate (None: not terminated, or it was empty)."""
        ...

    @property
    def log_start(self) -> MessageId | None:
        """The first readable message id set by truncate_before (None: never set). Reads,
        `first_position` and new cursors at earliest skip the entries before its entry."""
        ...

    async def terminate(self) -> MessageId | None:
        """Pulsar's terminate: no append from now on (durably); returns the last message id,
        None when it held no entry. Idempotent: the same id again."""
        ...

    async def truncate(self) -> None:
        """Roll over, move every cursor past the closed ledgers, delete them all."""
        ...

    async def truncate_before(self, start: MessageId) -> bool:
        """Move the log start forward to `start` (False: it was there or past it already)."""
        ...

    def internal_stats(self) -> dict[str, object]:
        """Pulsar's internalStats shape (docs/rest-api.md), minus compaction fields."""
        ...

    @property
    def ledger_list(self) -> LedgerList:
        """The ledgers it holds, oldest first (read it; the managed ledger changes it)."""
        ...

    @property
    def entries_added_counter(self) -> int: ...

    @property
    def total_size_bytes(self) -> int: ...

    @property
    def is_fenced(self) -> bool:
        """Another owner took it over, or its broker's ownership lease lapsed: it writes nothing."""
        ...

    async def close(self) -> None: ...


class ManagedLedgerFactory(Protocol):
    lease: Callable[[], bool] | None
    """The broker's ownership lease, checked before every write (see managed_ledger.fencing)."""
    placement: EnsemblePlacement
    """Where new ledgers go (the bookie registry in a broker); readiness probes its bookies."""

    async def open(self, name: str, config: ManagedLedgerConfig) -> ManagedLedger:
        """Open (creating if absent) a managed ledger; recovers its last ledger on first open."""
        ...

    async def delete(self, name: str) -> None:
        """Delete the managed ledger: metadata first, then its ledgers on the bookies."""
        ...

    async def close(self) -> None: ...
