"""HTTP load for the API bench: wrk for closed-loop throughput, a tiny keep-alive client for the
paced (open-loop) latency rows and the consume loop.

Why wrk: a Python load generator on this 2-core machine costs more per request than the server
under test, so it measured itself (an earlier run reported 763 req/s where wrk saw 4,000). wrk is
C, event-driven, one thread; it drives the empty-endpoint ceiling and Quire alike, so their ratio
is fair. The `done` hook below prints wrk's own totals as one parseable line.
"""

from __future__ import annotations

import asyncio
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

# Headers every request of the bench sends (an Authorization header when the broker asks for
# tokens: bench.bench_api --auth-compare).
EXTRA_HEADERS: dict[str, str] = {}

_SCRIPT = """
wrk.method = "{method}"
wrk.headers["Content-Type"] = "application/json"
{headers}
wrk.body = [==[{body}]==]
done = function(summary, latency, requests)
  local e = summary.errors
  io.write(string.format("QUIRE-WRK %d %d %d %d %d %d\\n", summary.requests, summary.duration,
    e.status, e.connect + e.read + e.write + e.timeout, latency:percentile(50), latency:percentile(99)))
end
"""


@dataclass(frozen=True)
class WrkResult:
    requests_per_s: float
    non_2xx: int
    socket_errors: int
    p50_ms: float
    p99_ms: float


def wrk_path() -> str | None:
    return shutil.which("wrk")


def run_wrk(url: str, method: str, body: bytes, connections: int, duration_s: float) -> WrkResult:
    """Closed loop: `connections` keep-alive connections, each sending the next request as soon as
    the last answer is in, for duration_s; one wrk thread (the other core is the server's)."""
    wrk = wrk_path()
    if wrk is None:
        raise RuntimeError("wrk is not installed (apt-get install wrk)")
    text = body.decode()
    assert "]==]" not in text, "the body would end the Lua long string"
    with tempfile.TemporaryDirectory(prefix="quire-wrk-") as tmp:
        script = Path(tmp) / "req.lua"
        headers = "\n".join(f'wrk.headers["{k}"] = "{v}"' for k, v in EXTRA_HEADERS.items())
        script.write_text(_SCRIPT.format(method=method, body=text, headers=headers))
        args = [wrk, "-t1", f"-c{connections}", f"-d{duration_s:g}s", "-s", str(script), url]
        out = subprocess.run(args, capture_output=True, text=True, timeout=duration_s + 60, check=True)
    line = next(x for x in out.stdout.splitlines() if x.startswith("QUIRE-WRK "))
    requests, duration_us, status_errors, socket_errors, p50_us, p99_us = map(int, line.split()[1:])
    ok = requests - status_errors
    return WrkResult(ok / (duration_us / 1e6), status_errors, socket_errors, p50_us / 1000, p99_us / 1000)


class Connection:
    """One keep-alive HTTP/1.1 connection; answers must carry Content-Length (Quire's do)."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, host: str) -> None:
        self.reader, self.writer, self.host = reader, writer, host

    @classmethod
    async def open(cls, host: str, port: int) -> Connection:
        reader, writer = await asyncio.open_connection(host, port)
        return cls(reader, writer, host)

    async def request(self, method: str, path: str, body: bytes = b"") -> tuple[int, bytes]:
        status, _, data = await self.exchange(method, path, body)
        return status, data

    async def exchange(self, method: str, path: str, body: bytes = b"") -> tuple[int, str, bytes]:
        """One request: (status, its Location header or "", body)."""
        head = (
            f"{method} {path} HTTP/1.1\r\nHost: {self.host}\r\nContent-Type: application/json\r\n"
            + "".join(f"{k}: {v}\r\n" for k, v in EXTRA_HEADERS.items())
            + f"Content-Length: {len(body)}\r\n\r\n"
        ).encode()
        self.writer.write(head + body)
        status = int((await self.reader.readline()).split()[1])
        length, location = 0, ""
        while True:
            line = await self.reader.readline()
            if line in (b"\r\n", b""):
                break
            name = line[: line.find(b":")].lower()
            if name == b"content-length":
                length = int(line[15:])
            elif name == b"location":
                location = line[9:].strip().decode()
        return status, location, (await self.reader.readexactly(length)) if length else b""

    def close(self) -> None:
        self.writer.close()
