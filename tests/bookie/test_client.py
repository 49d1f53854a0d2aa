"""The TCP ledger client when the world goes wrong: silent bookies, dead bookies, restarts,
a bookie lost from a replicated ensemble, partial writes found by recovery, and use from plain
synchronous code across event loops (as Spark tasks do)."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest

from bookie.client import BookieClientConfig, BookieLedgerClient
from bookie.errors import BookieError, ErrorCode
from bookie.types import LedgerSpec
from tests.bookie.conftest import BookieProcess, ThreadBookie, start_bookie_process
from tests.kinds import kind
from tests.support import free_port


@pytest.fixture
async def silent_bookie() -> AsyncIterator[str]:
    """Accepts connections, reads everything, never answers."""

    async def swallow(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        with contextlib.suppress(ConnectionError):
            while await reader.read(65536):
                pass
        writer.close()

    server = await asyncio.start_server(swallow, "127.0.0.1", 0)
    try:
        yield f"127.0.0.1:{server.sockets[0].getsockname()[1]}"
    finally:
        server.close()


@pytest.fixture
@kind("process")
def three_bookies(tmp_path: Path) -> Iterator[list[BookieProcess]]:
    procs: list[BookieProcess] = []
    try:
        for i in range(3):
            procs.append(start_bookie_process(tmp_path, f"b{i}"))
        yield procs
    finally:
        for p in procs:
            p.stop()


async def test_request_timeout_fails_the_writer(silent_bookie: str) -> None:
    client = BookieLedgerClient(BookieClientConfig(request_timeout_s=0.2))
    writer = await client.create_ledger(LedgerSpec(1, (silent_bookie,)))
    with pytest.raises(BookieError) as info:
        await writer.add_entry(b"x")
    assert info.value.code == ErrorCode.TIMEOUT and info.value.retriable
    with pytest.raises(BookieError):
        await writer.add_entry(b"y")  # a failed writer stays failed
    with pytest.raises(BookieError) as info:
        await client.read_last_add_confirmed(LedgerSpec(1, (silent_bookie,)))
    assert info.value.code == ErrorCode.TIMEOUT
    await client.close()


async def test_nobody_listening_is_unavailable() -> None:
    client = BookieLedgerClient(BookieClientConfig(connect_timeout_s=2))
    spec = LedgerSpec(1, (f"127.0.0.1:{free_port()}",))
    with pytest.raises(BookieError) as info:
        await client.create_ledger(spec)
    assert info.value.code == ErrorCode.UNAVAILABLE and info.value.retriable
    with pytest.raises(BookieError) as info:
        await client.read_entries(spec, 0, 0)
    assert info.value.code == ErrorCode.UNAVAILABLE
    await client.close()


async def test_reconnects_after_bookie_restart(bookie_process: BookieProcess) -> None:
    client = BookieLedgerClient()
    spec = LedgerSpec(7, (bookie_process.address,))
    writer = await client.create_ledger(spec)
    assert await asyncio.gather(*(writer.add_entry(b"%d" % i) for i in range(50))) == list(range(50))
    bookie_process.kill9()
    with pytest.raises(BookieError) as info:
        await writer.add_entry(b"lost")
    assert info.value.code == ErrorCode.UNAVAILABLE
    bookie_process.start()
    assert await client.read_entries(spec, 0, 49) == [b"%d" % i for i in range(50)]
    assert await client.recover(spec) == 49
    await client.close()


def test_usable_from_sync_code_across_event_loops(bookie_process: BookieProcess) -> None:
    client = BookieLedgerClient()  # built outside any loop: no side effects
    spec = LedgerSpec(8, (bookie_process.address,))

    async def write() -> int:
        writer = await client.create_ledger(spec)
        await asyncio.gather(*(writer.add_entry(b"e%d" % i) for i in range(10)))
        return await writer.close()

    assert asyncio.run(write()) == 9
    assert asyncio.run(client.read_entries(spec, 0, 9)) == [b"e%d" % i for i in range(10)]
    asyncio.run(client.close())


async def test_ack_quorum_survives_one_lost_bookie(three_bookies: list[BookieProcess]) -> None:
    """E=3, Qw=3, Qa=2: with one bookie killed, adds still reach two acks; recovery fences the
    two that are left and finds the last entry; reads fall back to live bookies."""
    client = BookieLedgerClient(BookieClientConfig(connect_timeout_s=2))
    spec = LedgerSpec(9, tuple(b.address for b in three_bookies), 3, 2)
    writer = await client.create_ledger(spec)
    await asyncio.gather(*(writer.add_entry(b"a%d" % i) for i in range(30)))
    three_bookies[1].kill9()
    assert await asyncio.gather(*(writer.add_entry(b"a%d" % i) for i in range(30, 60))) == list(range(30, 60))
    assert await client.recover(spec) == 59
    assert await client.read_entries(spec, 0, 59) == [b"a%d" % i for i in range(60)]
    await client.close()


async def test_write_quorum_loss_fails_a_suffix_in_order(three_bookies: list[BookieProcess]) -> None:
    """E=3, Qw=2, Qa=2: once a bookie is gone, the first entry striped onto it fails and so does
    every later one, callers complete in id order."""
    client = BookieLedgerClient(BookieClientConfig(connect_timeout_s=2))
    spec = LedgerSpec(10, tuple(b.address for b in three_bookies), 2, 2)
    writer = await client.create_ledger(spec)
    await writer.add_entry(b"first")
    three_bookies[2].kill9()
    outcomes: list[tuple[int, str]] = []

    async def add(i: int) -> None:
        try:
            outcomes.append((i, f"ok {await writer.add_entry(b'x')}"))
        except BookieError as exc:
            outcomes.append((i, exc.code.name))

    await asyncio.gather(*(add(i) for i in range(1, 10)))
    assert [i for i, _ in outcomes] == list(range(1, 10))  # completion order is id order
    # Entry 1's write set is bookies 1 and 2: it fails, and every entry after it.
    assert all(result == "UNAVAILABLE" for _, result in outcomes)
    # Each of those entries did reach the live member of its write set, and a failed add may
    # still be part of the recovered ledger (as in BookKeeper): recovery keeps all of them. But
    # it does not close the ledger with an entry on one bookie: while the other member is down,
    # recovery fails (the ledger stays in recovery); once it is back, recovery copies them.
    with pytest.raises(BookieError) as info:
        await client.recover(spec)
    assert info.value.code == ErrorCode.UNAVAILABLE and "fewer than the ack quorum" in str(info.value)
    three_bookies[2].start()
    assert await client.recover(spec) == 9
    assert await client.read_entries(spec, 0, 9) == [b"first"] + [b"x"] * 9
    await client.close()


async def test_recovery_completes_a_partial_write(three_bookies: list[BookieProcess]) -> None:
    """An entry the writer got onto only one bookie of its write set (it died mid-add) is found
    by recovery and re-added to the rest of the write set."""
    client = BookieLedgerClient()
    ensemble = tuple(b.address for b in three_bookies)
    spec = LedgerSpec(11, ensemble, 2, 2)
    writer = await client.create_ledger(spec)
    await asyncio.gather(*(writer.add_entry(b"p%d" % i) for i in range(4)))
    # Entry 4 goes to ensemble[1] and ensemble[2]; write it to ensemble[1] alone.
    lone = LedgerSpec(11, (ensemble[1],))
    conn = await client.connection(ensemble[1])
    future: asyncio.Future[bytes] = asyncio.get_running_loop().create_future()
    conn.send_add(11, 4, 3, b"p4", 0, lambda f, body: f.set_result(body), future)
    assert (await future)[:2] == b"\x00\x00"
    assert (await client.bookie_last_entry(ensemble[2], 11))[0] == 2  # it holds entries 1 and 2
    assert await client.recover(spec) == 4
    assert (await client.bookie_last_entry(ensemble[2], 11))[0] == 4
    assert await client.read_entries(LedgerSpec(11, (ensemble[2],)), 4, 4) == [b"p4"]
    assert await client.read_entries(lone, 4, 4) == [b"p4"]
    stats = await client.bookie_stats(ensemble[0])
    assert stats["server"]["connections"] >= 1  # type: ignore[index]
    await client.close()


async def test_recovery_stops_at_the_first_gap(bookie_process: BookieProcess) -> None:
    """Entries 0..2 and 4 stored, 3 missing: nothing after a gap can have been acknowledged."""
    client = BookieLedgerClient()
    conn = await client.connection(bookie_process.address)
    for entry_id in (0, 1, 2, 4):
        future: asyncio.Future[bytes] = asyncio.get_running_loop().create_future()
        conn.send_add(21, entry_id, -1, b"g%d" % entry_id, 0, lambda f, body: f.set_result(body), future)
        assert (await future)[:2] == b"\x00\x00"
    spec = LedgerSpec(21, (bookie_process.address,))
    assert await client.bookie_last_entry(bookie_process.address, 21) == (4, -1)
    assert await client.recover(spec) == 2
    assert await client.read_entries(spec, 0, 2) == [b"g0", b"g1", b"g2"]
    await client.close()


async def test_close_waits_for_adds_whose_callers_gave_up(memory_bookie: ThreadBookie) -> None:
    gate = asyncio.Event()
    memory_bookie.loop.call_soon_threadsafe(setattr, memory_bookie.storage, "add_gate", gate)
    client = BookieLedgerClient()
    writer = await client.create_ledger(LedgerSpec(30, (memory_bookie.address,)))
    tasks = [asyncio.ensure_future(writer.add_entry(b"c%d" % i)) for i in range(10)]
    await asyncio.sleep(0)  # the adds are sent
    for task in tasks:
        task.cancel()
    closing = asyncio.ensure_future(writer.close())
    await asyncio.sleep(0.05)  # not an assertion: give close() a chance to finish too early
    assert not closing.done()
    memory_bookie.loop.call_soon_threadsafe(gate.set)
    assert await asyncio.wait_for(closing, 10) == 9
    await client.close()


async def test_healthy_tells_a_live_bookie_from_a_dead_or_silent_one(
    bookie_process: BookieProcess, silent_bookie: str
) -> None:
    live = bookie_process.address
    dead = f"127.0.0.1:{free_port()}"
    for bookies, expected in [((live,), True), ((live, dead), False), ((silent_bookie,), False)]:
        client = BookieLedgerClient(BookieClientConfig(bookies=bookies, health_timeout_s=0.5))
        try:
            assert await client.healthy() is expected, bookies
        finally:
            await client.close()
    # A list given (the registry's serving bookies) replaces the configured one; at least
    # `health_min_bookies` of it must answer, and an empty list is not healthy.
    config = BookieClientConfig(bookies=(dead,), health_timeout_s=0.5, health_min_bookies=1)
    client = BookieLedgerClient(config)
    try:
        assert await client.healthy() is False
        assert await client.healthy([dead, live]) is True
        assert await client.healthy([]) is False
    finally:
        await client.close()
