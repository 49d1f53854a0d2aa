"""When the broker asks for a compaction run on its own: the rules of the periodic check
(`Maintenance.check_compaction_thresholds` gathers the figures and requests the run).

Three triggers, each on its own, each off at 0, all measured on one managed ledger (a partition)
from what lies after its compaction horizon, the topic's *dirty* part:

- `compactionThreshold` (Pulsar's): its bytes pass the threshold;
- `maxLagMs` (RocketMQ's time dimension): its oldest message was published more than this long
  ago, so no message waits longer than about this plus one check interval to be compacted;
- `minCleanableDirtyRatio` (Kafka's min.cleanable.dirty.ratio): its bytes pass this share of
  the compacted view plus them. As in Kafka, where the log's clean part is the compacted output,
  the clean part here is the compacted ledger, not the topic's ledgers before the horizon (those
  are the history retention keeps, whose size says nothing about what a run would save). Before
  any run the share is 1, so any ratio below 1 asks for the first run; 1 never fires.

Nothing after the horizon: no trigger fires. The figures are cheap: sizes are kept per ledger,
and the publish time of the first entry after the horizon is read once and kept until the
horizon moves.
"""

from __future__ import annotations

from typing import Any

from managed_ledger.metadata.api import CompactionState
from managed_ledger.position import Position
from topics.api import TopicPolicies
from topics.stats import number_of_entries


def horizon_position(state: CompactionState) -> Position | None:
    """The entry of the compaction horizon (None: no run has succeeded yet)."""
    if state.horizon is None:
        return None
    return Position(state.horizon[0], state.horizon[1])


def bytes_since_horizon(ml: Any, state: CompactionState) -> int:
    """Bytes stored after the horizon, estimated at the average entry size (Pulsar measures the
    compaction cursor's backlog the same way)."""
    total: int = ml.total_size_bytes
    last = ml.last_confirmed_position
    horizon = horizon_position(state)
    if horizon is None or last is None:
        return total
    entries = number_of_entries(ml.internal_stats())
    if entries <= 0:
        return 0
    since: int = ml.count_entries(horizon, last)
    return total * since // entries


def first_after_horizon(ml: Any, state: CompactionState) -> Position | None:
    """The first stored entry after the horizon (None: there is none)."""
    last = ml.last_confirmed_position
    if last is None:
        return None
    horizon = horizon_position(state)
    first: Position | None = ml.first_position if horizon is None else ml.next_position(horizon)
    if first is None or first > last:
        return None
    return first


def dirty_ratio(dirty_bytes: int, state: CompactionState) -> float:
    """The dirty bytes' share of the compacted view plus them (0 when there are none)."""
    if dirty_bytes <= 0:
        return 0.0
    clean = max(0, state.compacted_size_bytes + state.delta_size_bytes)
    return dirty_bytes / (clean + dirty_bytes)


def size_trigger(policies: TopicPolicies, dirty_bytes: int, state: CompactionState) -> str | None:
    """Why a run is due by size (the threshold, then the ratio), or None."""
    if dirty_bytes <= 0:
        return None
    threshold = policies.compaction_threshold_bytes
    if threshold > 0 and dirty_bytes > threshold:
        return f"{dirty_bytes} bytes after the horizon, over compactionThreshold {threshold}"
    ratio = policies.compaction.min_cleanable_dirty_ratio
    share = dirty_ratio(dirty_bytes, state)
    if ratio > 0 and share > ratio:
        return f"{share:.3f} of the compacted view is after the horizon, over minCleanableDirtyRatio {ratio}"
    return None


def lag_trigger(policies: TopicPolicies, first_publish_ms: int | None, now_ms: int) -> str | None:
    """Why a run is due by time, or None. `first_publish_ms`: the publish time of the first
    message after the horizon (None: there is none)."""
    max_lag = policies.compaction.max_lag_ms
    if max_lag <= 0 or first_publish_ms is None:
        return None
    lag = now_ms - first_publish_ms
    if lag > max_lag:
        return f"the oldest message after the horizon was published {lag} ms ago, over maxLagMs {max_lag}"
    return None
