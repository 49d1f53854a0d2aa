"""`quire standalone`: bookies, the compactor (when it exists) and the broker on one machine.

Like `pulsar standalone`: every part runs as a child process of this supervisor, sharing one
metadata store (SQLite under the data directory by default) and the settings. `--bookies N`
starts N bookies on consecutive ports from the bookie port, the first in `<data dir>/bookie`,
the others in `<data dir>/bookie-<i>`, so that replicated ledgers (`--ensemble-size`,
`--write-quorum`, `--ack-quorum`) can be tried, and a bookie killed, on one machine. Start
order: the bookies, waiting for each port; compactor; broker, waiting for its port. Stop order
is the reverse.

Metrics: the broker's are at `/metrics` of its HTTP port; each bookie and the compactor serve
theirs on a port of their own, which standalone always turns on: bookie i on
`QUIRE_BOOKIE_METRICS_PORT` + i (8000 + i when it is 0, BookKeeper's port), the compactor on
`QUIRE_COMPACTOR_METRICS_PORT` (when 0, the port after the last bookie's). Each child's
"started" line says where; ports that clash with each other or with the broker's refuse to start.

Supervision policy: a child that dies is reported with its exit code and the whole standalone
stops the others and exits 1 — restarting a bookie or broker behind the user's back would hide
the fault, and `quire standalone` is for one machine where the user sees the console. The one
exception is a bookie among several: its death is reported and the others carry on, since that
is what replication is for (the writers replace it); only when no bookie is left does the
standalone stop.
SIGINT (Ctrl-C) and SIGTERM stop every child cleanly (SIGTERM by pid, SIGKILL after a bounded
wait) and exit 0. Children are in their own sessions, so Ctrl-C reaches only this supervisor and
the order holds; on Linux each child also gets SIGTERM if the supervisor itself is killed.
"""

from __future__ import annotations

import contextlib
import importlib.util
import os
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from types import FrameType

from app.listen import probe
from app.settings import Settings

START_TIMEOUT_S = 60.0
DEFAULT_METRICS_PORT = 8000  # BookKeeper's prometheusStatsHttpPort
STOP_TIMEOUT_S = 10.0
POLL_INTERVAL_S = 0.2


@dataclass
class Child:
    name: str
    proc: subprocess.Popen[bytes]

    def alive(self) -> bool:
        return self.proc.poll() is None


def _die_with_parent() -> None:
    """In the child, before exec: SIGTERM when the supervisor dies (Linux prctl)."""
    with contextlib.suppress(Exception):
        import ctypes

        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG


def _port_open(host: str, port: int) -> bool:
    with contextlib.suppress(OSError), socket.create_connection((host, port), timeout=0.2):
        return True
    return False


def _say(message: str) -> None:
    print(f"quire standalone: {message}", file=sys.stderr, flush=True)


class Supervisor:
    def __init__(self, settings: Settings, bookies: int = 1) -> None:
        self.settings = settings
        self.bookie_count = bookies
        self.children: list[Child] = []
        self.stopping = False
        self.reported: set[int] = set()  # pids of dead bookies already reported
        data_dir = settings.data_dir.resolve()
        addresses = ",".join(f'"{settings.bookie_host}:{settings.bookie_port + i}"' for i in range(bookies))
        self.env = {
            **os.environ,
            "QUIRE_DATA_DIR": str(data_dir),
            "QUIRE_DATABASE_URL": settings.effective_database_url,
            "QUIRE_BOOKIES": f"[{addresses}]",
            "QUIRE_BOOKIE_HOST": settings.bookie_host,
            "QUIRE_BOOKIE_PORT": str(settings.bookie_port),
            "QUIRE_HOST": settings.host,
            "QUIRE_PORT": str(settings.port),
        }
        if not settings.bookies and bookies == 1:
            self.env.pop("QUIRE_BOOKIES")

    def spawn(self, name: str, *args: str, where: str = "") -> Child:
        proc = subprocess.Popen(
            [sys.executable, "-m", "app.cli", name, *args],
            env=self.env,
            start_new_session=True,
            preexec_fn=_die_with_parent if sys.platform.startswith("linux") else None,
        )
        child = Child(name, proc)
        self.children.append(child)
        _say(f"started {name} (pid {proc.pid}){where}")
        return child

    def wait_for_port(self, child: Child, host: str, port: int) -> None:
        deadline = time.monotonic() + START_TIMEOUT_S
        while not _port_open(host, port):
            if self.stopping:
                raise SystemExit(0)
            if not child.alive():
                code = child.proc.returncode
                # 2: it said what to change (a port, a setting); standalone exits as it did.
                raise SystemExit(
                    self.fail(f"{child.name} exited with code {code} at start", 2 if code == 2 else 1)
                )
            if time.monotonic() > deadline:
                raise SystemExit(
                    self.fail(f"{child.name} did not listen on {host}:{port} in {START_TIMEOUT_S}s")
                )
            time.sleep(POLL_INTERVAL_S)

    def start(self) -> None:
        s = self.settings
        bookie_metrics, compactor_metrics = metrics_ports(s, self.bookie_count)
        for i in range(self.bookie_count):
            bookie_dir = s.data_dir.resolve() / ("bookie" if i == 0 else f"bookie-{i}")
            bookie_dir.mkdir(parents=True, exist_ok=True)
            port, metrics = s.bookie_port + i, bookie_metrics[i]
            bookie = self.spawn(
                "bookie",
                *("--data-dir", str(bookie_dir), "--port", str(port), "--metrics-port", str(metrics)),
                where=f" on {s.bookie_host}:{port}, metrics at http://{s.bookie_host}:{metrics}/metrics",
            )
            self.wait_for_port(bookie, s.bookie_host, port)
        if importlib.util.find_spec("app.processes.compactor") is not None:
            self.spawn(
                "compactor",
                *("--metrics-port", str(compactor_metrics)),
                where=f", metrics at http://{s.host}:{compactor_metrics}/metrics",
            )
        broker = self.spawn("broker")
        self.wait_for_port(broker, s.host, s.port)
        scheme = "https" if s.tls_enabled else "http"
        _say(f"ready: {scheme}://{s.host}:{s.port} (data in {s.data_dir.resolve()})")

    def watch(self) -> int:
        """Block until a signal (0) or the death of a child the standalone cannot do without (1)."""
        while not self.stopping:
            for child in self.children:
                if child.alive():
                    continue
                death = f"{child.name} (pid {child.proc.pid}) exited with code {child.proc.returncode}"
                bookies = [c for c in self.children if c.name == "bookie"]
                if child.name != "bookie" or len(bookies) == 1 or not any(c.alive() for c in bookies):
                    return self.fail(death)
                if child.proc.pid not in self.reported:
                    self.reported.add(child.proc.pid)
                    alive = sum(1 for c in bookies if c.alive())
                    _say(f"{death}; {alive} of {len(bookies)} bookies left, carrying on")
            time.sleep(POLL_INTERVAL_S)
        return 0

    def fail(self, reason: str, code: int = 1) -> int:
        _say(f"{reason}; stopping everything")
        return code

    def stop_all(self) -> None:
        for child in reversed(self.children):
            if child.alive():
                with contextlib.suppress(ProcessLookupError):
                    os.kill(child.proc.pid, signal.SIGTERM)
                try:
                    child.proc.wait(timeout=STOP_TIMEOUT_S)
                except subprocess.TimeoutExpired:
                    _say(f"{child.name} (pid {child.proc.pid}) did not stop in {STOP_TIMEOUT_S}s; killing it")
                    with contextlib.suppress(ProcessLookupError):
                        os.kill(child.proc.pid, signal.SIGKILL)
                    child.proc.wait(timeout=STOP_TIMEOUT_S)
            _say(f"stopped {child.name} (exit code {child.proc.returncode})")

    def on_signal(self, signum: int, frame: FrameType | None) -> None:
        self.stopping = True


def metrics_ports(settings: Settings, bookies: int) -> tuple[list[int], int]:
    """The metrics port of each bookie, and the compactor's."""
    base = settings.bookie_metrics_port or DEFAULT_METRICS_PORT
    return [base + i for i in range(bookies)], settings.compactor_metrics_port or base + bookies


def port_clash(settings: Settings, bookies: int) -> str | None:
    """What is wrong with the ports the children would listen on, if anything."""
    bookie_metrics, compactor_metrics = metrics_ports(settings, bookies)
    named = [("the broker", settings.port)]
    named += [(f"bookie {i}", settings.bookie_port + i) for i in range(bookies)]
    named += [(f"bookie {i}'s metrics", port) for i, port in enumerate(bookie_metrics)]
    named.append(("the compactor's metrics", compactor_metrics))
    seen: dict[int, str] = {}
    for name, port in named:
        if port > 65535:
            return f"{name} would listen past port 65535 ({port})"
        if port in seen:
            return f"{name} and {seen[port]} would both listen on port {port}"
        seen[port] = name
    return None


def probe_ports(settings: Settings, bookies: int) -> None:
    """Every port the children will listen on, bound and let go: one taken is one line naming
    its setting and exit 2 before anything starts (a child would say the same, later)."""
    bookie_metrics, compactor_metrics = metrics_ports(settings, bookies)
    wanted = [(settings.host, settings.port, "HTTP", "QUIRE_PORT (--port)")]
    if settings.kafka_port:
        kafka_host = settings.kafka_host or settings.host
        wanted.append((kafka_host, settings.kafka_port, "Kafka", "QUIRE_KAFKA_PORT (--kafka-port; 0: off)"))
    if settings.pulsar_port:
        pulsar_host = settings.pulsar_host or settings.host
        wanted.append(
            (pulsar_host, settings.pulsar_port, "Pulsar", "QUIRE_PULSAR_PORT (--pulsar-port; 0: off)")
        )
    for i in range(bookies):
        wanted.append(
            (
                settings.bookie_host,
                settings.bookie_port + i,
                f"bookie {i}",
                "QUIRE_BOOKIE_PORT (--bookie-port)",
            )
        )
        wanted.append(
            (settings.bookie_host, bookie_metrics[i], f"bookie {i}'s metrics", "QUIRE_BOOKIE_METRICS_PORT")
        )
    wanted.append(
        (settings.host, compactor_metrics, "the compactor's metrics", "QUIRE_COMPACTOR_METRICS_PORT")
    )
    for host, port, what, setting in wanted:
        probe(host, port, process="standalone", what=what, setting=setting)


def run(settings: Settings, bookies: int = 1) -> None:
    if bookies < 1 or bookies < settings.ensemble_size:
        _say(f"--bookies {bookies}: a ledger needs ensemble_size={settings.ensemble_size} distinct bookies")
        raise SystemExit(2)
    if settings.bookie_port + bookies - 1 > 65535:
        _say(f"--bookies {bookies} from port {settings.bookie_port} runs past port 65535")
        raise SystemExit(2)
    clash = port_clash(settings, bookies)
    if clash is not None:
        _say(f"{clash}: set QUIRE_BOOKIE_METRICS_PORT, QUIRE_COMPACTOR_METRICS_PORT or --port apart")
        raise SystemExit(2)
    probe_ports(settings, bookies)
    Path(settings.data_dir).mkdir(parents=True, exist_ok=True)
    supervisor = Supervisor(settings, bookies)
    signal.signal(signal.SIGINT, supervisor.on_signal)
    signal.signal(signal.SIGTERM, supervisor.on_signal)
    code = 1
    try:
        supervisor.start()
        code = supervisor.watch()
    except SystemExit as exc:
        code = int(exc.code or 0)
    finally:
        supervisor.stop_all()
    raise SystemExit(code)
