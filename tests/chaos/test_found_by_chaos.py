"""Bugs the chaos campaign (`make chaos`) found, each reproduced as narrowly as it could be.

Each test states the rule that should hold and is marked `xfail(strict=True)` while the bug is
there: the day a fix makes it pass, strict xfail fails the suite, and the marker comes off.

**A ledger closed by recovery keeps an entry that only one bookie holds** (campaign seed
62236103, 3 bookies at 3/2/2). A bookie turned read-only (its disk filled) is in the write set
of an add: the other member stores the entry, the read-only one refuses it, the add fails for
want of an ack quorum and there is no spare bookie for an ensemble change, so the ledger is
closed through recovery. Recovery finds the entry on the one bookie and copies it to the rest of
the write set with recovery adds; the read-only bookie refuses those too (`add_entry` refuses
every add while read-only, recovery or not), and recovery closes the ledger *with* the entry all
the same ("under-replicated, re-replication's job"). But nothing lists the ledger as
under-replicated: no bookie is lost. The broker's dedup then counts the entry as persisted and
answers the producer's retry `duplicate`. One later loss of that single holder (its disk wiped;
with Qw=2 one loss must lose nothing) takes the messages with it, and every read from
`earliest` stops at that entry with 404 NO_SUCH_LEDGER, so every later message of the topic is
unreadable too. In the campaign: plain-0-p1 seqs 65..68 answered duplicate at the end of the
recovery of ledger 2, entry 33 on bookie-1 only; bookie-1 wiped 18 s later; reading plain-0
from earliest: `404 ... 2:1..33: NO_SUCH_LEDGER: ledger 2`.

BookKeeper lets recovery adds through on a read-only bookie (they are "high priority" writes),
and a recovery whose adds cannot reach an ack quorum fails rather than close the ledger.
"""

from __future__ import annotations

import contextlib
from pathlib import Path

import pytest

from bookie.client import BookieClientConfig, BookieLedgerClient
from bookie.errors import BookieError
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


@pytest.mark.xfail(
    strict=True,
    reason="recovery closes a ledger with an entry on one bookie when the rest of its write set "
    "is read-only (found by the chaos campaign; see the module docstring)",
)
async def test_recovery_never_closes_a_ledger_with_an_entry_on_fewer_than_an_ack_quorum(
    tmp_path: Path,
) -> None:
    bookies = [await DiskBookie(tmp_path / f"bookie-{i}").start() for i in range(3)]
    client = BookieLedgerClient(BookieClientConfig(add_timeout_s=2.0))
    try:
        spec = LedgerSpec(1, tuple(b.address for b in bookies), write_quorum=2, ack_quorum=2)
        writer = await client.create_ledger(spec)
        assert await writer.add_entry(b"entry 0") == 0  # on bookies 0 and 1
        bookies[1].fill_disk()  # entry 1 goes to bookies 1 and 2
        with pytest.raises(BookieError):
            await writer.add_entry(b"entry 1")  # stored on bookie 2 only: no ack quorum, no spare
        with contextlib.suppress(BookieError):  # a recovery that refuses to close is safe too
            last = await client.recover(spec)
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
