"""The data source: `spark.read` / `readStream` / `write` / `writeStream` `.format("quire")`.

Options are checked when the source is built on the driver (`QuireOptionError`, before any job
runs); the driver then plans the read from the broker's metadata (quire_spark.plan) and each
Spark partition is one ledger range read on an executor straight from the bookies
(quire_spark.reader), or, for `readCompacted`, one topic-partition read through the broker's
compacted view.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

import pyarrow as pa
from pyspark.sql.datasource import (
    DataSource,
    DataSourceReader,
    DataSourceStreamReader,
    DataSourceStreamWriter,
    DataSourceWriter,
    InputPartition,
)
from pyspark.sql.streaming.datasource import ReadAllAvailable, ReadLimit, ReadMaxRows
from pyspark.sql.types import StructType

from quire_spark import plan
from quire_spark.errors import QuireOptionError
from quire_spark.limit import cap
from quire_spark.offsets import EARLIEST, Id, from_json, to_json
from quire_spark.options import ReadOptions, read_options, write_options
from quire_spark.reader import ROW_DDL, CompactedRead, read_compacted, read_range
from quire_spark.service import Service


class QuirePartition(InputPartition):  # type: ignore[misc]
    """A LedgerRange (read from the bookies) or a CompactedRead (through the view)."""


def _partitions(
    options: ReadOptions,
    tps: list[plan.TopicPartition],
    states: dict[str, plan.LedgerState],
    start: dict[str, Id],
    end: dict[str, Id],
) -> list[QuirePartition]:
    if options.read_compacted and any(tp.partition >= 0 for tp in tps):
        named = sorted({tp.topic for tp in tps if tp.partition >= 0})
        raise QuireOptionError(f"readCompacted: partitioned topics {named} are not supported yet")
    out: list[QuirePartition] = []
    for tp in tps:
        state = states[tp.ml_name]
        first = plan.lost(tp, state, start.get(tp.ml_name, EARLIEST), options.fail_on_data_loss)
        last = end[tp.ml_name]
        if first >= last:
            continue
        if options.read_compacted:
            out.append(QuirePartition(CompactedRead(tp, first, last, state.horizon)))
            continue
        for r in plan.ranges(tp, state, first, last, options.max_entries_per_partition):
            out.append(QuirePartition(r))
    return out


def _read(options: ReadOptions, partition: InputPartition) -> Iterator[pa.RecordBatch]:
    value = partition.value
    if isinstance(value, CompactedRead):
        yield from read_compacted(value, options.service_url, options.token)
    else:
        yield from read_range(value, options.bookie_secret, options.fail_on_data_loss)


class QuireBatchReader(DataSourceReader):  # type: ignore[misc]
    def __init__(self, options: ReadOptions) -> None:
        self.options = options
        with Service(options.service_url, options.token) as service:
            tps = plan.resolve(service, options)
            states = plan.states(service, tps)
            if options.starting_time_ms is not None:
                start = plan.at_time(tps, states, options.starting_time_ms, options.bookie_secret)
            else:
                start = plan.offsets(service, options.starting, tps, states, "startingOffsets")
            end = plan.offsets(service, options.ending, tps, states, "endingOffsets")
        self._partitions = _partitions(options, tps, states, start, end)

    def partitions(self) -> Sequence[InputPartition]:
        return self._partitions

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        yield from _read(self.options, partition)


class QuireStreamReader(DataSourceStreamReader):  # type: ignore[misc]
    """Offsets: {topic-partition: id of the next message}. A topic-partition that appears later
    (partitions added, a new topic matching the pattern) is read from its earliest message."""

    def __init__(self, options: ReadOptions) -> None:
        self.options = options
        self._latest: dict[str, str] | None = None

    def _look(self) -> tuple[list[plan.TopicPartition], dict[str, plan.LedgerState]]:
        with Service(self.options.service_url, self.options.token) as service:
            tps = plan.resolve(service, self.options)
            return tps, plan.states(service, tps)

    def initialOffset(self) -> dict[str, str]:
        tps, states = self._look()
        with Service(self.options.service_url, self.options.token) as service:
            if self.options.starting_time_ms is not None:
                start = plan.at_time(tps, states, self.options.starting_time_ms, self.options.bookie_secret)
            else:
                start = plan.offsets(service, self.options.starting, tps, states, "startingOffsets")
        return to_json(start)

    def getDefaultReadLimit(self) -> ReadLimit:
        n = self.options.max_messages_per_trigger
        return ReadAllAvailable() if n is None else ReadMaxRows(n)

    def latestOffset(self, start: dict[str, str], limit: ReadLimit) -> dict[str, str]:
        tps, states = self._look()
        begin = from_json(start)
        end = {tp.ml_name: max(states[tp.ml_name].latest(), begin.get(tp.ml_name, EARLIEST)) for tp in tps}
        self._latest = to_json(end)
        if isinstance(limit, ReadMaxRows):
            budget = limit.max_rows
            for tp in tps:  # the budget goes to the partitions in name order
                first = plan.lost(tp, states[tp.ml_name], begin.get(tp.ml_name, EARLIEST), False)
                todo = list(plan.ranges(tp, states[tp.ml_name], first, end[tp.ml_name], 1 << 30))
                if budget <= 0:
                    end[tp.ml_name] = max(first, begin.get(tp.ml_name, EARLIEST))
                    continue
                stop, taken = cap(todo, budget, self.options.bookie_secret)
                budget -= taken
                if stop is not None:
                    end[tp.ml_name] = stop
        # a partition named in start but gone from the topic list keeps its offset
        return to_json({**begin, **end})

    def reportLatestOffset(self) -> dict[str, str] | None:
        return self._latest

    def partitions(self, start: dict[str, str], end: dict[str, str]) -> Sequence[InputPartition]:
        tps, states = self._look()
        tps = [tp for tp in tps if tp.ml_name in end]
        return _partitions(self.options, tps, states, from_json(start), from_json(end))

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        yield from _read(self.options, partition)

    def commit(self, end: dict[str, str]) -> None:
        """Nothing to release: the broker keeps no state for this reader (no subscription)."""


class QuireDataSource(DataSource):  # type: ignore[misc]
    """Register with `spark.dataSource.register(QuireDataSource)`; then format "quire"."""

    @classmethod
    def name(cls) -> str:
        return "quire"

    def schema(self) -> str:
        # called as the DataFrame is defined (load()): options are checked now; what needs the
        # broker (topics exist) when the read is planned, still before any job
        read_options(self.options, streaming=None)
        return ROW_DDL

    def reader(self, schema: StructType) -> DataSourceReader:
        return QuireBatchReader(read_options(self.options, streaming=False))

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        options = read_options(self.options, streaming=True)
        reader = QuireStreamReader(options)
        reader._look()  # a topic that does not exist, or a broker not there, fails now
        return reader

    def writer(self, schema: StructType, overwrite: bool) -> DataSourceWriter:
        from quire_spark.sink import QuireBatchWriter

        return QuireBatchWriter(write_options(self.options), schema)

    def streamWriter(self, schema: StructType, overwrite: bool) -> DataSourceStreamWriter:
        from quire_spark.sink import QuireStreamWriter

        return QuireStreamWriter(write_options(self.options), schema, dict(self.options))
