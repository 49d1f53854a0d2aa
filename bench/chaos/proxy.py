"""Links the campaign can break: a small TCP proxy in front of a listener, one per link.

`tc netem` is missing on this machine and every process shares one loopback interface, so a
network fault is made where the bytes pass: every client of a bookie reaches it through the
bookie's proxy (the bookie advertises the proxy's address), and each broker reaches PostgreSQL
through a proxy of its own. A proxy is in one of three states:

- `open`: bytes pass both ways;
- `cut` (a full partition): nothing passes either way, on the connections there are and on new
  ones (accepted, then silent), so each side waits for its timeouts as across a cut cable; when
  the link heals what was sent meanwhile arrives, late, as TCP's retransmissions would bring it;
- `one_way` (an asymmetric partition): requests still reach the server, but its replies are
  held back; when the link heals those connections are closed and the held replies dropped. The
  server applied what it was sent and the client never learns it: a PostgreSQL commit whose
  answer is lost, a bookie add that landed but was never acknowledged.

A `hold` is a one-way fault whose replies are delivered late instead of dropped (a slow link or
a stalled server answering late: the renewal that lands after the lease ended).

The proxies run on the campaign's event loop; the load they carry is the careful clients', a
few hundred requests a second at most.
"""

from __future__ import annotations

import asyncio
import contextlib
from dataclasses import dataclass, field

from bench.common import free_port

HOST = "127.0.0.1"
CHUNK = 64 * 1024
OPEN, CUT, ONE_WAY, HOLD = "open", "cut", "one_way", "hold"


@dataclass(eq=False)  # kept in a set, by identity
class _Link:
    """One client connection and its server connection."""

    client: asyncio.StreamWriter
    server: asyncio.StreamWriter
    tasks: list[asyncio.Task[None]] = field(default_factory=list)

    def close(self) -> None:
        for writer in (self.client, self.server):
            with contextlib.suppress(Exception):
                writer.transport.abort()
        for task in self.tasks:
            task.cancel()


class Proxy:
    """A proxy on a free loopback port (or one on `host`) in front of `target_port` on loopback;
    `state` says what passes."""

    def __init__(self, name: str, target_port: int, host: str = HOST) -> None:
        self.name = name
        self.target_port = target_port
        self.host = host
        self.port = free_port()
        self.state = OPEN
        self._links: set[_Link] = set()
        self._server: asyncio.AbstractServer | None = None
        self._requests_flow = asyncio.Event()
        self._replies_flow = asyncio.Event()
        self._requests_flow.set()
        self._replies_flow.set()

    @property
    def address(self) -> str:
        return f"{self.host}:{self.port}"

    async def start(self) -> None:
        self._server = await asyncio.start_server(self._accept, self.host, self.port)

    async def close(self) -> None:
        for link in list(self._links):
            link.close()
        if self._server is not None:
            self._server.close()
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self._server.wait_closed(), 5)

    def cut(self) -> None:
        self.state = CUT
        self._requests_flow.clear()
        self._replies_flow.clear()

    def one_way(self) -> None:
        self.state = ONE_WAY
        self._replies_flow.clear()

    def hold(self) -> None:
        self.state = HOLD
        self._replies_flow.clear()

    def heal(self) -> None:
        """Back to open: one-way links lose their held replies (closed), the others get what
        was held, late."""
        was, self.state = self.state, OPEN
        if was == ONE_WAY:
            for link in list(self._links):
                link.close()
        self._requests_flow.set()
        self._replies_flow.set()

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            s_reader, s_writer = await asyncio.wait_for(asyncio.open_connection(HOST, self.target_port), 5)
        except (OSError, TimeoutError):
            writer.transport.abort()
            return
        link = _Link(writer, s_writer)
        self._links.add(link)
        link.tasks = [
            asyncio.create_task(self._pipe(reader, s_writer, link, replies=False)),
            asyncio.create_task(self._pipe(s_reader, writer, link, replies=True)),
        ]
        await asyncio.gather(*link.tasks, return_exceptions=True)
        link.close()
        self._links.discard(link)

    async def _pipe(
        self, src: asyncio.StreamReader, dst: asyncio.StreamWriter, link: _Link, replies: bool
    ) -> None:
        try:
            while data := await src.read(CHUNK):
                # Held bytes wait here; what the sender sends after them waits in the socket.
                await (self._replies_flow if replies else self._requests_flow).wait()
                dst.write(data)
                await dst.drain()
        except (OSError, asyncio.IncompleteReadError):
            pass
        finally:
            link.close()
