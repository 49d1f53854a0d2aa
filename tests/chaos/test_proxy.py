"""The campaign's link proxy (`bench/chaos/proxy.py`) against a real echo server over TCP: what
passes when it is open, cut, one-way and held, and what happens when it heals."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest

from bench.chaos.proxy import Proxy

pytestmark = pytest.mark.timeout(30)


async def _echo(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    """Echoes every line, and counts the lines it was sent (`received`)."""
    while line := await reader.readline():
        received.append(line)
        writer.write(line)
        await writer.drain()
    writer.close()


received: list[bytes] = []


@pytest.fixture
async def proxy() -> AsyncIterator[Proxy]:
    received.clear()
    server = await asyncio.start_server(_echo, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    p = Proxy("echo", port)
    await p.start()
    yield p
    await p.close()
    server.close()


async def _connect(proxy: Proxy) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    return await asyncio.open_connection("127.0.0.1", proxy.port)


async def _answer(reader: asyncio.StreamReader, within_s: float) -> bytes | None:
    try:
        return await asyncio.wait_for(reader.readline(), within_s)
    except TimeoutError:
        return None


async def test_open_passes_both_ways(proxy: Proxy) -> None:
    reader, writer = await _connect(proxy)
    writer.write(b"one\n")
    assert await _answer(reader, 5) == b"one\n"
    writer.close()


async def test_a_cut_link_passes_nothing_until_it_heals_then_delivers_late(proxy: Proxy) -> None:
    reader, writer = await _connect(proxy)
    proxy.cut()
    writer.write(b"during\n")
    assert await _answer(reader, 0.5) is None
    assert received == []  # the server never saw it
    late_reader, late_writer = await _connect(proxy)  # a new connection is as silent
    late_writer.write(b"new\n")
    assert await _answer(late_reader, 0.3) is None
    proxy.heal()
    assert await _answer(reader, 5) == b"during\n"
    assert await _answer(late_reader, 5) == b"new\n"
    writer.close()
    late_writer.close()


async def test_one_way_applies_requests_and_loses_their_answers(proxy: Proxy) -> None:
    reader, writer = await _connect(proxy)
    proxy.one_way()
    writer.write(b"applied\n")
    assert await _answer(reader, 0.5) is None
    assert received == [b"applied\n"]  # the server did it
    proxy.heal()
    assert await _answer(reader, 5) == b""  # the connection is closed; the answer is gone
    reader, writer = await _connect(proxy)
    writer.write(b"after\n")
    assert await _answer(reader, 5) == b"after\n"
    writer.close()


async def test_hold_delivers_the_answers_late(proxy: Proxy) -> None:
    reader, writer = await _connect(proxy)
    proxy.hold()
    writer.write(b"late\n")
    assert await _answer(reader, 0.5) is None
    assert received == [b"late\n"]
    proxy.heal()
    assert await _answer(reader, 5) == b"late\n"
    writer.close()
