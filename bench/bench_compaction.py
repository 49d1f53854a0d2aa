"""`make bench-compaction`: incremental topic compaction on PySpark (docs/semantics.md, Compaction).

Starts `quire bookie` on a free port in a temporary directory and writes topics of 100 B messages
in batches of 1,000 (one entry each) through the ledger client and a SQLite metadata store, then
measures in this one process (`--messages N --keys K` scale it; 5,000,000 over 1,000,000 by default):

- topic A, N messages over K keys: the Spark job cold (session start included) and warm (the
  compaction state reset so the run reads everything); then +1% writes and a run (a delta: it
  reads the new messages only), then +10% more and a run (a delta if it stays under a quarter
  of the base, else a fold); each with its time against the warm full run and what it read;
- peak RSS of the driver (this Python process, and its JVM) during the warm full run of topic A
  and of topic B, N messages over `--few-keys` keys (10,000): flat as keys grow, since the
  driver never holds a structure that grows with the keys;
- replay on topic B (keys << messages): every message of the raw topic read and decoded, against
  the compacted view read through topics.compacted.CompactedView; and the same on topic A's
  layered view (base + deltas).

Not a test: nothing here asserts; it prints one table with the bars of issue 13: a run after +1%
writes < 10% of the full run; a full run of 5,000,000 < 15 s warm; compacted replay >= 50x raw
where keys << messages; driver memory flat as keys grow.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import gc
import os
import random
import sys
import tempfile
import threading
import time
from collections.abc import Awaitable, Callable
from dataclasses import replace
from pathlib import Path

import psutil

from bench.common import bookie_client_config
from bookie.client import BookieLedgerClient
from bookie.ledgers import ledger_spec
from compactor.config import CompactorConfig
from compactor.job import BookieClientFactory, SparkEngine
from compactor.runner import CompactionRunner
from compactor.spark import stop_session
from compactor.writer import delete_ledger
from devtools.cluster import LocalCluster
from managed_ledger.entry_format import decode_batch, encode_batch_raw
from managed_ledger.metadata.api import CompactionState
from managed_ledger.metadata.sql import SqlMetadataStore
from managed_ledger.position import MessageId
from tests.compactor.topic_writer import TopicWriter
from topics.compacted import CompactedView

VALUE_BYTES = 100
BATCH = 1_000
ML = "public/default/bench-compaction"  # topic A: many keys
FEW = "public/default/bench-compaction-few"  # topic B: few keys


class PeakMemory:
    """Samples RSS of this process, its JVM and Spark's Python workers in a thread."""

    def __init__(self) -> None:
        self.driver_py = self.jvm = self.workers = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> PeakMemory:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()

    def _run(self) -> None:
        me = psutil.Process()
        while not self._stop.wait(0.05):
            with contextlib.suppress(psutil.Error):
                self.driver_py = max(self.driver_py, me.memory_info().rss)
                jvm = workers = 0
                for child in me.children(recursive=True):
                    with contextlib.suppress(psutil.Error):
                        rss = child.memory_info().rss
                        if "java" in child.name():
                            jvm += rss
                        elif "python" in child.name():
                            workers += rss
                self.jvm, self.workers = max(self.jvm, jvm), max(self.workers, workers)


async def write_topic(topic: TopicWriter, messages: int, keys: int, seed: int) -> None:
    rnd = random.Random(seed)
    value = b"x" * VALUE_BYTES
    done = 0
    payloads: list[bytes] = []
    while done < messages:
        n = min(BATCH, messages - done)
        rows: list[list[object]] = [[f"key-{rnd.randrange(keys)}", value, None, None, None] for _ in range(n)]
        payloads.append(encode_batch_raw(1, "bench", rows))
        done += n
        if len(payloads) >= 64:
            await topic.append_payloads(payloads)
            payloads = []
    await topic.append_payloads(payloads)


async def reset_compaction(store: SqlMetadataStore, client: BookieLedgerClient, ml: str = ML) -> None:
    """Forget the compacted view (every layer) so the next run reads the whole topic again."""
    state = store.get_compaction(ml)
    store.put_compaction(
        replace(state, compacted_ledger_id=None, horizon=None, delta_ledger_ids=(), delta_size_bytes=0)
    )
    for ledger_id in state.layer_ledger_ids:
        await delete_ledger(store, client, ledger_id)


async def timed_run(runner: CompactionRunner, ml: str = ML) -> tuple[float, CompactionState]:
    start = time.perf_counter()
    state = await runner.run(ml)
    return time.perf_counter() - start, state


async def raw_replay(store: SqlMetadataStore, client: BookieLedgerClient, ml_name: str) -> tuple[float, int]:
    start = time.perf_counter()
    count = 0
    ml = store.get_managed_ledger(ml_name)
    assert ml is not None
    for ledger_id in ml.ledger_ids:
        meta = store.get_ledger(ledger_id)
        last = (
            meta.last_entry_id
            if meta.last_entry_id >= 0
            else await client.read_last_add_confirmed(ledger_spec(meta))
        )
        for first in range(0, last + 1, 256):
            payloads = await client.read_entries(ledger_spec(meta), first, min(first + 255, last))
            for entry_id, p in enumerate(payloads, start=first):
                count += len(decode_batch(ledger_id, entry_id, p))
    return time.perf_counter() - start, count


async def compacted_replay(view: CompactedView, ml: str) -> tuple[float, int]:
    start = time.perf_counter()
    count = 0
    position = MessageId(0, 0, 0)
    while page := await view.read(ml, position, 1_000):
        count += len(page)
        last = page[-1].message_id
        position = MessageId(last.ledger_id, last.entry_id, last.batch_index + 1)
    return time.perf_counter() - start, count


async def median_of(times: int, replay: Callable[[], Awaitable[tuple[float, int]]]) -> tuple[float, int]:
    """The median of a few replays, each after a full GC (the reference run left many objects)."""
    results = []
    for _ in range(times):
        gc.collect()
        results.append(await replay())
    results.sort()
    return results[len(results) // 2]


def mb(n: int) -> str:
    return f"{n / 1024**2:,.0f} MB"


class Bench:
    def __init__(
        self, args: argparse.Namespace, store: SqlMetadataStore, client: BookieLedgerClient, bookie: str
    ):
        self.args, self.store, self.client, self.bookie = args, store, client, bookie
        self.rows: list[tuple[str, str]] = []
        config = CompactorConfig(bookies=(bookie,))
        self.spark = CompactionRunner(
            store, client, config, SparkEngine(config, BookieClientFactory(client.config))
        )

    async def topic(self, ml: str, messages: int, keys: int, seed: int) -> TopicWriter:
        topic = TopicWriter(self.store, self.client, ml, (self.bookie,))
        t = time.perf_counter()
        await write_topic(topic, messages, keys, seed)
        await topic.close_ledger()
        print(f"{ml}: wrote {messages:,} messages in {time.perf_counter() - t:.1f} s", file=sys.stderr)
        return topic

    async def full_run(self, ml: str, keys: int) -> tuple[float, CompactionState]:
        """A warm full run (the view reset first) with the driver's peak RSS over its start."""
        await reset_compaction(self.store, self.client, ml)
        gc.collect()
        base = psutil.Process().memory_info().rss
        with PeakMemory() as peak:
            took, state = await timed_run(self.spark, ml)
        self.rows.append(
            (
                f"driver RSS, full run over {keys:,} keys",
                f"python peak {mb(peak.driver_py)} (+{mb(peak.driver_py - base)} over its start), "
                f"JVM peak {mb(peak.jvm)}, executors {mb(peak.workers)}",
            )
        )
        return took, state

    async def more_writes(self, topic: TopicWriter, share: float, full: float, seed: int) -> None:
        await topic.roll()
        await write_topic(topic, int(self.args.messages * share), self.args.keys, seed)
        await topic.close_ledger()
        before = self.store.get_compaction(ML)
        took, state = await timed_run(self.spark)
        kind = "delta" if len(state.delta_ledger_ids) > len(before.delta_ledger_ids) else "fold"
        self.rows.append(
            (
                f"run after +{share:.0%} writes ({kind})",
                f"{took:6.2f} s  ({took / full:.3f} of the full run), {state.messages_in:,} msgs read, "
                f"{state.messages_out:,} written",
            )
        )

    async def replay(self, ml: str, label: str) -> None:
        view = CompactedView(self.store, self.client)
        # medians of 3 (each after a full GC)
        raw_s, raw_n = await median_of(3, lambda: raw_replay(self.store, self.client, ml))
        comp_s, comp_n = await median_of(3, lambda: compacted_replay(view, ml))
        self.rows += [
            (f"raw replay, {label}", f"{raw_s:6.2f} s  {raw_n:,} messages"),
            (
                f"compacted replay, {label}",
                f"{comp_s:6.3f} s  {comp_n:,} messages  {raw_s / comp_s:.0f}x faster",
            ),
        ]


async def run(args: argparse.Namespace) -> list[tuple[str, str]]:
    root = Path(tempfile.mkdtemp(prefix="quire-bench-compaction-"))
    cluster = LocalCluster(root / "cluster")  # the bookie registers in a store of its own
    store = SqlMetadataStore(f"sqlite:///{root / 'metadata.db'}")
    client = BookieLedgerClient(bookie_client_config())
    try:
        bookie = cluster.bookie()
        bench = Bench(args, store, client, bookie.address)
        await bench.topic(FEW, args.messages, args.few_keys, seed=3)
        cold, _ = await timed_run(bench.spark, FEW)
        bench.rows.append(("spark, cold (session start included)", f"{cold:6.1f} s  topic B"))
        few_s, few = await bench.full_run(FEW, args.few_keys)
        bench.rows.append(
            (f"full run, {args.few_keys:,} keys (topic B)", f"{few_s:6.1f} s  {few.messages_out:,} kept")
        )
        await bench.replay(FEW, f"topic B ({args.few_keys:,} keys)")
        topic = await bench.topic(ML, args.messages, args.keys, seed=1)
        full, state = await bench.full_run(ML, args.keys)
        bench.rows.append(
            (
                f"full run, {args.keys:,} keys (topic A), warm",
                f"{full:6.1f} s  {args.messages / full:>10,.0f} msgs/s, {state.messages_out:,} kept",
            )
        )
        await bench.more_writes(topic, 0.01, full, seed=2)
        await bench.more_writes(topic, 0.10, full, seed=4)
        await bench.replay(ML, "topic A, layered view")
        return bench.rows
    finally:
        await client.close()
        store.close()
        cluster.close()
        stop_session()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--messages", type=int, default=5_000_000)
    parser.add_argument("--keys", type=int, default=1_000_000, help="keys of topic A")
    parser.add_argument("--few-keys", type=int, default=10_000, help="keys of topic B")
    args = parser.parse_args()
    rows = asyncio.run(run(args))
    print(f"\ncompaction of {args.messages:,} messages of {VALUE_BYTES} B per topic, {os.cpu_count()} cores")
    print_table(rows)


def print_table(rows: list[tuple[str, str]]) -> None:
    width = max(len(k) for k, _ in rows)
    for k, v in rows:
        print(f"  {k:<{width}}  {v}")


if __name__ == "__main__":
    main()
