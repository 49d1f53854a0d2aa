"""Bugs the chaos campaign (`make chaos`) found, each reproduced as narrowly as it could be.

Each test states the rule that should hold; each was a strict xfail until its fix landed.

**A ledger closed by recovery keeps an entry that only one bookie holds, and nothing ever
copies it** (3 bookies at 3/2/2). An add fails because one member of its write set cannot take
it: the bookie is read-only (its disk filled), killed, or stopped. The other member has stored
it, so the add lacks its ack quorum, and with no spare bookie for an ensemble change the ledger is
closed through recovery. Recovery finds the entry on the one bookie and tries to copy it to the
rest of the write set with recovery adds; the read-only bookie refuses them (the engine refuses
every add while read-only, recovery or not) and a dead one cannot answer, so recovery closes
the ledger *with* the entry on one bookie ("under-replicated, re-replication's job", the comment
in `BookieLedgerClient._recover_entry` says). But re-replication only looks at ledgers that name
a *lost* bookie (down past the grace period) and then needs a bookie outside the ensemble: a
read-only bookie is never lost, a quick restart is not either, and a 3-bookie cluster has no
spare. So the entry keeps one copy for good. Dedup then counts it as persisted (recovery proved
it durable) and answers the producer's retry `duplicate`. One later loss of that one holder (a
wiped disk; with Qw=2 one loss must lose nothing) takes the messages with it; every read from
`earliest` stops there with 404 (NO_SUCH_LEDGER / NO_SUCH_ENTRY), subscriptions cannot pass it,
and the topic's compaction ends ERROR from then on.

Seen in the campaign twice:

- seed 62236103 (`--seconds 60 --brokers 2 --gap-s 1 2`): fill-disk of bookie-0, the add of
  ledger 2 entry 33 refused READ_ONLY there, recovery "entry 33 is on 1 bookies, ack quorum 2"
  (the holder: bookie-1), the retry of plain-0-p1 seqs 65..68 answered duplicate, bookie-1 wiped
  18 s later; reading plain-0: `404 ... 2:1..33: NO_SUCH_LEDGER: ledger 2`;
- seed 7 (`--seconds 300`): kill -9 of bookie-1 (down 2.4 s), the adds of ledger 7 entry 9 and
  ledger 8 entry 8 failed on it, recovery kept both on bookie-0 only, the retries (keyed-1-p0
  seqs 60..63, plain-0-p0 seq 62) answered duplicate; readers even read them; bookie-0 wiped 25 s
  later; both gone, keyed-1 and plain-0 unreadable past them, keyed-1's final compaction ERROR.

BookKeeper writes a recovered entry back through the normal add path (with an ensemble change
if a bookie fails) and lets recovery adds through on a read-only bookie (they are "high priority"
writes); a recovery that cannot bring an entry to an ack quorum fails, and the close is tried
again later. The two tests below state that rule for the read-only and the dead member.

Fixed: a read-only bookie takes recovery adds, and recovery that cannot bring an entry it found
to an ack quorum of its write set fails (the ledger stays in recovery and is closed by a later
try, once enough of its bookies are back) instead of closing the ledger.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from pathlib import Path

import pytest

from bookie.client import BookieClientConfig, BookieLedgerClient
from bookie.errors import BookieError, ShortOfQuorumError
from bookie.server import BookieServer, ServerConfig
from bookie.storage.config import StorageConfig
from bookie.storage.engine import LedgerStorage
from bookie.types import LedgerSpec
from tests.bookie.local_cluster import LocalBookie


class DiskBookie(LocalBookie):
    """A real engine whose disk usage the test sets (read-only at the 95 % high-water mark)."""

    def __init__(self, data_dir: Path) -> None:
        super().__init__(data_dir)
        self.usage = 0.1
        self.engine: LedgerStorage | None = None

    async def start(self) -> DiskBookie:
        assert self.data_dir is not None
        config = StorageConfig(self.data_dir, disk_check_interval_s=3600, gc_interval_s=3600)
        self.engine = LedgerStorage(config, disk_usage=lambda _path: self.usage)
        await self.engine.start()
        self.storage = self.engine
        self.server = BookieServer(self.engine, ServerConfig(port=self.port))
        await self.server.start()
        return self

    def fill_disk(self) -> None:
        assert self.engine is not None
        self.usage = 0.99
        assert self.engine.check_disk() is True

    def holds(self, ledger_id: int, entry_id: int) -> bool:
        assert self.engine is not None
        try:
            self.engine.read_entry(ledger_id, entry_id)
        except BookieError:
            return False
        return True


async def _fail_an_add_then_recover(
    tmp_path: Path, break_member: Callable[[DiskBookie], Awaitable[None]], closes: bool
) -> None:
    """Ledger 1 on three bookies at Qw=Qa=2; entry 0 written; bookie 1 broken by `break_member`;
    entry 1 (write set: bookies 1 and 2) fails; recovery then must not close the ledger with an
    entry on fewer than an ack quorum of bookies. With `closes`, the broken member can still take
    recovery adds (read-only), so recovery copies entry 1 there and closes at entry 1; without,
    it cannot, and recovery refuses (ShortOfQuorumError) rather than close short of a quorum."""
    bookies = [await DiskBookie(tmp_path / f"bookie-{i}").start() for i in range(3)]
    client = BookieLedgerClient(BookieClientConfig(add_timeout_s=2.0))
    try:
        spec = LedgerSpec(1, tuple(b.address for b in bookies), write_quorum=2, ack_quorum=2)
        writer = await client.create_ledger(spec)
        assert await writer.add_entry(b"entry 0") == 0  # on bookies 0 and 1
        await break_member(bookies[1])
        with pytest.raises(BookieError):
            await writer.add_entry(b"entry 1")  # stored on bookie 2 only: no ack quorum, no spare
        # The add fails as soon as bookie 1 refuses it; bookie 2's copy may still be on its way
        # (a loaded machine): the case is the one where it landed.
        async with asyncio.timeout(10):
            while not bookies[2].holds(spec.ledger_id, 1):
                await asyncio.sleep(0.01)
        if not closes:
            with pytest.raises(ShortOfQuorumError):
                await client.recover(spec)
            return
        last = await client.recover(spec)
        assert last == 1
        for entry_id in range(last + 1):
            holders = [b.address for b in bookies if b.holds(spec.ledger_id, entry_id)]
            assert len(holders) >= spec.ack_quorum, (
                f"recovery closed ledger 1 at entry {last}, but entry {entry_id} is on {holders} "
                f"only: losing that one bookie loses it"
            )
    finally:
        await client.close()
        for bookie in bookies:
            await bookie.kill()


async def _fill(bookie: DiskBookie) -> None:
    bookie.fill_disk()


async def _kill(bookie: DiskBookie) -> None:
    await bookie.kill()


async def test_recovery_does_not_close_a_ledger_short_of_an_ack_quorum_when_a_member_is_read_only(
    tmp_path: Path,
) -> None:
    await _fail_an_add_then_recover(tmp_path, _fill, closes=True)


async def test_recovery_does_not_close_a_ledger_short_of_an_ack_quorum_when_a_member_is_down(
    tmp_path: Path,
) -> None:
    await _fail_an_add_then_recover(tmp_path, _kill, closes=False)
