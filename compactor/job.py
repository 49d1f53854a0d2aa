"""The compaction job on PySpark: `SparkEngine.compute(plan, rules, sink)`.

The driver turns the plan into a small list of ledger ranges (a few per core) and parallelizes
it; Spark tasks read those ranges straight from the bookies and decode them to Arrow
(`compactor.tasks.read_partition`, via `mapInArrow`), keeping each task's newest message per key.
Spark then finishes the latest-per-key aggregation across tasks (`max_by` over the message id),
sorts the survivors by id (range partitioning, so partitions come back in id order), packs them
into compacted entries on the executors (`pack_partition`) and streams the entries back with
`toLocalIterator`: the driver holds one partition of packed entries at a time, never a
structure that grows with the number of keys, and hands each entry to the ledger writer.

A small input (at most `CompactorConfig.single_task_max_bytes`, estimated from ledger sizes:
typically a delta run, which reads the messages after the horizon and no compacted ledger at
all) runs as ONE task instead (`compact_partition`): the same rules in one Spark stage with no
shuffle. Each Spark stage costs 0.4-1 s however little it reads.

A fold's plan lists the view's layers (base, then deltas) before the new messages; a task reads
them in that order (`compactor.tasks`), and across tasks `max_by` over the id decides, so the
newest row per key wins either way. The driver only parallelizes range descriptions and
streams packed entries back: nothing on it grows with the number of keys.
"""

from __future__ import annotations

import asyncio
import json
import math
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from bookie.api import LedgerClient
from bookie.connection import BookieClientConfig
from compactor.config import CompactionRules, CompactorConfig
from compactor.errors import SparkJobError
from compactor.plan import CompactionPlan, ReadRange, split_ranges
from compactor.reference import EntrySink
from compactor.spark import get_session
from compactor.tasks import (
    PACK_DDL,
    READ_DDL,
    ClientFactory,
    TaskPlan,
    compact_partition,
    pack_partition,
    read_partition,
)

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

# input bytes per sorted partition: the driver holds at most one partition of packed survivors
# (plus the next one, prefetched), and survivors are never more than the input. A fold's input is
# mostly survivors already (the view's layers), so its partitions come back about as big as they
# went in: at 128 MB, a fold of a 1,000,000-key view lost its prefetched results from the local
# block manager (TaskResultLost); 32 MB keeps what the driver holds small
SORT_PARTITION_BYTES = 32 * 1024 * 1024


@dataclass(frozen=True, slots=True)
class BookieClientFactory:
    """Builds the TCP ledger client inside a Spark task with the driver's client config (its
    secret and TLS file paths too: on a cluster, executors need those files at the same paths).
    A plain value of a module-level class, so it pickles into the task."""

    config: BookieClientConfig = field(default_factory=BookieClientConfig)

    def __call__(self) -> LedgerClient:
        from bookie.client import BookieLedgerClient

        return BookieLedgerClient(self.config)


def _as_tuple(m: Any) -> tuple[int, int, int] | None:
    return None if m is None else (int(m[0]), int(m[1]), int(m[2]))


class SparkEngine:
    name = "spark"

    def __init__(
        self,
        config: CompactorConfig,
        client_factory: ClientFactory | None = None,
        session: SparkSession | None = None,
    ) -> None:
        self.config = config
        self.client_factory = client_factory or BookieClientFactory()
        self._session = session

    def session(self) -> SparkSession:
        if self._session is None:
            self._session = get_session(self.config)
        return self._session

    def warm_up(self) -> None:
        """Start the session (and the Python workers) before the first run needs them."""
        self.session().range(1).count()

    def _range_rows(self, pieces: list[ReadRange]) -> list[dict[str, Any]]:
        return [
            {
                "ledger_id": r.ledger_id,
                "ensemble": ",".join(r.ensemble),
                "ensembles": json.dumps([[first, list(bookies)] for first, bookies in r.spec.ensembles]),
                "write_quorum": r.write_quorum,
                "ack_quorum": r.ack_quorum,
                "first_entry_id": r.first_entry_id,
                "last_entry_id": r.last_entry_id,
                "compacted": r.compacted,
                "layer": r.layer,
                "entries_per_read": max(1, self.config.read_chunk_bytes // max(1, r.entry_bytes_hint)),
            }
            for r in pieces
        ]

    def build(self, plan: CompactionPlan, rules: CompactionRules) -> DataFrame:
        """The job's DataFrame of packed compacted entries (PACK_SCHEMA), in id order."""
        from pyspark.sql import functions as F

        spark = self.session()
        tasks = max(1, spark.sparkContext.defaultParallelism * self.config.spark_tasks_per_core)
        pieces = split_ranges(plan.ranges, tasks) or list(plan.ranges)
        task_plan = TaskPlan(
            _as_tuple(plan.old_horizon),
            _as_tuple(plan.new_horizon),
            rules.keyless_policy == "keep",
            self.client_factory,
            rules.tombstones_after_ms,
        )
        input_bytes = sum(r.entries * r.entry_bytes_hint for r in plan.ranges)
        if input_bytes <= self.config.single_task_max_bytes:
            # small (an incremental run): one task, one stage, no shuffle
            rows = self._range_rows(list(plan.ranges))
            fn = compact_partition(
                task_plan, rows, self.config.entry_max_messages, self.config.entry_max_bytes
            )
            return spark.range(0, 1, 1, 1).mapInArrow(fn, PACK_DDL)
        # spark.range(n) in n partitions: task i reads pieces[i] (shipped in the task's closure),
        # so no Python rows have to be converted into a DataFrame first
        read_fn = read_partition(task_plan, self._range_rows(pieces))
        read = spark.range(0, len(pieces), 1, len(pieces)).mapInArrow(read_fn, READ_DDL)
        partitions = max(1, math.ceil(input_bytes / SORT_PARTITION_BYTES))
        if partitions == 1:
            # one partition already satisfies the grouping and the order: one shuffle in all
            read = read.repartition(1)
        msg_id = F.struct("ledger", "entry", "batch_index")
        newest = read.groupBy("key", "solo").agg(
            F.max_by(F.struct("ledger", "entry", "batch_index", "deleted", "payload"), msg_id).alias("m"),
            F.sum("messages").alias("messages"),
        )
        flat = newest.select("m.ledger", "m.entry", "m.batch_index", "m.deleted", "m.payload", "messages")
        if partitions > 1:  # range partitions come back to the driver one at a time, in id order
            flat = flat.repartitionByRange(partitions, "ledger", "entry", "batch_index")
        ordered = flat.sortWithinPartitions("ledger", "entry", "batch_index")
        pack = pack_partition(self.config.entry_max_messages, self.config.entry_max_bytes)
        return ordered.mapInArrow(pack, PACK_DDL)

    def _start(self, plan: CompactionPlan, rules: CompactionRules) -> Iterator[Any]:
        return self.build(plan, rules).toLocalIterator(prefetchPartitions=True)

    async def compute(self, plan: CompactionPlan, rules: CompactionRules, sink: EntrySink) -> int:
        """Feed compacted entries to sink in id order; returns the number of messages read."""
        if not plan.ranges:
            return 0
        rows: Iterator[Any] | None = None
        messages_in = 0
        try:
            rows = await asyncio.to_thread(self._start, plan, rules)
            while (row := await asyncio.to_thread(next, rows, None)) is not None:
                messages_in += row["messages_in"]
                if row["payload"] is not None:
                    await sink(bytes(row["payload"]), row["count"])
        except asyncio.CancelledError:
            if self._session is not None:  # stop the job's tasks, not just our wait for them
                self._session.sparkContext.cancelAllJobs()
            raise
        except SparkJobError:
            raise
        except Exception as exc:
            if type(exc).__module__.startswith(("pyspark", "py4j")):
                raise SparkJobError(f"spark job failed: {_short(exc)}") from exc
            raise
        finally:
            close = getattr(rows, "close", None)
            if close is not None:
                close()
        return messages_in


def _short(exc: BaseException) -> str:
    """The first useful line of a (very long) Spark/Python worker error."""
    text = str(exc).strip()
    for line in reversed(text.splitlines()):
        line = line.strip()
        if (
            line
            and not line.startswith(("at ", "File ", "^", "~"))
            and ("Error" in line or "Exception" in line)
        ):
            return line[:500]
    return text.splitlines()[0][:500] if text else type(exc).__name__
