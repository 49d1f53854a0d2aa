"""The campaign's namespace links (`bench/chaos/netns.py`) with real processes: a line echo server
in a bookie's namespace, reached from this one over the data network, cut and cut one way and
healed, while its management link stays up. Root and iproute2 only (skipped without)."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import IO

import pytest

from bench.chaos.netns import Netns, NetnsLink, unavailable
from bench.common import free_port

pytestmark = pytest.mark.timeout(120)

ECHO = """
import socket, sys
server = socket.create_server((sys.argv[1], int(sys.argv[2])))
while True:
    conn, _ = server.accept()
    try:
        with conn, conn.makefile("rwb", buffering=0) as f:
            for line in f:
                print("got", line.decode().strip(), flush=True)
                f.write(line)
    except OSError:
        pass  # a connection destroyed: serve the next
"""
CONNECT = """
import socket, sys
with socket.create_connection((sys.argv[1], int(sys.argv[2])), timeout=5) as s:
    s.sendall(b"mgmt\\n")
    print(s.recv(100).decode().strip())
"""


@pytest.fixture
def namespace(tmp_path: Path) -> Iterator[tuple[Netns, NetnsLink, subprocess.Popen[str]]]:
    reason = unavailable()
    if reason is not None:
        pytest.skip(reason)
    netns = Netns(f"t{os.getpid()}")
    try:
        netns.start()
        link = netns.plan("bookie-0", 0, free_port())
        netns.make(link)
        server = subprocess.Popen(
            [*link.exec_prefix(), sys.executable, "-c", ECHO, link.host, str(link.port)],
            stdout=subprocess.PIPE, text=True,
        )  # fmt: skip
        try:
            yield netns, link, server
        finally:
            server.kill()
            server.wait(10)
    finally:
        netns.close()
    assert (
        link.namespace not in subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    )


def _connect(link: NetnsLink) -> socket.socket:
    deadline = time.monotonic() + 30
    while True:
        try:
            return socket.create_connection((link.host, link.port), timeout=2)
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.1)


def _echo(conn: socket.socket, line: bytes, wait_s: float) -> bytes | None:
    conn.settimeout(wait_s)
    conn.sendall(line)
    try:
        return conn.recv(100)
    except TimeoutError:
        return None


def _connected(link: NetnsLink, server: subprocess.Popen[str]) -> tuple[socket.socket, IO[str]]:
    """A connection through the link, proven by one round trip, and what the server says."""
    conn = _connect(link)
    assert _echo(conn, b"one\n", 10) == b"one\n"
    assert server.stdout is not None and server.stdout.readline().strip() == "got one"
    return conn, server.stdout


def test_a_cut_data_link_passes_nothing_until_healed_and_the_management_link_stays_up(
    namespace: tuple[Netns, NetnsLink, subprocess.Popen[str]],
) -> None:
    _netns, link, server = namespace
    conn, said = _connected(link, server)
    link.cut()
    assert _echo(conn, b"two\n", 1.0) is None  # nothing came back
    with pytest.raises(OSError):  # and no new connection gets through
        socket.create_connection((link.host, link.port), timeout=1)
    # The management link: from inside the namespace, a listener on its far end still answers.
    mgmt = socket.create_server((link.store_host, 0))
    port = mgmt.getsockname()[1]
    child = subprocess.Popen(
        [*link.exec_prefix(), sys.executable, "-c", CONNECT, link.store_host, str(port)],
        stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    peer, _ = mgmt.accept()
    with peer:
        assert peer.recv(100) == b"mgmt\n"
        peer.sendall(b"answered\n")
    out, _ = child.communicate(timeout=30)
    assert out.strip() == "answered"
    mgmt.close()
    link.heal()
    conn.settimeout(30)  # what was sent meanwhile arrives by TCP's retransmissions, late
    assert conn.recv(100) == b"two\n"
    assert said.readline().strip() == "got two"
    conn.close()


def test_one_way_lets_requests_in_and_loses_the_replies(
    namespace: tuple[Netns, NetnsLink, subprocess.Popen[str]],
) -> None:
    _netns, link, server = namespace
    conn, said = _connected(link, server)
    link.one_way()
    assert _echo(conn, b"two\n", 1.5) is None
    assert said.readline().strip() == "got two"  # the request arrived and was served
    link.heal()  # the connection with the lost reply is destroyed; a new one works
    conn.settimeout(30)
    try:
        late = conn.recv(100)
    except OSError:  # reset
        late = b""
    assert late == b""  # reset or closed: never the held reply
    fresh = _connect(link)
    assert _echo(fresh, b"three\n", 10) == b"three\n"
    fresh.close()
    conn.close()
