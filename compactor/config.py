"""The compactor's small frozen config, built from Settings by app/processes/compactor.py."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

KeylessPolicy = Literal["drop", "keep"]
ALL_TOMBSTONES = -(1 << 62)  # "published after" this keeps every tombstone (publish times are >= 0)
# The publish time a fold gives a delta's tombstone: older than any rules keep, so it takes its key
# and goes (a delta's tombstones were never served). The reference and the Spark tasks both use it.
HIDDEN_TOMBSTONE = -(1 << 63)


@dataclass(frozen=True, slots=True)
class CompactionRules:
    """What one run keeps besides the newest value of each key (the topic's compactionPolicy
    as the service resolves it, topics.policies): key-less messages by `keyless_policy`, and a
    tombstone (a keyed message with an empty value) whose key it deletes stays in the view
    while it is younger than `delete_retention_ms` at `now_ms` (Kafka's delete.retention.ms;
    0: never, Pulsar's rule). The runner sets `now_ms` when the run starts, so every engine
    and every task of one run draws the same line."""

    keyless_policy: KeylessPolicy = "drop"
    delete_retention_ms: int = 0
    now_ms: int = 0
    # a delta run: every tombstone is written (it hides its key in the older layers; readers of
    # the layered view do not serve it)
    keep_all_tombstones: bool = False

    @property
    def tombstones_after_ms(self) -> int | None:
        """Tombstones published after this time stay in the view; None: none stays."""
        if self.keep_all_tombstones:
            return ALL_TOMBSTONES
        if self.delete_retention_ms <= 0:
            return None
        return self.now_ms - self.delete_retention_ms

    def keeps_tombstone(self, publish_time_ms: int) -> bool:
        after = self.tombstones_after_ms
        return after is not None and publish_time_ms > after

    @property
    def tag(self) -> str:
        """What a layered view records as the rules its layers were written under."""
        return f"keyless={self.keyless_policy};deleteRetentionMs={self.delete_retention_ms}"

    @property
    def allow_delta(self) -> bool:
        """A delta layer is exact only when tombstones never stay in the view: with retention
        they age out, which needs a rewrite of the layers that hold them (a fold)."""
        return self.delete_retention_ms <= 0


@dataclass(frozen=True, slots=True)
class CompactorConfig:
    """Everything a compaction run needs besides the store and the ledger client.

    New compacted ledgers take `ensemble_size` bookies from the bookie registry when the process
    has one, else from `bookies` (host:port each); Spark tasks reach the bookies named in each
    ledger's own metadata. `entry_max_messages` and
    `entry_max_bytes` bound one compacted entry (the bookie's frame limit is far above both).
    """

    bookies: tuple[str, ...] = ("127.0.0.1:3181",)
    ensemble_size: int = 1
    write_quorum: int = 1
    ack_quorum: int = 1
    keyless_policy: KeylessPolicy = "drop"  # the settings' default of compactionPolicy.keylessPolicy
    delete_retention_ms: int = 0  # ... and of compactionPolicy.deleteRetentionMs
    entry_max_messages: int = 1_000
    entry_max_bytes: int = 1024 * 1024
    read_chunk_bytes: int = 4 * 1024 * 1024  # one read request of a Spark task asks for about this much
    read_requests_in_flight: int = 4
    spark_master: str = "local[*]"
    spark_conf: tuple[tuple[str, str], ...] = field(default_factory=tuple)
    spark_tasks_per_core: int = 2
    # an input (estimated bytes) at most this big runs as one task: read, keep newest per key,
    # sort and pack in one Spark stage. It saves the shuffle stage's fixed cost (0.4-1 s), which
    # dominates an incremental run; 0 always runs the distributed (read, shuffle, pack) job
    single_task_max_bytes: int = 32 * 1024 * 1024
    # incremental runs (docs/semantics.md, Compaction): a run writes a delta layer of the new
    # messages alone while the deltas, this one included, stay under this share of the base's
    # bytes and number fewer than `max_deltas`; otherwise it folds everything into a new base.
    # 0: every run folds (the whole view rewritten each time)
    delta_max_ratio: float = 0.25
    max_deltas: int = 8
    poll_interval_ms: int = 1_000
    # A run holds its topic's compaction state under a lease of this length, renewed every
    # quarter of it; a run whose lease lapses is ERROR for everyone and cannot record its result.
    lease_ms: int = 30_000
    # This compactor's name as a lease holder; empty: host, pid and a random suffix.
    instance_id: str = ""
    threshold_bytes: int = 0  # the default compaction threshold (0 = off); topics may override
    # test-only hook, off by default: a run pauses this long after its entries are written and
    # before it closes its ledger, so tests can watch RUNNING, get a 409, or kill -9 mid-run
    test_run_delay_ms: int = 0
    # ... only for managed ledgers whose name contains this (empty: every run)
    test_run_delay_match: str = ""

    def rules(self) -> CompactionRules:
        """The rules of a run of a topic without a compactionPolicy of its own or its namespace's."""
        return CompactionRules(self.keyless_policy, self.delete_retention_ms)
