"""Dedup's three answers (new, duplicate, in flight) and how a failed write resolves: a retry is
refused while the write's fate is unknown, then accepted if the write was lost, or answered
duplicate if recovery proves it durable. Never both lost and called a duplicate, never stored
twice."""

from __future__ import annotations

from typing import Any

import pytest

from bookie.errors import BookieError, ErrorCode
from bookie.memory import InMemoryLedgerClient
from bookie.types import LedgerSpec
from managed_ledger.dedup import Deduplication
from managed_ledger.entry_format import batch_sequence
from managed_ledger.errors import ManagedLedgerError, SequenceInFlightError
from managed_ledger.ledger import ManagedLedger
from managed_ledger.position import Position
from tests.managed_ledger.ml_support import Env, batch, config


def test_new_duplicate_and_in_flight() -> None:
    d = Deduplication({"p": 2})  # 0..2 persisted
    assert d.check("p", [1, 2, 3, 4]) == [True, True, False, False]  # 3 and 4 pushed now
    with pytest.raises(SequenceInFlightError) as refused:
        d.check("p", [4, 5])
    assert (refused.value.producer_name, refused.value.sequence_id) == ("p", 4)
    assert d.pushed["p"] == 4  # the refused batch marked nothing
    with pytest.raises(SequenceInFlightError):  # a duplicate beside an in-flight id: all refused
        d.check("p", [2, 3])
    d.record_persisted("p", 3)  # 3 is durable, 4 still in flight
    assert d.check("p", [3]) == [True]
    with pytest.raises(SequenceInFlightError):
        d.check("p", [4])
    assert d.check("p", [5, None]) == [False, False]
    assert d.check("q", [4]) == [False]  # producers are independent
    d.write_failed()  # 4 and 5 were lost: a retry of them is new
    assert d.check("p", [3, 4, 5]) == [True, False, False]


class FlakyClient(InMemoryLedgerClient):
    """The in-memory client with the bookie faults these tests need: an add made durable whose
    reply is lost, recovery failing (bookie down), ledger creation failing."""

    def __init__(self) -> None:
        super().__init__()
        self.lose_replies = False
        self.fail_recover = False
        self.fail_create = False

    async def create_ledger(self, spec: LedgerSpec, on_ensemble_change: Any = None) -> Any:
        if self.fail_create:
            raise BookieError(ErrorCode.UNAVAILABLE, "bookie down")
        return _LosingWriter(self, await super().create_ledger(spec, on_ensemble_change))

    async def recover(
        self, spec: LedgerSpec, fresh: frozenset[str] = frozenset(), instances: Any = None
    ) -> int:
        if self.fail_recover:
            raise BookieError(ErrorCode.UNAVAILABLE, "bookie down")
        return await super().recover(spec, fresh, instances)


class _LosingWriter:
    def __init__(self, client: FlakyClient, inner: Any) -> None:
        self._client = client
        self._inner = inner
        self.spec = inner.spec

    @property
    def last_add_confirmed(self) -> int:
        return int(self._inner.last_add_confirmed)

    @property
    def failure(self) -> BookieError | None:
        return self._inner.failure  # type: ignore[no-any-return]

    async def add_entry(self, payload: bytes) -> int:
        entry_id = int(await self._inner.add_entry(payload))
        if self._client.lose_replies:
            raise BookieError(ErrorCode.UNAVAILABLE, "connection lost before the reply")
        return entry_id

    async def close(self) -> int:
        return int(await self._inner.close())


async def _produce(ml: ManagedLedger, seqs: list[int]) -> list[bool]:
    """Topic-layer style produce for producer "p": the duplicate flags (raises as the ML does)."""
    dup = ml.dedup_check("p", seqs)
    fresh = [s for s, d in zip(seqs, dup, strict=True) if not d]
    if fresh:
        await ml.append(batch(1, "p", *fresh), producer_name="p", highest_sequence_id=max(fresh))
    return dup


async def _stored(ml: ManagedLedger) -> list[int | None]:
    """The highest sequence id of every stored entry, in order."""
    return [batch_sequence(p)[1] for _, p in await ml.read_entries(Position(-1, -1), 1_000)]


async def _open() -> tuple[FlakyClient, ManagedLedger]:
    client = FlakyClient()
    ml = await Env(client=client).factory().open("t", config(dedup=True))
    assert await _produce(ml, [1]) == [False]
    return client, ml


async def test_a_write_durable_despite_its_error_makes_the_retry_a_duplicate() -> None:
    client, ml = await _open()
    client.lose_replies = True
    with pytest.raises(ManagedLedgerError):
        await _produce(ml, [2])
    client.lose_replies = False
    with pytest.raises(SequenceInFlightError):  # not known yet whether 2 is stored
        await _produce(ml, [2])
    await ml.rollover()  # the recovery the failure started: it finds 2 and counts it
    assert await _produce(ml, [2]) == [True]
    assert await _produce(ml, [3]) == [False]
    assert await _stored(ml) == [1, 2, 3]


async def test_a_retry_waits_for_the_recovery_while_the_bookie_is_down() -> None:
    client, ml = await _open()
    client.fail_adds = BookieError(ErrorCode.UNAVAILABLE, "bookie down")
    client.fail_recover = True
    with pytest.raises(ManagedLedgerError):
        await _produce(ml, [2])
    await ml.rollover()  # the recovery fails: the ledger stays open in memory, 2 unresolved
    for _ in range(3):
        with pytest.raises(SequenceInFlightError):
            await _produce(ml, [2])
        await ml.rollover()
    client.fail_adds = None
    client.fail_recover = False
    with pytest.raises(SequenceInFlightError):  # this refusal starts the recovery again
        await _produce(ml, [2])
    await ml.rollover()
    assert await _produce(ml, [2]) == [False]  # 2 was lost: the retry is written
    assert await _stored(ml) == [1, 2]


async def test_appends_failed_while_no_ledger_opens_are_accepted_on_retry() -> None:
    client, ml = await _open()
    await ml.rollover()  # no ledger open: the next append waits for a new one
    client.fail_create = True
    with pytest.raises(ManagedLedgerError):
        await _produce(ml, [2, 3])
    client.fail_create = False
    assert await _produce(ml, [2, 3]) == [False, False]  # never written: not a duplicate
    assert await _produce(ml, [3]) == [True]
    assert await _stored(ml) == [1, 3]
