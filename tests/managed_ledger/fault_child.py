"""The process the managed ledger fault tests kill with -9 (test_ml_faults.py).

It opens the managed ledger `fault` on a real bookie process and a SQL metadata store, with
small ledgers (rollover every 20 entries), retention 0 (trims as the cursor consumes), dedup on
and a 50 ms cursor flush, then until killed:
- produces sequence ids from --start-seq with 50 appends in flight (the retry after a crash
  resends ids that may already be stored: dedup must drop them), logging `A seq ledger entry`
  once an append is acknowledged and `D seq` for a duplicate;
- consumes on cursor `sub`, acking out of order (some entries a round later), and after each
  explicit flush logs `K ledger entry` for every ack the flush covered.
Every line is flushed to the kernel before the next step, so what the log says survives kill -9.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import sys
from typing import TextIO

from bookie.client import BookieLedgerClient
from managed_ledger.api import ManagedLedgerConfig, RetentionPolicy, RolloverPolicy
from managed_ledger.entry_format import Message, encode_batch
from managed_ledger.factory import ManagedLedgerFactory
from managed_ledger.ledger import ManagedLedger
from managed_ledger.metadata.sql import SqlMetadataStore
from managed_ledger.position import Position

NAME = "fault"
CONFIG = ManagedLedgerConfig(
    rollover=RolloverPolicy(max_entries=20, min_rollover_time_ms=0),
    retention=RetentionPolicy(0, 0),
    dedup_enabled=True,
    cursor_flush_interval_ms=50,
    dedup_snapshot_interval_entries=25,
)


def payload(seq: int) -> bytes:
    """The entry for a sequence id: the same bytes every time it is (re)sent."""
    return encode_batch(
        1_000_000 + seq, "p", [Message(value=b"value-%d-" % seq + b"x" * (seq % 50), sequence_id=seq)]
    )


def _line(log: TextIO, text: str) -> None:
    log.write(text + "\n")
    log.flush()


async def produce(ml: ManagedLedger, log: TextIO, start_seq: int) -> None:
    slots = asyncio.Semaphore(50)
    tasks: set[asyncio.Task[None]] = set()

    async def one(seq: int) -> None:
        try:
            pos = await ml.append(payload(seq), producer_name="p", highest_sequence_id=seq)
            _line(log, f"A {seq} {pos.ledger_id} {pos.entry_id}")
        except BaseException as exc:  # nothing should fail here: stop, so the test sees why
            print(f"append {seq} failed: {exc!r}", file=sys.stderr, flush=True)
            os._exit(3)
        finally:
            slots.release()

    seq = start_seq
    while True:
        await slots.acquire()
        if ml.dedup_check("p", [seq])[0]:
            _line(log, f"D {seq}")
            slots.release()
        else:
            task = asyncio.create_task(one(seq))
            tasks.add(task)
            task.add_done_callback(tasks.discard)
        seq += 1
        if seq % 50 == 0:
            await asyncio.sleep(0)


async def consume(ml: ManagedLedger, log: TextIO, seed: int) -> None:
    rng = random.Random(seed)
    cursor = await ml.open_cursor("sub", "earliest")
    later: list[Position] = []
    unflushed: list[Position] = []
    while True:
        try:
            entries = await cursor.read_entries(30)
        except BaseException as exc:
            print(f"read failed: {exc!r}", file=sys.stderr, flush=True)
            os._exit(3)
        if not entries:
            await asyncio.sleep(0.005)
            continue
        now = [p for p, _ in entries if rng.random() < 0.8]
        later.extend(p for p, _ in entries if p not in now)
        rng.shuffle(now)
        acks = now + later[: rng.randrange(len(later) + 1)]
        later = later[len(acks) - len(now) :]
        cursor.ack(acks)
        unflushed.extend(acks)
        if rng.random() < 0.3:
            covered, unflushed = unflushed, []
            await cursor.flush()
            for p in covered:
                _line(log, f"K {p.ledger_id} {p.entry_id}")


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--bookie", required=True)
    parser.add_argument("--db", required=True)
    parser.add_argument("--log", required=True)
    parser.add_argument("--start-seq", type=int, default=0)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    store = SqlMetadataStore(args.db)
    factory = ManagedLedgerFactory(BookieLedgerClient(), store, [args.bookie])
    ml = await factory.open(NAME, CONFIG)
    with open(args.log, "a") as log:  # noqa: ASYNC230 - a test log, flushed line by line on purpose
        _line(log, "O")
        await asyncio.gather(produce(ml, log, args.start_seq), consume(ml, log, args.seed))


if __name__ == "__main__":
    asyncio.run(main())
