"""Binding a process's listening ports, with one way to fail.

Every listener of every process (the broker's HTTP and Kafka ports, the bookie port, the metrics
ports of bookies, the compactor and auto-recovery, and any listener added later) binds its port
here, before the process does anything that takes time, and hands the socket to its server. A
port that cannot be bound or listened on (taken by another process, a privileged port, an
address this machine does not have) ends the process with one line on stderr naming the setting
to change, and exit code 2: the code of a usage or configuration error, as for a bad setting
(`app.cli`), and never a traceback.

Binding and listening are two steps: the port is bound at once, and listens only when its server
is about to serve, so a port that takes connections still means a process that answers them
(`quire standalone` waits for that). Two processes started at once on one port may both bind it
(SO_REUSEADDR, which lets a restarted process take its port back from TIME_WAIT); the second to
listen gets the same one line.
"""

from __future__ import annotations

import socket
import sys
from dataclasses import dataclass
from typing import NoReturn

EXIT_CONFIG = 2
BACKLOG = 2048


@dataclass
class BoundPort:
    """A TCP socket bound to `host:port` for one listener of `process`; `setting` is what a user
    changes to move it, `what` names the listener ("HTTP", "Kafka")."""

    sock: socket.socket
    host: str
    port: int
    process: str
    what: str
    setting: str

    def listening(self) -> socket.socket:
        """The socket, listening; one line and exit 2 when it cannot."""
        try:
            self.sock.listen(BACKLOG)
        except OSError as exc:
            self.sock.close()
            cannot_listen(self.process, self.what, self.host, self.port, self.setting, exc)
        return self.sock


def bind_tcp(host: str, port: int, *, process: str, what: str, setting: str) -> BoundPort:
    """A TCP socket bound to host:port, not listening yet; one line and exit 2 when it cannot be."""
    sock = None
    try:
        family, kind, proto, _, address = socket.getaddrinfo(host or None, port, type=socket.SOCK_STREAM)[0]
        sock = socket.socket(family, kind, proto)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(address)
    except OSError as exc:
        if sock is not None:
            sock.close()
        cannot_listen(process, what, host, port, setting, exc)
    return BoundPort(sock, host, port, process, what, setting)


def probe(host: str, port: int, *, process: str, what: str, setting: str) -> None:
    """Bind and listen on host:port and let go: for a port a child process or a later step will
    take, so that a taken one is said now. Whoever takes it later still goes through this module."""
    bind_tcp(host, port, process=process, what=what, setting=setting).listening().close()


def cannot_listen(process: str, what: str, host: str, port: int, setting: str, exc: OSError) -> NoReturn:
    """The one line and exit code 2, for a listener whose port could not be bound."""
    reason = exc.strerror or str(exc)
    print(
        f"quire {process}: cannot listen on {host or '*'}:{port} for {what} ({reason}): "
        f"set {setting} to a free port",
        file=sys.stderr,
        flush=True,
    )
    raise SystemExit(EXIT_CONFIG)
