"""The LedgerClient contract, run against every implementation: the in-memory client, the TCP
client on one real `quire bookie` process (E=Qw=Qa=1), and on three processes striped 3/2/2."""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import AsyncIterator, Callable, Iterator

import pytest

from bookie.api import LedgerClient
from bookie.client import BookieClientConfig, BookieLedgerClient
from bookie.errors import BookieError, FencedError, NoSuchEntryError, NoSuchLedgerError
from bookie.memory import InMemoryLedgerClient
from bookie.types import LedgerSpec
from tests.bookie.conftest import BookieProcess, start_bookie_process
from tests.kinds import kind

_ids = itertools.count(1)
SpecFactory = Callable[[], LedgerSpec]


@pytest.fixture(scope="module")
@kind("process")
def bookies(tmp_path_factory: pytest.TempPathFactory) -> Iterator[list[BookieProcess]]:
    tmp = tmp_path_factory.mktemp("bookies")
    procs: list[BookieProcess] = []
    try:
        for i in range(3):
            procs.append(start_bookie_process(tmp, f"bookie{i}"))
        yield procs
    finally:
        for p in procs:
            p.stop()


@pytest.fixture(
    params=[
        "memory",
        pytest.param("bookie", marks=pytest.mark.process),
        pytest.param("bookies-3-2-2", marks=pytest.mark.process),
    ]
)
async def subject(request: pytest.FixtureRequest) -> AsyncIterator[tuple[LedgerClient, SpecFactory]]:
    client: LedgerClient
    if request.param == "memory":
        client = InMemoryLedgerClient()
        ensemble: tuple[str, ...] = ("memory:0",)
        quorums = (1, 1)
    else:
        procs = request.getfixturevalue("bookies")
        # Small chunks so that reads of a few hundred entries take several READ_RANGEs.
        client = BookieLedgerClient(BookieClientConfig(read_chunk_entries=64, read_chunk_bytes=64 * 1024))
        if request.param == "bookie":
            ensemble, quorums = (procs[0].address,), (1, 1)
        else:
            ensemble, quorums = tuple(p.address for p in procs), (2, 2)

    def make_spec() -> LedgerSpec:
        return LedgerSpec(next(_ids), ensemble, *quorums)

    try:
        yield client, make_spec
    finally:
        await client.close()


def payload(i: int) -> bytes:
    return b"entry-%06d-" % i + bytes([i % 256]) * (i % 97)


async def test_adds_in_flight_get_dense_ids_in_order(subject: tuple[LedgerClient, SpecFactory]) -> None:
    client, make_spec = subject
    spec = make_spec()
    writer = await client.create_ledger(spec)
    completed: list[int] = []

    async def add(i: int) -> int:
        entry_id = await writer.add_entry(payload(i))
        completed.append(entry_id)
        return entry_id

    ids = await asyncio.gather(*(add(i) for i in range(500)))
    assert ids == list(range(500))
    assert completed == list(range(500))
    assert writer.last_add_confirmed == 499
    assert await client.read_entries(spec, 0, 499) == [payload(i) for i in range(500)]
    assert await writer.close() == 499


async def test_read_ranges(subject: tuple[LedgerClient, SpecFactory]) -> None:
    client, make_spec = subject
    spec = make_spec()
    writer = await client.create_ledger(spec)
    await asyncio.gather(*(writer.add_entry(payload(i)) for i in range(300)))
    assert await client.read_entries(spec, 100, 299) == [payload(i) for i in range(100, 300)]
    assert await client.read_entries(spec, 7, 7) == [payload(7)]
    with pytest.raises(NoSuchEntryError):
        await client.read_entries(spec, 250, 300)
    with pytest.raises(NoSuchEntryError):
        await client.read_entries(spec, 5, 4)


async def test_large_and_empty_entries(subject: tuple[LedgerClient, SpecFactory]) -> None:
    client, make_spec = subject
    spec = make_spec()
    writer = await client.create_ledger(spec)
    big = [bytes([i]) * (300 * 1024) for i in range(6)]
    await asyncio.gather(*(writer.add_entry(b) for b in [b"", *big, b""]))
    assert await client.read_entries(spec, 0, 7) == [b"", *big, b""]


async def test_last_add_confirmed(subject: tuple[LedgerClient, SpecFactory]) -> None:
    client, make_spec = subject
    spec = make_spec()
    writer = await client.create_ledger(spec)
    for i in range(5):
        await writer.add_entry(payload(i))
    assert writer.last_add_confirmed == 4
    # The bookies learn the LAC from the next add (piggybacked), so they may lag by one.
    assert 3 <= await client.read_last_add_confirmed(spec) <= 4
    with pytest.raises(NoSuchLedgerError):
        await client.read_last_add_confirmed(make_spec())


async def test_recover_fences_the_old_writer(subject: tuple[LedgerClient, SpecFactory]) -> None:
    client, make_spec = subject
    spec = make_spec()
    writer = await client.create_ledger(spec)
    await asyncio.gather(*(writer.add_entry(payload(i)) for i in range(20)))
    assert await client.recover(spec) == 19
    with pytest.raises(FencedError):
        await writer.add_entry(b"too late")
    with pytest.raises(BookieError):
        await writer.add_entry(b"and after")
    assert await client.read_entries(spec, 0, 19) == [payload(i) for i in range(20)]
    assert await client.recover(spec) == 19  # idempotent


async def test_recover_unknown_ledger_is_empty(subject: tuple[LedgerClient, SpecFactory]) -> None:
    client, make_spec = subject
    assert await client.recover(make_spec()) == -1


async def test_delete(subject: tuple[LedgerClient, SpecFactory]) -> None:
    client, make_spec = subject
    spec = make_spec()
    writer = await client.create_ledger(spec)
    await writer.add_entry(b"a")
    await writer.close()
    await client.delete_ledger(spec)
    with pytest.raises(NoSuchLedgerError):
        await client.read_entries(spec, 0, 0)
    await client.delete_ledger(spec)  # idempotent
    await client.delete_ledger(make_spec())  # never existed


async def test_no_such_ledger_or_entry(subject: tuple[LedgerClient, SpecFactory]) -> None:
    client, make_spec = subject
    with pytest.raises(NoSuchLedgerError):
        await client.read_entries(make_spec(), 0, 0)
    spec = make_spec()
    writer = await client.create_ledger(spec)
    await writer.add_entry(b"only")
    with pytest.raises(NoSuchEntryError):
        await client.read_entries(spec, 1, 1)


async def test_closed_writer_refuses_adds(subject: tuple[LedgerClient, SpecFactory]) -> None:
    client, make_spec = subject
    writer = await client.create_ledger(make_spec())
    await writer.add_entry(b"x")
    assert await writer.close() == 0
    with pytest.raises(BookieError):
        await writer.add_entry(b"y")


# --- ensemble history (the TCP client: the in-memory one has no bookies to replace) -------------
class _Replacer:
    """An `EnsembleChanger` that replaces failed bookies from a list of spares and records the
    segments it was asked for (what the ledger lifecycle would write to the metadata)."""

    def __init__(self, spares: list[str]) -> None:
        self.spares = spares
        self.segments: list[tuple[int, tuple[str, ...]]] = []

    async def __call__(
        self, first: int, ensemble: tuple[str, ...], failed: frozenset[str]
    ) -> tuple[str, ...]:
        new = tuple(self.spares.pop(0) if b in failed else b for b in ensemble)
        self.segments.append((first, new))
        return new


@pytest.mark.parametrize("quorums", [(1, 1, 1), (2, 2, 2), (2, 2, 1)], ids=lambda q: "-".join(map(str, q)))
async def test_a_failed_bookie_is_replaced_and_everything_follows_the_history(
    bookies: list[BookieProcess], quorums: tuple[int, int, int]
) -> None:
    e, qw, qa = quorums
    addresses = [p.address for p in bookies]
    spec = LedgerSpec(next(_ids), tuple(addresses[:e]), qw, qa)
    replacer = _Replacer(addresses[e:])
    client = BookieLedgerClient(BookieClientConfig(read_chunk_entries=16, add_timeout_s=2.0))
    reader = BookieLedgerClient(BookieClientConfig(read_chunk_entries=16))
    try:
        writer = await client.create_ledger(spec, replacer)
        await asyncio.gather(*(writer.add_entry(payload(i)) for i in range(30)))
        # The connection to the last bookie of the ensemble breaks with adds in flight (sent
        # now, as futures: an add first sent on a connection already closed reconnects instead).
        victim = spec.ensemble[-1]
        adds = [writer.add_entry_future(payload(i)) for i in range(30, 100)]
        client._connections[victim].close()
        assert await asyncio.gather(*adds) == list(range(30, 100))
        history = writer.spec.ensembles
        assert len(history) == 2 and history[1] == replacer.segments[-1] and victim not in history[1][1]
        assert 30 <= history[1][0] <= 100
        # Reads, LAC, recovery and deletion by another client that knows the history only.
        known = LedgerSpec(spec.ledger_id, spec.ensemble, qw, qa, history)
        assert await reader.read_entries(known, 0, 99) == [payload(i) for i in range(100)]
        assert await reader.read_last_add_confirmed(known) >= history[1][0] - 1
        assert await reader.recover(known) == 99
        with pytest.raises(FencedError):
            await writer.add_entry(b"too late")
        assert await reader.read_entries(known, 95, 99) == [payload(i) for i in range(95, 100)]
        await reader.delete_ledger(known)
        for address in known.bookies:
            one = LedgerSpec(spec.ledger_id, (address,))
            with pytest.raises(NoSuchLedgerError):
                await reader.read_entries(one, 0, 0)
    finally:
        await client.close()
        await reader.close()
