"""A Hypothesis state machine: the storage engine on real files against a dict model.

Rules: add (one, or many in flight), retry, read, fence, recovery add, delete, garbage
collection, and crash-and-restart (the engine dropped without close, sometimes with adds in
flight, sometimes with a torn or garbage tail appended to the journal). An acknowledged add is
never lost or changed; an unacknowledged one is either wholly there or not at all, and within a
ledger what survives of them is a prefix (the log is cut at its first invalid record).
"""

from __future__ import annotations

import asyncio
import os
import shutil
import tempfile
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from bookie.errors import BookieError, ErrorCode, FencedError, NoSuchEntryError, NoSuchLedgerError
from bookie.storage.engine import LedgerStorage, StorageConfig
from tests.bookie.fakes import is_fenced
from tests.examples import examples

LEDGERS = st.integers(1, 4)
PAYLOADS = st.binary(max_size=300)


async def _gather(awaitables: list[Any]) -> list[Any]:
    return await asyncio.gather(*awaitables, return_exceptions=True)


class _Ledger:
    def __init__(self) -> None:
        self.entries: list[bytes] = []
        self.fenced = False
        self.lac = -1


class StorageMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.dir = Path(tempfile.mkdtemp(prefix="quire-sm-"))
        self.loop = asyncio.new_event_loop()
        self.model: dict[int, _Ledger] = {}
        self.storage = self._open()

    def _open(self) -> LedgerStorage:
        config = StorageConfig(
            self.dir, journal_max_size_bytes=4096, disk_check_interval_s=3600, gc_interval_s=3600
        )
        storage = LedgerStorage(config, disk_usage=lambda _p: 0.1)
        self.loop.run_until_complete(storage.start())
        return storage

    def teardown(self) -> None:
        self.loop.run_until_complete(self.storage.close())
        self.loop.close()
        shutil.rmtree(self.dir, ignore_errors=True)

    def _run(self, coro: object) -> object:
        return self.loop.run_until_complete(coro)  # type: ignore[arg-type]

    def _ledger(self, ledger_id: int) -> _Ledger:
        return self.model.setdefault(ledger_id, _Ledger())

    # ---- rules --------------------------------------------------------------------------

    @rule(ledger_id=LEDGERS, payloads=st.lists(PAYLOADS, min_size=1, max_size=20))
    def add(self, ledger_id: int, payloads: list[bytes]) -> None:
        ledger = self.model.get(ledger_id)
        first = len(ledger.entries) if ledger else 0
        adds = [
            self.storage.add_entry(ledger_id, first + i, first + i - 1, payload)
            for i, payload in enumerate(payloads)
        ]
        results = self._run(_gather(adds))
        assert isinstance(results, list)
        if ledger is not None and ledger.fenced:
            assert all(isinstance(r, FencedError) for r in results)
            return
        assert results == [None] * len(payloads)
        ledger = self._ledger(ledger_id)
        ledger.entries.extend(payloads)
        ledger.lac = max(ledger.lac, len(ledger.entries) - 2)

    @rule(ledger_id=LEDGERS, payload=PAYLOADS)
    def recovery_add(self, ledger_id: int, payload: bytes) -> None:
        ledger = self._ledger(ledger_id)
        entry_id = len(ledger.entries)
        self._run(self.storage.add_entry(ledger_id, entry_id, entry_id - 1, payload, recovery=True))
        ledger.entries.append(payload)
        ledger.lac = max(ledger.lac, entry_id - 1)

    @precondition(lambda self: any(ledger.entries for ledger in self.model.values()))
    @rule(data=st.data(), same=st.booleans())
    def retry(self, data: st.DataObject, same: bool) -> None:
        ledger_id = data.draw(st.sampled_from(sorted(k for k, v in self.model.items() if v.entries)))
        ledger = self.model[ledger_id]
        entry_id = data.draw(st.integers(0, len(ledger.entries) - 1))
        payload = ledger.entries[entry_id] if same else ledger.entries[entry_id] + b"!"
        try:
            self._run(self.storage.add_entry(ledger_id, entry_id, entry_id - 1, payload, recovery=True))
            assert same
        except BookieError as exc:
            assert not same and exc.code == ErrorCode.BAD_REQUEST

    @rule(ledger_id=LEDGERS, entry_id=st.integers(0, 40))
    def read(self, ledger_id: int, entry_id: int) -> None:
        ledger = self.model.get(ledger_id)
        if ledger is None:
            with pytest.raises(NoSuchLedgerError):
                self.storage.read_entry(ledger_id, entry_id)
        elif entry_id < len(ledger.entries):
            assert self.storage.read_entry(ledger_id, entry_id) == ledger.entries[entry_id]
        else:
            with pytest.raises(NoSuchEntryError):
                self.storage.read_entry(ledger_id, entry_id)

    @rule(ledger_id=LEDGERS)
    def fence(self, ledger_id: int) -> None:
        lac = self._run(self.storage.fence(ledger_id))
        ledger = self._ledger(ledger_id)
        ledger.fenced = True
        assert lac == ledger.lac

    @rule(ledger_id=LEDGERS)
    def delete(self, ledger_id: int) -> None:
        self._run(self.storage.delete_ledger(ledger_id))
        self.model.pop(ledger_id, None)

    @rule()
    def collect_garbage(self) -> None:
        self._run(self.storage.collect_garbage())

    @rule(tail=st.sampled_from(["none", "garbage", "torn record", "zeroes"]))
    def crash_and_restart(self, tail: str) -> None:
        self.storage.abandon()
        self._damage_tail(tail)
        self.storage = self._open()
        self.check_everything()

    @rule(ledger_id=LEDGERS, payloads=st.lists(PAYLOADS, min_size=1, max_size=10), tail=st.booleans())
    def crash_with_adds_in_flight(self, ledger_id: int, payloads: list[bytes], tail: bool) -> None:
        ledger = self._ledger(ledger_id)
        if ledger.fenced:
            return
        first = len(ledger.entries)
        tasks = [
            self.loop.create_task(self.storage.add_entry(ledger_id, first + i, first + i - 1, p))
            for i, p in enumerate(payloads)
        ]
        self._run(asyncio.sleep(0))  # the adds are in a group; its write may or may not finish
        self.storage.abandon()
        self._run(_gather(tasks))
        if tail:
            self._damage_tail("torn record")
        self.storage = self._open()
        # Unacknowledged: each is there whole or not at all, and what is there is a prefix.
        survived = 0
        for i, payload in enumerate(payloads):
            try:
                stored = self.storage.read_entry(ledger_id, first + i)
            except (NoSuchEntryError, NoSuchLedgerError):
                break
            assert stored == payload
            survived += 1
        for i in range(survived, len(payloads)):
            with pytest.raises((NoSuchEntryError, NoSuchLedgerError)):
                self.storage.read_entry(ledger_id, first + i)
        ledger.entries.extend(payloads[:survived])
        ledger.lac = max(ledger.lac, len(ledger.entries) - 2) if survived else ledger.lac
        if not ledger.entries and not ledger.fenced:
            self.model.pop(ledger_id)  # nothing of it reached the disk: the bookie never saw it
        self.check_everything()

    def _damage_tail(self, tail: str) -> None:
        if tail == "none":
            return
        current = max((self.dir / "journal").glob("*.log"))
        data = {"garbage": os.urandom(100), "torn record": b"\x20\x00\x00\x00\x01\x02", "zeroes": bytes(600)}[
            tail
        ]
        with open(current, "ab") as f:
            f.write(data)

    # ---- checks -------------------------------------------------------------------------

    def check_everything(self) -> None:
        for ledger_id, ledger in self.model.items():
            for entry_id, payload in enumerate(ledger.entries):
                assert self.storage.read_entry(ledger_id, entry_id) == payload
            assert self._run(is_fenced(self.storage, ledger_id)) == ledger.fenced

    @invariant()
    def ledger_table_matches(self) -> None:
        for ledger_id in range(1, 5):
            ledger = self.model.get(ledger_id)
            if ledger is None:
                with pytest.raises(NoSuchLedgerError):
                    self.storage.last_entry_id(ledger_id)
                continue
            assert self.storage.last_entry_id(ledger_id) == len(ledger.entries) - 1
            assert self.storage.read_last_add_confirmed(ledger_id) == ledger.lac


TestStorageMachine = StorageMachine.TestCase
TestStorageMachine.settings = settings(
    max_examples=examples(40),
    stateful_step_count=30,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
)
