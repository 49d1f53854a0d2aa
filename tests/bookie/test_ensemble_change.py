"""The writer's ensemble change, replica reads and recovery over an ensemble history, on real
`BookieServer`s in the test's loop (tests/bookie/local_cluster.py) with the real ledger
lifecycle (`LedgerManager` over the in-memory metadata store, static placement)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable

import pytest

from bookie.client import BookieClientConfig, BookieLedgerClient
from bookie.errors import BookieError, ErrorCode, FencedError
from bookie.ledger_metadata import LedgerState
from bookie.ledgers import LedgerManager, StaticPlacement, ledger_spec
from bookie.protocol import LEDGER, Op
from managed_ledger.metadata.memory import InMemoryMetadataStore
from tests.bookie.local_cluster import LocalBookie

BOUND_S = 20.0  # every wait below is bounded by this (far above what any step needs)


def payload(i: int) -> bytes:
    return b"entry-%05d" % i


def client_config(**overrides: float) -> BookieClientConfig:
    options: dict[str, float] = {"add_timeout_s": 0.5, "request_timeout_s": 60.0, **overrides}
    return BookieClientConfig(**options)  # type: ignore[arg-type]


class Cluster:
    def __init__(self, bookies: list[LocalBookie], client: BookieLedgerClient) -> None:
        self.bookies = bookies
        self.client = client
        self.store = InMemoryMetadataStore()
        self.manager = LedgerManager(
            self.store, client, placement=StaticPlacement([b.address for b in bookies])
        )

    def bookie(self, address: str) -> LocalBookie:
        return next(b for b in self.bookies if b.address == address)


@pytest.fixture
async def cluster() -> AsyncIterator[Cluster]:
    bookies = [await LocalBookie().start() for _ in range(4)]
    client = BookieLedgerClient(client_config())
    try:
        yield Cluster(bookies, client)
    finally:
        await client.close()
        for b in bookies:
            await b.stop()


async def add_all(add: Callable[[bytes], Awaitable[int]], count: int, start: int = 0) -> list[int]:
    async with asyncio.timeout(BOUND_S):
        return list(await asyncio.gather(*(add(payload(i)) for i in range(start, start + count))))


def payloads(count: int) -> list[bytes]:
    return [payload(i) for i in range(count)]


async def test_a_bookie_killed_mid_stream_is_replaced_and_no_add_fails(cluster: Cluster) -> None:
    handle = await cluster.manager.create(3, 2, 2)
    first = await add_all(handle.add_entry, 50)
    victim = handle.metadata.ensemble[1]
    in_flight = asyncio.ensure_future(add_all(handle.add_entry, 200, start=50))
    await asyncio.sleep(0)
    await cluster.bookie(victim).kill()
    rest = await in_flight
    assert first + rest == list(range(250))
    meta = cluster.store.get_ledger(handle.ledger_id)
    assert len(meta.ensembles) == 2 and meta.ensembles[0] == (0, handle.metadata.ensembles[0][1])
    start, bookies = meta.ensembles[1]
    assert 50 <= start <= 250 and victim not in bookies and victim in meta.ensemble
    assert handle.spec.ensembles == meta.ensembles  # the writer's spec follows the history
    closed = await cluster.manager.close(handle)
    assert closed.last_entry_id == 249 and closed.ensembles == meta.ensembles
    reader = BookieLedgerClient(client_config())
    try:
        async with asyncio.timeout(BOUND_S):
            assert await reader.read_entries(ledger_spec(closed), 0, 249) == [payload(i) for i in range(250)]
    finally:
        await reader.close()


async def test_a_paused_bookie_times_out_and_is_replaced(cluster: Cluster) -> None:
    handle = await cluster.manager.create(3, 2, 2)
    await add_all(handle.add_entry, 20)
    victim = cluster.bookie(handle.metadata.ensemble[0])
    victim.pause()
    await add_all(handle.add_entry, 100, start=20)  # waits one add timeout, then goes on
    meta = cluster.store.get_ledger(handle.ledger_id)
    assert len(meta.ensembles) == 2 and victim.address not in meta.ensembles[-1][1]
    victim.resume()  # its late replies must change nothing
    await add_all(handle.add_entry, 10, start=120)
    closed = await cluster.manager.close(handle)
    assert closed.last_entry_id == 129
    async with asyncio.timeout(BOUND_S):
        assert await cluster.client.read_entries(ledger_spec(closed), 0, 129) == [
            payload(i) for i in range(130)
        ]


async def test_a_bookie_down_at_create_is_replaced_before_the_first_add(cluster: Cluster) -> None:
    await cluster.bookies[0].kill()
    handle = await cluster.manager.create(3, 2, 2, ensemble=[b.address for b in cluster.bookies[:3]])
    assert await add_all(handle.add_entry, 10) == list(range(10))
    meta = cluster.store.get_ledger(handle.ledger_id)
    assert meta.ensembles == ((0, meta.ensemble),) and cluster.bookies[0].address not in meta.ensemble
    assert handle.metadata == meta


async def test_without_a_replacement_recovery_waits_for_the_write_set_then_closes_the_ledger(
    cluster: Cluster,
) -> None:
    await cluster.bookies[3].kill()
    handle = await cluster.manager.create(3, 2, 2, ensemble=[b.address for b in cluster.bookies[:3]])
    await add_all(handle.add_entry, 30)
    await cluster.bookies[2].kill()  # the only spare is dead too
    with pytest.raises(BookieError):
        await add_all(handle.add_entry, 30, start=30)
    # Entries after the failure reached one member of their write set: recovery may not close
    # the ledger with them on one bookie, and no bookie can take the dead one's place.
    with pytest.raises(BookieError):
        async with asyncio.timeout(BOUND_S):
            await cluster.manager.close(handle)
    assert cluster.store.get_ledger(handle.ledger_id).state == LedgerState.IN_RECOVERY
    await cluster.bookies[2].start()  # back (its entries kept): the next recovery completes
    async with asyncio.timeout(BOUND_S):
        closed = await cluster.manager.recover_and_close(handle.ledger_id)
    assert closed.state == LedgerState.CLOSED and 29 <= closed.last_entry_id < 60
    async with asyncio.timeout(BOUND_S):
        entries = await cluster.client.read_entries(ledger_spec(closed), 0, closed.last_entry_id)
    assert entries == [payload(i) for i in range(closed.last_entry_id + 1)]


async def test_a_fenced_writer_fails_without_an_ensemble_change(cluster: Cluster) -> None:
    handle = await cluster.manager.create(3, 2, 2)
    await add_all(handle.add_entry, 10)
    other = BookieLedgerClient(client_config())
    try:
        successor = LedgerManager(cluster.store, other)
        closed = await successor.recover_and_close(handle.ledger_id)
    finally:
        await other.close()
    with pytest.raises(FencedError):
        await handle.add_entry(b"too late")
    assert cluster.store.get_ledger(handle.ledger_id) == closed and len(closed.ensembles) == 1


async def test_reads_fall_through_a_replica_without_the_entry_and_one_that_hangs(cluster: Cluster) -> None:
    handle = await cluster.manager.create(2, 2, 2, ensemble=[b.address for b in cluster.bookies[:2]])
    await add_all(handle.add_entry, 20)
    closed = await cluster.manager.close(handle)
    spec = ledger_spec(closed)
    # The first replica loses the ledger: "no such entry" there falls through to the second.
    reply = await cluster.client._call(
        cluster.bookies[0].address, Op.DELETE_LEDGER, LEDGER.pack(spec.ledger_id)
    )
    assert reply[:2] == b"\x00\x00"
    async with asyncio.timeout(BOUND_S):
        assert await cluster.client.read_entries(spec, 0, 19) == [payload(i) for i in range(20)]
    # A replica that hangs: the request timeout is a minute and the bound far less, so the
    # reads must have gone on to the other replica after the speculative timeout.
    again = await cluster.manager.create(2, 2, 2, ensemble=[b.address for b in cluster.bookies[1:3]])
    await add_all(again.add_entry, 5)
    closed_again = await cluster.manager.close(again)
    cluster.bookies[1].pause()
    async with asyncio.timeout(BOUND_S):
        assert await cluster.client.read_entries(ledger_spec(closed_again), 0, 4) == [
            payload(i) for i in range(5)
        ]


async def test_recovery_reads_forward_through_the_history_and_rereplicates(cluster: Cluster) -> None:
    handle = await cluster.manager.create(3, 2, 2)
    await add_all(handle.add_entry, 40)
    await cluster.bookie(handle.metadata.ensemble[2]).kill()
    await add_all(handle.add_entry, 40, start=40)
    meta = cluster.store.get_ledger(handle.ledger_id)
    assert len(meta.ensembles) == 2
    # The writer "dies" with adds acknowledged; another client recovers from the history.
    other = BookieLedgerClient(client_config())
    try:
        async with asyncio.timeout(BOUND_S):
            closed = await LedgerManager(cluster.store, other).recover_and_close(handle.ledger_id)
            assert closed.last_entry_id == 79
            assert await other.read_entries(ledger_spec(closed), 0, 79) == [payload(i) for i in range(80)]
    finally:
        await other.close()


async def test_an_idle_ledger_whose_bookie_restarted_reconnects_and_keeps_its_ensemble(
    cluster: Cluster,
) -> None:
    # Three of the four bookies in the ensemble; the fourth is down, so no replacement exists:
    # only reconnecting to the restarted bookie lets the next add succeed.
    await cluster.bookies[3].kill()
    ensemble = [b.address for b in cluster.bookies[:3]]
    handle = await cluster.manager.create(3, 3, 3, ensemble=ensemble)
    assert await add_all(handle.add_entry, 10) == list(range(10))
    restarted = cluster.bookies[1]
    await restarted.kill()  # while the ledger is idle: no add is in flight
    await restarted.start()  # same port, same storage (MemoryStorage keeps its entries)
    assert await add_all(handle.add_entry, 10, start=10) == list(range(10, 20))
    meta = cluster.store.get_ledger(handle.ledger_id)
    assert meta.ensembles == ((0, tuple(ensemble)),)  # no ensemble change was needed
    closed = await cluster.manager.close(handle)
    assert closed.last_entry_id == 19
    async with asyncio.timeout(BOUND_S):
        stored = await cluster.client.read_entries(ledger_spec(closed), 0, 19)
    assert stored == payloads(20)
    # Every copy is on the restarted bookie too (write quorum 3 of 3).
    assert restarted.storage is not None
    assert [restarted.storage.read_entry(handle.ledger_id, i) for i in range(20)] == payloads(20)


async def test_an_idle_ledger_whose_bookie_came_back_as_another_instance_replaces_it(
    cluster: Cluster,
) -> None:
    # As above, but the bookie came back wiped and formatted (a new instance, same address): it
    # holds none of the entries it acknowledged, so keeping it would leave entries 0..9 on two
    # bookies of a 3/3/3 ledger while the metadata says three. The spare takes its place.
    ensemble = [b.address for b in cluster.bookies[:3]]
    handle = await cluster.manager.create(3, 3, 3, ensemble=ensemble)
    assert await add_all(handle.add_entry, 10) == list(range(10))
    wiped = cluster.bookies[1]
    await wiped.kill()
    wiped.storage = None  # wiped and formatted: a new instance under the same address
    await wiped.start()
    assert await add_all(handle.add_entry, 10, start=10) == list(range(10, 20))
    history = cluster.store.get_ledger(handle.ledger_id).history()
    assert len(history) == 2 and wiped.address not in history[-1][1], history
    assert cluster.store.get_ledger(handle.ledger_id).segment_instances(history[-1][0]) == {
        b.address: b.instance_id for b in cluster.bookies if b.address in history[-1][1]
    }


async def test_a_read_that_one_replica_lacks_and_another_cannot_answer_is_retriable(
    cluster: Cluster,
) -> None:
    # One replica has lost the ledger (wiped, or a replacement that never got it) while the
    # one that holds it is down: the entry exists, so the answer is "try again", never "no such
    # message" (which the REST API turns into a 404 for a message that was acknowledged).
    handle = await cluster.manager.create(2, 2, 2, ensemble=[b.address for b in cluster.bookies[:2]])
    await add_all(handle.add_entry, 5)
    closed = await cluster.manager.close(handle)
    lacking, holder = closed.ensemble
    reply = await cluster.client._call(lacking, Op.DELETE_LEDGER, LEDGER.pack(closed.ledger_id))
    assert reply[:2] == b"\x00\x00"
    await cluster.bookie(holder).kill()
    async with asyncio.timeout(BOUND_S):
        with pytest.raises(BookieError) as caught:
            await cluster.client.read_entries(ledger_spec(closed), 0, 4)
    assert caught.value.retriable, caught.value
    # Both replicas answering "not there" is a definite answer.
    await cluster.bookie(holder).start()
    reply = await cluster.client._call(holder, Op.DELETE_LEDGER, LEDGER.pack(closed.ledger_id))
    async with asyncio.timeout(BOUND_S):
        with pytest.raises(BookieError) as caught:
            await cluster.client.read_entries(ledger_spec(closed), 0, 4)
    assert not caught.value.retriable and caught.value.code == ErrorCode.NO_SUCH_LEDGER, caught.value
