"""The processes `make bench-scale` measures, started through devtools (free ports, own process
groups, bounded waits, QUIRE_PULSAR_PORT=0): a `quire standalone` on SQLite that can be
restarted on its data directory, and three brokers with one bookie on a fresh PostgreSQL schema
(`bench.brokers_stack`, which drops the schema on close). Each exposes the same three things:
its base URLs, the pids of its brokers, and close()."""

from __future__ import annotations

from pathlib import Path

from bench.brokers_stack import BrokerStack, broker_stack
from bench.scale.load import broker_pids
from devtools.procs import Proc, free_port
from tests.test_cli_standalone import free_port_run


class Standalone:
    def __init__(self, tmp: Path) -> None:
        tmp.mkdir(parents=True, exist_ok=True)
        port = free_port()
        args = ["standalone", "--data-dir", str(tmp / "data"), "--port", str(port)]
        args += ["--bookie-port", str(free_port_run(4))]
        env = {
            "QUIRE_BOOKIE_METRICS_PORT": str(free_port_run(4)),
            "QUIRE_COMPACTOR_METRICS_PORT": str(free_port()),
        }
        self.base = f"http://127.0.0.1:{port}"
        self.proc = Proc.quire(args, env, tmp / "standalone.log")
        self.start()

    def start(self) -> None:
        self.proc.start()
        try:
            self.proc.wait_ready(self.base, "standalone")
        except TimeoutError as exc:
            self.proc.stop()
            raise SystemExit(f"standalone not ready: {exc}\n{self.proc.log()[-3000:]}") from None
        except BaseException:
            self.proc.stop()
            raise

    def restart(self) -> None:
        """SIGTERM (a clean stop), then the same command on the same data directory."""
        self.proc.stop()
        self.start()

    @property
    def bases(self) -> list[str]:
        return [self.base]

    def pids(self) -> list[int]:
        return broker_pids(self.proc.pid)

    def close(self) -> None:
        self.proc.stop()


class Brokers:
    def __init__(self, tmp: Path, brokers: int = 3) -> None:
        self.stack: BrokerStack = broker_stack(tmp, brokers)

    @property
    def bases(self) -> list[str]:
        return list(self.stack.brokers)

    def pids(self) -> list[int]:
        return [p.pid for p in self.stack.brokers.values()]

    def kill9(self, base: str) -> None:
        self.stack.kill9_broker(base)

    def close(self) -> None:
        self.stack.close()
