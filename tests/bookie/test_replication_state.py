"""A Hypothesis state machine of the replicated client: ledgers written E=3 Qw=2 Qa=2 through the
real ledger lifecycle over five real `BookieServer`s on the real storage engine (each on a
directory of its own, in the test's loop), while bookies are killed, paused (they stop reading
requests), resumed and restarted at random. Against a model of what each writer acknowledged:
an acknowledged entry is never lost or changed, and recovery closes every ledger at an entry it
can prove (at or after every acknowledged one, every entry up to it readable and as sent)."""

from __future__ import annotations

import asyncio
import os
import shutil
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, precondition, rule

from bookie.client import BookieClientConfig, BookieLedgerClient
from bookie.errors import BookieError
from bookie.ledger_metadata import LedgerMetadata, LedgerState
from bookie.ledgers import LedgerHandle, LedgerManager, StaticPlacement, ledger_spec
from bookie.registry import NotEnoughBookiesError
from managed_ledger.metadata.memory import InMemoryMetadataStore
from tests.bookie.local_cluster import LocalBookie

BOOKIES = 5
BOUND_S = 30.0  # every step is bounded by this


@dataclass
class _Ledger:
    handle: LedgerHandle
    sent: dict[int, bytes] = field(default_factory=dict)  # every add handed to the writer
    acked: set[int] = field(default_factory=set)
    failed: bool = False
    taken_over: bool = False  # another client began recovering it: only recovery may close it
    closed_at: int | None = None


class ReplicationMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.dir = Path(tempfile.mkdtemp(prefix="quire-repl-"))
        self.runner = asyncio.Runner()
        self.bookies = [LocalBookie(self.dir / f"bookie{i}") for i in range(BOOKIES)]
        for bookie in self.bookies:
            self.run(bookie.start())
        config = BookieClientConfig(
            add_timeout_s=0.5, request_timeout_s=5.0, connect_timeout_s=1.0, speculative_read_timeout_s=0.05
        )
        self.client = BookieLedgerClient(config)
        self.store = InMemoryMetadataStore()
        placement = StaticPlacement([b.address for b in self.bookies])
        self.manager = LedgerManager(self.store, self.client, placement=placement)
        self.ledgers: dict[int, _Ledger] = {}

    def run(self, coro: object) -> object:
        async def bounded() -> object:
            async with asyncio.timeout(BOUND_S):
                return await coro  # type: ignore[misc]

        return self.runner.run(bounded())

    def teardown(self) -> None:
        try:
            self.heal_and_verify()
        finally:
            for bookie in self.bookies:
                self.run(bookie.stop())
            self.run(self.client.close())
            self.runner.close()
            shutil.rmtree(self.dir, ignore_errors=True)

    @property
    def all_healthy(self) -> bool:
        return all(b.up and not b.paused for b in self.bookies)

    def open_ledgers(self) -> list[int]:
        return sorted(i for i, m in self.ledgers.items() if m.closed_at is None)

    # --- writing ---------------------------------------------------------------------------------
    @rule()
    def create(self) -> None:
        try:
            handle = self.run(self.manager.create(3, 2, 2))
        except (BookieError, NotEnoughBookiesError):
            assert not self.all_healthy
            return
        assert isinstance(handle, LedgerHandle)
        self.ledgers[handle.ledger_id] = _Ledger(handle)

    @precondition(lambda self: self.open_ledgers())
    @rule(data=st.data(), count=st.integers(1, 40))
    def add(self, data: st.DataObject, count: int) -> None:
        model = self.ledgers[data.draw(st.sampled_from(self.open_ledgers()))]
        first = len(model.sent)
        payloads = [b"%d-%d-" % (model.handle.ledger_id, first + i) + bytes(first + i) for i in range(count)]

        async def add_all() -> list[int | BaseException]:
            adds = [model.handle.add_entry(p) for p in payloads]
            return list(await asyncio.gather(*adds, return_exceptions=True))

        results = self.run(add_all())
        assert isinstance(results, list)
        for i, (payload, result) in enumerate(zip(payloads, results, strict=True)):
            if model.failed and i == 0 and isinstance(result, BookieError):
                return  # a failed writer refuses adds before it numbers them
            model.sent[first + i] = payload
            if isinstance(result, BaseException):
                assert isinstance(result, BookieError), result
                model.failed = True
            else:
                assert result == first + i
                model.acked.add(result)

    # --- faults ----------------------------------------------------------------------------------
    @rule(index=st.integers(0, BOOKIES - 1))
    def kill(self, index: int) -> None:
        self.run(self.bookies[index].kill())

    @rule(index=st.integers(0, BOOKIES - 1))
    def pause(self, index: int) -> None:
        if self.bookies[index].up:
            self.bookies[index].pause()

    @rule(index=st.integers(0, BOOKIES - 1))
    def resume(self, index: int) -> None:
        self.bookies[index].resume()

    @rule(index=st.integers(0, BOOKIES - 1))
    def restart(self, index: int) -> None:
        bookie = self.bookies[index]
        self.run(bookie.kill())
        self.run(bookie.start())

    # --- recovery and reads ----------------------------------------------------------------------
    @precondition(lambda self: self.open_ledgers())
    @rule(data=st.data())
    def close(self, data: st.DataObject) -> None:
        ledger_id = data.draw(st.sampled_from(self.open_ledgers()))
        # By its writer, or (as after the writer's process died) by another client's recovery.
        try:
            self.close_and_check(ledger_id, by_recovery=data.draw(st.booleans()))
        except BookieError:
            assert not self.all_healthy  # with every bookie up and reading, it must close

    @precondition(lambda self: self.ledgers)
    @rule(data=st.data())
    def read(self, data: st.DataObject) -> None:
        model = self.ledgers[data.draw(st.sampled_from(sorted(self.ledgers)))]
        if not model.acked:
            return
        last = max(model.acked)
        spec = ledger_spec(self.store.get_ledger(model.handle.ledger_id))
        try:
            entries = self.run(self.client.read_entries(spec, 0, last))
        except BookieError:
            assert not self.all_healthy
            return
        assert isinstance(entries, list)
        for entry_id in model.acked:
            assert entries[entry_id] == model.sent[entry_id]

    def close_and_check(self, ledger_id: int, by_recovery: bool = False) -> None:
        model = self.ledgers[ledger_id]
        if by_recovery or model.taken_over:
            # A recovery that fails half-way has still moved the row on (IN_RECOVERY): from then
            # on the writer's own close loses its compare-and-set, as it should.
            model.taken_over = True
            meta = self.run(self.recover_elsewhere(ledger_id))
        elif model.failed:
            meta = self.run(self.manager.recover_and_close(ledger_id))
        else:
            meta = self.run(self.manager.close(model.handle))
        assert isinstance(meta, LedgerMetadata) and meta.state == LedgerState.CLOSED
        last = meta.last_entry_id
        assert last >= max(model.acked, default=-1)  # nothing acknowledged is cut off
        assert last < len(model.sent)  # nothing that was never sent
        model.closed_at = last
        if last >= 0:
            entries = self.run(self.client.read_entries(ledger_spec(meta), 0, last))
            assert entries == [model.sent[i] for i in range(last + 1)]

    async def recover_elsewhere(self, ledger_id: int) -> LedgerMetadata:
        other = BookieLedgerClient(self.client.config)
        try:
            return await LedgerManager(self.store, other).recover_and_close(ledger_id)
        finally:
            await other.close()

    def heal_and_verify(self) -> None:
        """Every bookie back and reading; then every ledger closes at a provable entry."""
        for bookie in self.bookies:
            if not bookie.up:
                self.run(bookie.start())
            bookie.resume()
        for ledger_id in self.open_ledgers():
            for attempt in range(3):  # a loaded machine may time a bookie out: retry, bounded
                try:
                    self.close_and_check(ledger_id, by_recovery=ledger_id % 2 == 0)
                    break
                except BookieError:
                    if attempt == 2:
                        raise
        for ledger_id, model in self.ledgers.items():
            meta = self.store.get_ledger(ledger_id)
            assert meta.last_entry_id == model.closed_at


ReplicationMachine.TestCase.settings = settings(
    max_examples=int(os.environ.get("QUIRE_REPL_EXAMPLES", "12")),
    stateful_step_count=15,
    deadline=None,
)
test_replication_state_machine = pytest.mark.slow(ReplicationMachine.TestCase)
