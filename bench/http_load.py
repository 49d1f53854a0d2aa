"""A small keep-alive HTTP/1.1 load generator for the API bench (asyncio + uvloop, several
processes). httpx costs more per request than the server under test does; this client only
writes a request and reads a Content-Length response, so the same generator can measure the
empty-endpoint ceiling and Quire, and the ratio between them is fair."""

from __future__ import annotations

import asyncio
import multiprocessing as mp
import time
from dataclasses import dataclass


@dataclass(frozen=True)
class Job:
    host: str
    port: int
    method: str
    path: str
    body: bytes
    connections: int
    duration_s: float


class Connection:
    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, host: str) -> None:
        self.reader, self.writer, self.host = reader, writer, host

    @classmethod
    async def open(cls, host: str, port: int) -> Connection:
        reader, writer = await asyncio.open_connection(host, port)
        return cls(reader, writer, host)

    async def request(self, method: str, path: str, body: bytes = b"") -> tuple[int, bytes]:
        head = (
            f"{method} {path} HTTP/1.1\r\nHost: {self.host}\r\nContent-Type: application/json\r\n"
            f"Content-Length: {len(body)}\r\n\r\n"
        ).encode()
        self.writer.write(head + body)
        status = int((await self.reader.readline()).split()[1])
        length = 0
        while True:
            line = await self.reader.readline()
            if line in (b"\r\n", b""):
                break
            if line[:15].lower() == b"content-length:":
                length = int(line[15:])
        return status, (await self.reader.readexactly(length)) if length else b""

    def close(self) -> None:
        self.writer.close()


async def _loop(job: Job) -> tuple[int, int]:
    conns = [await Connection.open(job.host, job.port) for _ in range(job.connections)]
    deadline = time.perf_counter() + job.duration_s
    ok = errors = 0

    async def one(conn: Connection) -> None:
        nonlocal ok, errors
        while time.perf_counter() < deadline:
            status, _ = await conn.request(job.method, job.path, job.body)
            if status < 300:
                ok += 1
            else:
                errors += 1

    await asyncio.gather(*(one(c) for c in conns))
    for c in conns:
        c.close()
    return ok, errors


def _run(job: Job) -> tuple[int, int]:
    import uvloop

    return uvloop.run(_loop(job))


def run_closed_loop(job: Job, processes: int) -> tuple[float, int]:
    """Requests/s over all processes (each with job.connections connections), and errors."""
    ctx = mp.get_context("spawn")
    with ctx.Pool(processes) as pool:
        results = pool.map(_run, [job] * processes)
    # Each worker runs for job.duration_s once connected (its own deadline), so the rate is
    # counted over that, not over the pool's start-up.
    return sum(r[0] for r in results) / job.duration_s, sum(r[1] for r in results)
