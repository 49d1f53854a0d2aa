"""Re-replication throughput of one recovery worker, in-process, against real bookie processes.

Four `quire bookie` processes; QUIRE_BENCH_REREPL_MB (default 100) of 1 KiB entries written
through the ledger manager into closed E=3 Qw=2 Qa=2 ledgers of 5,000 entries over rotating
ensembles of three of the four; the first bookie is killed with -9 and every ledger naming it
is listed as under-replicated (as the auditor would); then one worker pass (`run_pass`: its
`ledgers_in_flight` ledgers at a time until nothing is claimable) copies its entries to the
others. Prints the MB the worker copied (its own counter) over the time of the pass, and checks
that no ledger names the dead bookie afterwards.

The metadata store is a SQLite file, as in a single-node deployment; the registry records are
written here (the bookies are not given the store), fresh for the survivors and stale for the
dead one. Run with `python -m bench.bench_rereplication`.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from bench.common import bookie_client_config, free_port, start_bookie, stop_bookie
from bookie.client import BookieLedgerClient
from bookie.ledgers import LedgerManager, ledger_spec
from bookie.recovery_store import UnderReplicatedLedger
from bookie.registry import BookieRecord, BookieState, MetadataBookieRegistry, wall_clock_ms
from bookie.replica_io import ReplicaIO, ReplicaIOConfig
from bookie.rereplication import ReplicationWorker, WorkerConfig
from managed_ledger.metadata.sql import SqlMetadataStore

MB = int(os.environ.get("QUIRE_BENCH_REREPL_MB", "100"))
ENTRY_BYTES = 1024
ENTRIES_PER_LEDGER = 5_000
TIMEOUT_S = 600.0


def progress(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


async def write_ledgers(manager: LedgerManager, addresses: list[str]) -> int:
    """The ledgers, over rotating ensembles; returns the bytes whose write set names addresses[0]."""
    payload = os.urandom(ENTRY_BYTES)
    ledgers = max(1, MB * 1024 * 1024 // (ENTRY_BYTES * ENTRIES_PER_LEDGER))
    on_lost = 0
    for i in range(ledgers):
        ensemble = tuple(addresses[(i + k) % 4] for k in range(3))
        handle = await manager.create(3, 2, 2, ensemble=ensemble)
        for _ in range(ENTRIES_PER_LEDGER // 1000):
            await asyncio.gather(*(handle.add_entry(payload) for _ in range(1000)))
        spec = ledger_spec(await manager.close(handle))
        on_lost += sum(addresses[0] in spec.write_set(e) for e in range(ENTRIES_PER_LEDGER))
        if i % 10 == 9:
            progress(f"  {i + 1}/{ledgers} ledgers written")
    return on_lost * ENTRY_BYTES


def cpu_seconds(pids: list[int]) -> float:
    """User + system CPU of these processes so far (Linux /proc; 0 where unreadable)."""
    total = 0.0
    for pid in pids:
        with contextlib.suppress(OSError, ValueError, IndexError):
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
            total += (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    return total


async def run(tmp: Path, addresses: list[str], pids: list[int], kill: Callable[[], None]) -> None:
    store = SqlMetadataStore(f"sqlite:///{tmp / 'metadata.db'}")
    client = BookieLedgerClient(bookie_client_config())
    io = ReplicaIO(ReplicaIOConfig(security=client.config.security))
    try:
        manager = LedgerManager(store, client)
        progress(f"writing {MB} MB of 1 KiB entries at 3/2/2 over 4 bookies")
        expected = await asyncio.wait_for(write_ledgers(manager, addresses), TIMEOUT_S)
        lost = addresses[0]
        kill()
        now = wall_clock_ms()
        for address in addresses:
            beat = 0 if address == lost else now
            store.put_bookie(BookieRecord(address, "bench", BookieState.WRITABLE, beat))
        for meta in store.list_ledgers():
            if any(lost in bookies for _, bookies in meta.history()):
                store.put_underreplicated(UnderReplicatedLedger(meta.ledger_id, (lost,), now))
        registry = MetadataBookieRegistry(store)
        worker = ReplicationWorker(store, manager, registry, io, WorkerConfig("bench"))
        progress(f"killed {lost} (it held {expected / 1e6:,.1f} MB of copies); one worker pass")
        started, cpu, bookies_cpu = time.perf_counter(), time.process_time(), cpu_seconds(pids)
        await asyncio.wait_for(worker.run_pass(), TIMEOUT_S)
        elapsed = time.perf_counter() - started
        cpu, bookies_cpu = time.process_time() - cpu, cpu_seconds(pids) - bookies_cpu
        left = [m.ledger_id for m in store.list_ledgers() if any(lost in b for _, b in m.history())]
        copied = worker.counters.recovery_bytes
        print(
            f"re-replication: {copied / 1e6:,.1f} MB copied (expected {expected / 1e6:,.1f} MB) in "
            f"{elapsed:.2f} s: {copied / 1e6 / elapsed:.1f} MB/s; "
            f"{worker.counters.ledgers_recovered} ledgers, still naming the dead bookie: {len(left)}; "
            f"CPU: worker {cpu:.2f} s, surviving bookies {bookies_cpu:.2f} s"
        )
    finally:
        await io.close()
        await client.close()
        store.close()


def _loop_factory() -> Callable[[], asyncio.AbstractEventLoop] | None:
    """uvloop when installed, as `quire autorecovery` runs on (QUIRE_BENCH_ASYNCIO=1: asyncio's)."""
    if os.environ.get("QUIRE_BENCH_ASYNCIO") == "1":
        return None
    try:
        import uvloop
    except ImportError:
        return None
    return uvloop.new_event_loop


def main() -> None:
    with tempfile.TemporaryDirectory(prefix="quire-bench-rerepl-") as name:
        tmp = Path(name)
        procs = []
        try:
            for i in range(4):
                port = free_port()
                procs.append((f"127.0.0.1:{port}", start_bookie(tmp / f"b{i}", port, tmp / f"b{i}.log")))

            def kill() -> None:
                procs[0][1].kill9()

            pids = [p.pid for _, p in procs[1:]]
            with asyncio.Runner(loop_factory=_loop_factory()) as runner:
                runner.run(run(tmp, [a for a, _ in procs], pids, kill))
        finally:
            for _, proc in procs:
                stop_bookie(proc)


if __name__ == "__main__":
    main()
