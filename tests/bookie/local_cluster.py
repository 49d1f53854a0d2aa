"""Bookies served from the test's own event loop, which a test can kill, pause and restart.

A `LocalBookie` is a real `BookieServer` on a storage: `MemoryStorage` (fast; nothing survives
a kill) or the real engine on a directory of its own (a restart finds what was journaled).
`kill` drops every connection at once, as a process killed with -9 does; `pause` stops reading
requests (the bookie hangs, as under SIGSTOP: requests already read still finish); `resume`
reads again.

Each bookie answers with an instance id, as a real one answers with its cookie's: it stays the
same across restarts and changes when the storage is wiped (`storage = None` before `start`,
with `MemoryStorage`), as `quire bookie --format` gives a wiped disk a new instance.
"""

from __future__ import annotations

import uuid
from pathlib import Path

from bookie.server import BookieServer, ServerConfig
from bookie.storage.api import LedgerStorageApi
from bookie.storage.config import StorageConfig
from bookie.storage.engine import LedgerStorage
from tests.bookie.fakes import MemoryStorage
from tests.support import free_port


class LocalBookie:
    def __init__(self, data_dir: Path | None = None) -> None:
        self.data_dir = data_dir
        self.port = free_port()
        self.server: BookieServer | None = None
        self.storage: LedgerStorageApi | None = None
        self.paused = False
        self.instance_id = str(uuid.uuid4())

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def up(self) -> bool:
        return self.server is not None

    async def start(self) -> LocalBookie:
        if self.data_dir is None:
            if self.storage is None:
                self.storage = MemoryStorage()
                self.instance_id = str(uuid.uuid4())  # wiped (or new): a new instance
        else:
            config = StorageConfig(self.data_dir, disk_check_interval_s=3600, gc_interval_s=3600)
            engine = LedgerStorage(config, disk_usage=lambda _path: 0.1)
            await engine.start()
            self.storage = engine
        config = ServerConfig(port=self.port, max_requests_in_flight=1_000, instance_id=self.instance_id)
        self.server = BookieServer(self.storage, config)
        await self.server.start()
        self.paused = False
        return self

    async def kill(self) -> None:
        """Every connection dropped at once; with the real engine, its files are closed as they
        are (what was journaled survives, as after kill -9)."""
        server, self.server = self.server, None
        if server is None:
            return
        if server._server is not None:
            server._server.close()
        for conn in list(server.connections):
            if conn._transport is not None:
                conn._transport.abort()
        if isinstance(self.storage, LedgerStorage):
            await self.storage.close()
            self.storage = None

    def pause(self) -> None:
        assert self.server is not None
        self.paused = True
        for conn in list(self.server.connections):
            conn._stopping = True
            conn._update_reading()

    def resume(self) -> None:
        self.paused = False
        if self.server is None:
            return
        for conn in list(self.server.connections):
            conn._stopping = False
            conn._update_reading()

    async def stop(self) -> None:
        self.resume()
        await self.kill()
