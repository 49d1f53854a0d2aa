"""A Hypothesis state machine drives the TCP client and server (on the in-memory engine) with
creates, pipelined adds, range reads, LAC reads, recoveries and deletes, against a dict model."""

from __future__ import annotations

import asyncio
import itertools

import pytest
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from bookie.client import BookieClientConfig, BookieLedgerClient, BookieLedgerWriter
from bookie.errors import BookieError, FencedError, NoSuchEntryError, NoSuchLedgerError
from bookie.server import ServerConfig
from bookie.types import LedgerSpec
from tests.bookie.conftest import ThreadBookie
from tests.examples import examples

_ledger_ids = itertools.count(1)


class _Model:
    def __init__(self) -> None:
        self.entries: list[bytes] = []
        self.lac_floor = -1  # the bookie has heard at least this LAC
        self.fenced = False


class ClientMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.bookie = ThreadBookie(ServerConfig(port=0, max_requests_in_flight=16)).start()
        self.runner = asyncio.Runner()
        self.client = BookieLedgerClient(BookieClientConfig(read_chunk_entries=7, read_chunk_bytes=300))
        self.models: dict[int, _Model] = {}
        self.writers: dict[int, BookieLedgerWriter] = {}
        self.deleted: list[int] = []

    def spec(self, ledger_id: int) -> LedgerSpec:
        return LedgerSpec(ledger_id, (self.bookie.address,))

    def teardown(self) -> None:
        self.runner.run(self.client.close())
        self.runner.close()
        self.bookie.stop()

    def pick(self, data: st.DataObject) -> int:
        return data.draw(st.sampled_from(sorted(self.models)))

    async def _add(self, writer: BookieLedgerWriter, payloads: list[bytes]) -> list[int]:
        return list(await asyncio.gather(*(writer.add_entry(p) for p in payloads)))

    @rule(payloads=st.lists(st.binary(max_size=50), max_size=40))
    def create(self, payloads: list[bytes]) -> None:
        ledger_id = next(_ledger_ids)
        writer = self.runner.run(self.client.create_ledger(self.spec(ledger_id)))
        model = self.models[ledger_id] = _Model()
        self.writers[ledger_id] = writer
        self.add_to(ledger_id, payloads)
        assert model.entries == payloads

    def add_to(self, ledger_id: int, payloads: list[bytes]) -> None:
        model = self.models[ledger_id]
        writer = self.writers[ledger_id]
        if model.fenced:
            with pytest.raises((FencedError, BookieError)):
                self.runner.run(self._add(writer, payloads or [b"x"]))
            return
        before = len(model.entries)
        ids = self.runner.run(self._add(writer, payloads))
        assert ids == list(range(before, before + len(payloads)))
        model.lac_floor = max(model.lac_floor, before - 1)
        model.entries += payloads
        assert writer.last_add_confirmed == len(model.entries) - 1

    @precondition(lambda self: self.models)
    @rule(data=st.data(), payloads=st.lists(st.binary(max_size=300), min_size=1, max_size=30))
    def add(self, data: st.DataObject, payloads: list[bytes]) -> None:
        self.add_to(self.pick(data), payloads)

    @precondition(lambda self: self.models)
    @rule(data=st.data())
    def read(self, data: st.DataObject) -> None:
        ledger_id = self.pick(data)
        entries = self.models[ledger_id].entries
        first = data.draw(st.integers(0, len(entries) + 1))
        last = data.draw(st.integers(first, len(entries) + 2))
        if last < len(entries):
            got = self.runner.run(self.client.read_entries(self.spec(ledger_id), first, last))
            assert got == entries[first : last + 1]
        else:
            with pytest.raises((NoSuchEntryError, NoSuchLedgerError)):
                self.runner.run(self.client.read_entries(self.spec(ledger_id), first, last))

    @precondition(lambda self: self.models)
    @rule(data=st.data())
    def read_lac(self, data: st.DataObject) -> None:
        ledger_id = self.pick(data)
        model = self.models[ledger_id]
        try:
            lac = self.runner.run(self.client.read_last_add_confirmed(self.spec(ledger_id)))
        except NoSuchLedgerError:
            assert not model.entries and not model.fenced
            return
        assert model.lac_floor <= lac <= len(model.entries) - 1

    @precondition(lambda self: self.models)
    @rule(data=st.data())
    def recover(self, data: st.DataObject) -> None:
        ledger_id = self.pick(data)
        model = self.models[ledger_id]
        assert self.runner.run(self.client.recover(self.spec(ledger_id))) == len(model.entries) - 1
        model.fenced = True

    @precondition(lambda self: self.models)
    @rule(data=st.data())
    def delete(self, data: st.DataObject) -> None:
        ledger_id = self.pick(data)
        self.runner.run(self.client.delete_ledger(self.spec(ledger_id)))
        del self.models[ledger_id]
        del self.writers[ledger_id]
        self.deleted.append(ledger_id)

    @invariant()
    def deleted_ledgers_are_gone(self) -> None:
        for ledger_id in self.deleted[-3:]:
            with pytest.raises(NoSuchLedgerError):
                self.runner.run(self.client.read_entries(self.spec(ledger_id), 0, 0))


ClientMachine.TestCase.settings = settings(max_examples=examples(40), stateful_step_count=20, deadline=None)
test_client_state_machine = ClientMachine.TestCase
