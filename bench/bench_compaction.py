"""`make bench-compaction`: topic compaction on PySpark against the plain-Python reference.

Starts `quire bookie` on a free port in a temporary directory, writes a topic of N messages
(default 1,000,000) of 100 B over 10,000 keys in batches of 1,000 (one entry each) through the
ledger client and a SQLite metadata store, then measures in this one process:

- the Spark job, cold (a new session: start-up included) and warm (the same session again, the
  compaction state reset so the run reads everything), messages/s;
- the plain-Python reference on the same input (compactor.reference), for the ratio;
- peak resident memory of the driver (this Python process and its JVM) and the executors
  (Spark's Python workers), sampled every 50 ms during the Spark runs;
- a second, incremental run after 10% more writes (it reads the compacted ledger + the new part;
  an input that small runs as one Spark task, see compactor.job);
- replay: every message of the raw topic read and decoded, against the compacted view read
  through topics.compacted.CompactedView.

Not a test: nothing here asserts; it prints one table with the bars of issue 5: warm run of
1,000,000 messages < 30 s, incremental run < 1/3 of the first, compacted replay >= 50x faster.
`QUIRE_BENCH_MESSAGES=5000000` runs the larger size.
"""

from __future__ import annotations

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
from compactor.reference import ReferenceEngine
from compactor.runner import CompactionRunner
from compactor.spark import stop_session
from compactor.writer import delete_ledger
from managed_ledger.entry_format import decode_batch, encode_batch_raw
from managed_ledger.metadata.sql import SqlMetadataStore
from managed_ledger.position import MessageId
from tests.compactor.conftest import Bookie
from tests.compactor.topic_writer import TopicWriter
from topics.compacted import CompactedView

MESSAGES = int(os.environ.get("QUIRE_BENCH_MESSAGES", "1000000"))
KEYS = 10_000
VALUE_BYTES = 100
BATCH = 1_000
ML = "public/default/bench-compaction"


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


async def write_topic(topic: TopicWriter, messages: int, seed: int) -> None:
    rnd = random.Random(seed)
    value = b"x" * VALUE_BYTES
    done = 0
    payloads: list[bytes] = []
    while done < messages:
        n = min(BATCH, messages - done)
        rows: list[list[object]] = [[f"key-{rnd.randrange(KEYS)}", value, None, None, None] for _ in range(n)]
        payloads.append(encode_batch_raw(1, "bench", rows))
        done += n
        if len(payloads) >= 64:
            await topic.append_payloads(payloads)
            payloads = []
    await topic.append_payloads(payloads)


async def reset_compaction(store: SqlMetadataStore, client: BookieLedgerClient) -> None:
    """Forget the compacted view so the next run reads the whole topic again."""
    state = store.get_compaction(ML)
    store.put_compaction(replace(state, compacted_ledger_id=None, horizon=None))
    if state.compacted_ledger_id is not None:
        await delete_ledger(store, client, state.compacted_ledger_id)


async def timed_run(runner: CompactionRunner) -> tuple[float, int, int]:
    start = time.perf_counter()
    state = await runner.run(ML)
    return time.perf_counter() - start, state.messages_in, state.messages_out


async def raw_replay(store: SqlMetadataStore, client: BookieLedgerClient) -> tuple[float, int]:
    start = time.perf_counter()
    count = 0
    ml = store.get_managed_ledger(ML)
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


async def compacted_replay(view: CompactedView) -> tuple[float, int]:
    start = time.perf_counter()
    count = 0
    position = MessageId(0, 0, 0)
    while page := await view.read(ML, position, 1_000):
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


async def main() -> None:
    root = Path(tempfile.mkdtemp(prefix="quire-bench-compaction-"))
    bookie = Bookie(root / "bookie").start()
    store = SqlMetadataStore(f"sqlite:///{root / 'metadata.db'}")
    client = BookieLedgerClient(bookie_client_config())
    rows: list[tuple[str, str]] = []
    try:
        topic = TopicWriter(store, client, ML, (bookie.address,))
        t = time.perf_counter()
        await write_topic(topic, MESSAGES, seed=1)
        await topic.close_ledger()
        print(f"wrote {MESSAGES:,} messages in {time.perf_counter() - t:.1f} s", file=sys.stderr)
        config = CompactorConfig(bookies=(bookie.address,))
        spark = CompactionRunner(
            store, client, config, SparkEngine(config, BookieClientFactory(client.config))
        )
        with PeakMemory() as peak:
            cold, n_in, n_out = await timed_run(spark)
            await reset_compaction(store, client)
            warm, _, _ = await timed_run(spark)
        rows += [
            ("spark, cold (session start included)", f"{cold:6.1f} s  {n_in / cold:>10,.0f} msgs/s"),
            ("spark, warm", f"{warm:6.1f} s  {n_in / warm:>10,.0f} msgs/s  (bar < 30 s)"),
            ("messages in / out", f"{n_in:,} / {n_out:,}"),
            ("peak RSS driver: python / JVM", f"{mb(peak.driver_py)} / {mb(peak.jvm)}"),
            ("peak RSS executors (python workers)", mb(peak.workers)),
        ]
        state = store.get_compaction(ML)
        reference = CompactionRunner(store, client, config, ReferenceEngine(client))
        await reset_compaction(store, client)
        ref, _, _ = await timed_run(reference)
        rows.append(
            (
                "reference (plain Python)",
                f"{ref:6.1f} s  {n_in / ref:>10,.0f} msgs/s  spark warm is {ref / warm:.2f}x",
            )
        )
        # back to the Spark view for the incremental run
        await reset_compaction(store, client)
        await timed_run(spark)
        await topic.roll()
        await write_topic(topic, MESSAGES // 10, seed=2)
        incremental, inc_in, _ = await timed_run(spark)
        rows.append(
            (
                "incremental run after +10% writes",
                f"{incremental:6.1f} s  ({incremental / warm:.2f} of the warm run; bar < 0.33), "
                f"{inc_in:,} msgs read",
            )
        )
        await topic.close_ledger()
        view = CompactedView(store, client)
        # medians of 5: the compacted replay takes tens of ms, so one busy moment on a shared
        # machine moves a median of 3
        raw_s, raw_n = await median_of(5, lambda: raw_replay(store, client))
        comp_s, comp_n = await median_of(5, lambda: compacted_replay(view))
        rows += [
            ("raw replay", f"{raw_s:6.2f} s  {raw_n:,} messages"),
            (
                "compacted replay",
                f"{comp_s:6.3f} s  {comp_n:,} messages  {raw_s / comp_s:.0f}x faster (bar >= 50x)",
            ),
        ]
        del state
    finally:
        await client.close()
        store.close()
        bookie.stop()
        stop_session()
    print_table(rows)


def print_table(rows: list[tuple[str, str]]) -> None:
    width = max(len(k) for k, _ in rows)
    print(
        f"\ncompaction of {MESSAGES:,} messages of {VALUE_BYTES} B over {KEYS:,} keys, {os.cpu_count()} cores"
    )
    for k, v in rows:
        print(f"  {k:<{width}}  {v}")


if __name__ == "__main__":
    asyncio.run(main())
