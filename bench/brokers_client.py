"""The HTTP client of `make bench-brokers`: keep-alive connections to any broker, following 307.

A Python load generator costs CPU on this 2-core machine, so the client is as thin as it can be
(raw HTTP/1.1 on asyncio streams, one connection per broker per worker, requests pre-encoded);
it is the same client in every row, so the rows' ratios compare the brokers, not the client.
It follows a 307 as HTTP clients do (same method and body, to `Location`), keeping the
connection to the owner open for the next redirect, and counts the redirects it followed.
"""

from __future__ import annotations

import asyncio
import contextlib
from urllib.parse import urlsplit

import httpx

from bench.http_load import Connection

MAX_REDIRECTS = 3
TOPIC_PATH = "/v1/topics/public/default"
LOOKUP_PATH = "/lookup/v2/topic/persistent/public/default"

# What a client sees of a broker that is gone or not answering: it retries.
TRANSIENT = (OSError, EOFError, TimeoutError, ValueError, IndexError, asyncio.IncompleteReadError)


class Client:
    """One worker's connections, by host:port; `redirects` counts the 307s it followed."""

    def __init__(self, timeout_s: float) -> None:
        self.timeout_s = timeout_s
        self._conns: dict[tuple[str, int], Connection] = {}
        self.redirects = 0
        self.requests = 0

    async def call(self, method: str, url: str, body: bytes = b"") -> tuple[int, bytes]:
        """(status, body) of the answer after following up to MAX_REDIRECTS 307s; a broken or
        silent connection raises one of TRANSIENT (and is dropped, the next call reconnects)."""
        self.requests += 1
        for _ in range(MAX_REDIRECTS + 1):
            parts = urlsplit(url)
            host, port = parts.hostname or "", parts.port or 80
            path = parts.path + (f"?{parts.query}" if parts.query else "")
            status, location, data = await self._once(host, port, method, path, body)
            if status != 307 or not location:
                return status, data
            self.redirects += 1
            url = location
        raise ValueError(f"more than {MAX_REDIRECTS} redirects for {method} {url}")

    async def _once(
        self, host: str, port: int, method: str, path: str, body: bytes
    ) -> tuple[int, str, bytes]:
        key = (host, port)
        conn = self._conns.get(key)
        try:
            if conn is None:
                reader, writer = await asyncio.wait_for(asyncio.open_connection(host, port), self.timeout_s)
                conn = self._conns[key] = Connection(reader, writer, f"{host}:{port}")
            return await asyncio.wait_for(conn.exchange(method, path, body), self.timeout_s)
        except BaseException:
            self._drop(key)
            raise

    def _drop(self, key: tuple[str, int]) -> None:
        conn = self._conns.pop(key, None)
        if conn is not None:
            with contextlib.suppress(Exception):
                conn.close()

    def close(self) -> None:
        for key in list(self._conns):
            self._drop(key)


def lookup(base: str, topic: str) -> str:
    """The owner's HTTP URL as `base` answers the lookup (assigning an owner if none)."""
    answer = httpx.get(f"{base}{LOOKUP_PATH}/{topic}", timeout=30).raise_for_status()
    return str(answer.json()["httpUrl"]).rstrip("/")


def put(base: str, path: str, body: object) -> None:
    """A setup call (topic, subscription) through any broker, following the 307."""
    httpx.put(f"{base}{path}", json=body, timeout=30, follow_redirects=True).raise_for_status()
