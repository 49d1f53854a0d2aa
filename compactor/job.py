"""The compaction job on PySpark: `SparkEngine.compute(plan, keyless_policy, sink)`.

The driver turns the plan into a small list of ledger ranges (a few per core) and parallelizes
it; Spark tasks read those ranges straight from the bookies and decode them to Arrow
(`compactor.tasks.read_partition`, via `mapInArrow`), keeping each task's newest message per key.
Spark then finishes the latest-per-key aggregation across tasks (`max_by` over the message id),
sorts the survivors by id (range partitioning, so partitions come back in id order), packs them
into compacted entries on the executors (`pack_partition`) and streams the entries back with
`toLocalIterator`: the driver holds one partition of packed entries at a time, never a
structure that grows with the number of keys, and hands each entry to the ledger writer.
"""

from __future__ import annotations

import asyncio
import math
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from bookie.api import LedgerClient
from compactor.config import CompactorConfig, KeylessPolicy
from compactor.errors import SparkJobError
from compactor.plan import CompactionPlan, ReadRange, split_ranges
from compactor.reference import EntrySink
from compactor.spark import get_session
from compactor.tasks import (
    PACK_DDL,
    READ_DDL,
    ClientFactory,
    TaskPlan,
    pack_partition,
    read_partition,
)

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

SORT_PARTITION_BYTES = 32 * 1024 * 1024  # input bytes per sorted partition: bounds driver memory


def bookie_client_factory() -> LedgerClient:
    """Builds the TCP ledger client inside a Spark task (module-level, so it pickles by name)."""
    from bookie.client import BookieLedgerClient

    return BookieLedgerClient()


def _as_tuple(m: Any) -> tuple[int, int, int] | None:
    return None if m is None else (int(m[0]), int(m[1]), int(m[2]))


class SparkEngine:
    name = "spark"

    def __init__(
        self,
        config: CompactorConfig,
        client_factory: ClientFactory = bookie_client_factory,
        session: SparkSession | None = None,
    ) -> None:
        self.config = config
        self.client_factory = client_factory
        self._session = session

    def session(self) -> SparkSession:
        if self._session is None:
            self._session = get_session(self.config)
        return self._session

    def warm_up(self) -> None:
        """Start the session (and the Python workers) before the first run needs them."""
        self.session().range(1).count()

    def _ranges_frame(self, spark: SparkSession, pieces: list[ReadRange]) -> DataFrame:
        rows = [
            (
                r.ledger_id,
                ",".join(r.ensemble),
                r.write_quorum,
                r.ack_quorum,
                r.first_entry_id,
                r.last_entry_id,
                r.compacted,
                max(1, self.config.read_chunk_bytes // max(1, r.entry_bytes_hint)),
            )
            for r in pieces
        ]
        schema = (
            "ledger_id long, ensemble string, write_quorum int, ack_quorum int, "
            "first_entry_id long, last_entry_id long, compacted boolean, entries_per_read long"
        )
        rdd = spark.sparkContext.parallelize(rows, len(rows))  # one task per piece
        return spark.createDataFrame(rdd, schema)

    def build(self, plan: CompactionPlan, keyless_policy: KeylessPolicy) -> DataFrame:
        """The job's DataFrame of packed compacted entries (PACK_SCHEMA), in id order."""
        from pyspark.sql import functions as F

        spark = self.session()
        tasks = max(1, spark.sparkContext.defaultParallelism * self.config.spark_tasks_per_core)
        pieces = split_ranges(plan.ranges, tasks)
        task_plan = TaskPlan(
            _as_tuple(plan.old_horizon),
            _as_tuple(plan.new_horizon),
            keyless_policy == "keep",
            self.client_factory,
        )
        read = self._ranges_frame(spark, pieces).mapInArrow(read_partition(task_plan), READ_DDL)
        msg_id = F.struct("ledger", "entry", "batch_index")
        newest = read.groupBy("key", "solo").agg(
            F.max_by(F.struct("ledger", "entry", "batch_index", "tombstone", "payload"), msg_id).alias("m"),
            F.sum("messages").alias("messages"),
        )
        flat = newest.select("m.ledger", "m.entry", "m.batch_index", "m.tombstone", "m.payload", "messages")
        input_bytes = sum(r.entries * r.entry_bytes_hint for r in plan.ranges)
        partitions = max(1, math.ceil(input_bytes / SORT_PARTITION_BYTES))
        ordered = flat.repartitionByRange(partitions, "ledger", "entry", "batch_index").sortWithinPartitions(
            "ledger", "entry", "batch_index"
        )
        pack = pack_partition(self.config.entry_max_messages, self.config.entry_max_bytes)
        return ordered.mapInArrow(pack, PACK_DDL)

    def _start(self, plan: CompactionPlan, keyless_policy: KeylessPolicy) -> Iterator[Any]:
        return self.build(plan, keyless_policy).toLocalIterator(prefetchPartitions=True)

    async def compute(self, plan: CompactionPlan, keyless_policy: KeylessPolicy, sink: EntrySink) -> int:
        """Feed compacted entries to sink in id order; returns the number of messages read."""
        if not plan.ranges:
            return 0
        rows: Iterator[Any] | None = None
        messages_in = 0
        try:
            rows = await asyncio.to_thread(self._start, plan, keyless_policy)
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
