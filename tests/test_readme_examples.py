"""The README's examples run as written: every shell block (and the Python one) is run by a test
here, with its ports, paths and database moved to free ones, and what its comments say a command
prints is checked against what it printed. A new block with no test fails
`test_every_block_is_exercised`, so an example cannot rot unseen.

How a block's comments are read (`expected_fragments`): a full-line comment whose text starts
like output (`{`, `[`, `"`, a digit) is output; `...` in it stands for anything; white space is
ignored (the admin CLI indents its JSON) and a trailing `  (remark)` is not output. Other comments
are prose; a fragment of punctuation alone between two `...` is not checked.
"""

from __future__ import annotations

import contextlib
import os
import re
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.support import REPO, QuireProcess, free_port, wait_until

pytestmark = [pytest.mark.timeout(300)]
BIN = Path(sys.executable).parent
FENCE = re.compile(r"^```(\w*)\n(.*?)^```", re.M | re.S)
OUTPUT_START = re.compile(r'^\s*[{\["0-9]')


@dataclass(frozen=True)
class Block:
    lang: str
    text: str

    @property
    def first(self) -> str:
        return self.text.splitlines()[0]


def readme_blocks() -> list[Block]:
    text = (REPO / "README.md").read_text()
    return [Block(m[1], m[2]) for m in FENCE.finditer(text) if m[1] in ("sh", "bash", "python")]


# Each block, by its first line: the test that runs it, or why none does.
EXERCISED = {
    "make run": "run by CI itself (.ci/run calls make test; make run is quire standalone, run below)",
    "Q=http://127.0.0.1:8080": "test_first_session_admin_cli_python_and_kafka",
    "quire admin topics list public/default": "test_first_session_admin_cli_python_and_kafka",
    "from quire_client import Client": "test_first_session_admin_cli_python_and_kafka",
    "import pulsar": "test_first_session_admin_cli_python_and_kafka",
    "quire standalone --bookies 4": "test_replicated_ledgers_survive_a_killed_bookie",
    "# produce two keyed records with kcat": "test_first_session_admin_cli_python_and_kafka",
    "# an empty PostgreSQL database first": "test_several_brokers_on_one_machine",
    "# a key, and tokens for three roles": "test_security_session",
}


def _block(first: str) -> Block:
    found = [b for b in readme_blocks() if b.first.startswith(first)]
    assert len(found) == 1, f"README block starting {first!r}: found {len(found)}"
    return found[0]


def test_every_block_is_exercised() -> None:
    unexercised = [b.first for b in readme_blocks() if not any(b.first.startswith(k) for k in EXERCISED)]
    assert not unexercised, f"README blocks no test runs (add them to EXERCISED): {unexercised}"


def expected_fragments(text: str) -> list[str]:
    fragments = []
    for line in text.splitlines():
        if not line.startswith("#") or not OUTPUT_START.match(line[1:]):
            continue
        body = re.sub(r"\s{2,}\([^)]*\)\s*$", "", line[1:])
        # a fragment of punctuation alone (what is left of `},...]}`) says nothing
        fragments += [re.sub(r"\s", "", part) for part in body.split("...") if re.search(r"\w", part)]
    return fragments


def assert_printed(block_text: str, output: str) -> None:
    """Each expected fragment, in order, in what the block printed (white space ignored)."""
    flat = re.sub(r"\s", "", output)
    at = 0
    for fragment in expected_fragments(block_text):
        found = flat.find(fragment.strip(","), at)
        assert found >= 0, f"README says {fragment!r}; the block printed:\n{output[-4000:]}"
        at = found + len(fragment.strip(","))


def moved(text: str, ports: dict[int, int], paths: dict[str, str]) -> str:
    for path, to in paths.items():
        text = text.replace(path, to)
    return re.sub(r"(?<![\d.])(\d{4,5})(?!\d)", lambda m: str(ports.get(int(m[1]), m[1])), text)


def free_ports(*wanted: int) -> dict[int, int]:
    """README port -> a free port, keeping their order (lists sorted by address stay sorted)."""
    return dict(zip(sorted(wanted), sorted(free_port() for _ in wanted), strict=True))


def env(**extra: str) -> dict[str, str]:
    base = {k: v for k, v in os.environ.items() if not k.startswith("QUIRE_")}
    # No Pulsar listener on 6650 unless a test gives it a free port (--pulsar-port).
    pulsar_off = {"QUIRE_PULSAR_PORT": "0"}
    return {**base, "PATH": f"{BIN}:{base.get('PATH', '')}", "QUIRE_HOST": "127.0.0.1", **pulsar_off, **extra}


@contextlib.contextmanager
def script(
    text: str, environment: dict[str, str], out: Path, data: Path | None = None
) -> Iterator[subprocess.Popen[bytes]]:
    """The block run by bash in a session of its own; every process it started (in the
    background too) is killed with the session's group at the end, and any process still
    running on `data`, the directory the block's processes keep their data in."""
    # From a file, not `bash -c`: a block's `pgrep -f` would find the script's own command line.
    path = out.with_suffix(".sh")
    path.write_text(text)
    with open(out, "wb") as log:
        proc = subprocess.Popen(
            ["bash", str(path)], cwd=REPO, env=environment, stdout=log, stderr=subprocess.STDOUT,
            start_new_session=True,
        )  # fmt: skip
    try:
        yield proc
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGTERM)
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(timeout=20)
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        if data is not None:
            _kill_stragglers(data)


def _kill_stragglers(root: Path) -> None:
    """Children of the block's own background jobs may have left its group (standalone puts each
    child in a session of its own): anything still running on the test's directory goes."""
    done = subprocess.run(["pgrep", "-f", str(root)], capture_output=True, text=True)
    for pid in map(int, done.stdout.split()):
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)


def run_to_end(
    text: str, environment: dict[str, str], out: Path, timeout_s: float = 120, data: Path | None = None
) -> str:
    with script(text, environment, out, data) as proc:
        proc.wait(timeout=timeout_s)
        assert proc.returncode == 0, out.read_text()[-4000:]
    return out.read_text()


def _ready(port: int) -> bool:
    import httpx

    with contextlib.suppress(httpx.HTTPError):
        return httpx.get(f"http://127.0.0.1:{port}/readyz", timeout=2).status_code == 200
    return False


@pytest.mark.process
def test_first_session_admin_cli_python_and_kafka(tmp_path: Path) -> None:
    """`make run` (a fresh standalone), then the curl session, the admin CLI, the Python client
    and kcat, in the README's order, on one standalone."""
    ports = free_ports(8080, 9092, 3181, 8000, 8001, 6650)
    standalone = QuireProcess(
        ["standalone", "--data-dir", str(tmp_path / "data"), "--port", str(ports[8080]),
         "--bookie-port", str(ports[3181]), "--kafka-port", str(ports[9092]),
         "--pulsar-port", str(ports[6650])],
        env(QUIRE_BOOKIE_METRICS_PORT=str(ports[8000]), QUIRE_COMPACTOR_METRICS_PORT=str(ports[8001])),
        tmp_path / "standalone.log",
    ).start()  # fmt: skip
    try:
        wait_until(lambda: _ready(ports[8080]), 120, "the standalone to be ready")
        admin_env = env(QUIRE_ADMIN_URL=f"http://127.0.0.1:{ports[8080]}")
        for i, first in enumerate(
            ["Q=http://127.0.0.1:8080", "quire admin topics list", "# produce two keyed records with kcat"]
        ):
            block = moved(_block(first).text, ports, {})
            out = run_to_end(block, admin_env, tmp_path / f"block-{i}.out")
            assert_printed(block, out)
        python = moved(_block("from quire_client import Client").text, ports, {})
        done = subprocess.run([sys.executable, "-c", python], capture_output=True, text=True, timeout=60)
        assert done.returncode == 0 and "ProduceResponse(results=[" in done.stdout, done.stdout + done.stderr
        pulsar = moved(_block("import pulsar").text, ports, {})
        done = subprocess.run([sys.executable, "-c", pulsar], capture_output=True, text=True, timeout=90)
        assert done.returncode == 0, done.stdout + done.stderr
        assert_printed(pulsar, done.stdout)
    finally:
        standalone.stop()


@pytest.mark.process
def test_replicated_ledgers_survive_a_killed_bookie(tmp_path: Path) -> None:
    ports = free_ports(8080, 3181, 9092)
    block = moved(_block("quire standalone --bookies 4").text, ports, {"/tmp/q": str(tmp_path / "q")})
    # As written the block starts standalone and kills a bookie at once; here the kill waits
    # until the bookies are up (a person typing it would be slower than the script).
    setup, kill = block.split("\nkill -9", 1)
    wait = f"\nuntil curl -sf localhost:{ports[8080]}/readyz >/dev/null; do sleep 0.5; done\nsleep 2\nkill -9"
    environment = env(QUIRE_BOOKIE_PORT=str(ports[3181]), QUIRE_KAFKA_PORT=str(ports[9092]),
                      QUIRE_BOOKIE_METRICS_PORT=str(free_port()), QUIRE_PORT=str(ports[8080]))  # fmt: skip
    environment["QUIRE_COMPACTOR_METRICS_PORT"] = str(free_port())
    out = tmp_path / "block.out"
    with script(setup + wait + kill, environment, out, tmp_path / "q") as proc:
        proc.wait(timeout=180)
        assert proc.returncode == 0, out.read_text()[-4000:]
        killed_at = len(out.read_text())
        time.sleep(12)  # the producer loop goes on meanwhile
        text = out.read_text()
    after = [line for line in text[killed_at:].splitlines() if line.startswith("{")]
    assert len(after) >= 10, text[-4000:]
    assert all('"results"' in line for line in after), after
    assert "3 of 4 bookies left" in text, text[-4000:]


@pytest.mark.process
@pytest.mark.postgres
def test_several_brokers_on_one_machine(tmp_path: Path, postgres_url: str) -> None:
    import psycopg

    database = f"readme_{uuid.uuid4().hex[:10]}"
    admin_dsn = postgres_url.replace("postgresql+psycopg://", "postgresql://")
    with psycopg.connect(admin_dsn, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{database}"')
    try:
        ports = free_ports(8080, 8081, 3181, 9092, 9093)
        block = moved(
            _block("# an empty PostgreSQL database first").text, ports, {"/tmp/q": str(tmp_path / "q")}
        )
        block = block.replace(
            "127.0.0.1:5432/quire", admin_dsn.rsplit("/", 1)[0].split("@", 1)[1] + f"/{database}"
        )
        out = run_to_end(block, env(), tmp_path / "block.out", timeout_s=180, data=tmp_path / "q")
        assert_printed(block, out)
    finally:
        with psycopg.connect(admin_dsn, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{database}" WITH (FORCE)')


@pytest.mark.process
def test_security_session(tmp_path: Path) -> None:
    ports = free_ports(8080, 3181, 9092)
    block = moved(_block("# a key, and tokens for three roles").text, ports, {"/tmp/q": str(tmp_path / "q")})
    # The block starts standalone in the background and uses it at once: wait for it first.
    start, rest = block.split("\nQ=", 1)
    wait = f"\nuntil curl -sf localhost:{ports[8080]}/readyz >/dev/null; do sleep 0.5; done\nQ="
    environment = env(QUIRE_BOOKIE_PORT=str(ports[3181]), QUIRE_KAFKA_PORT=str(ports[9092]),
                      QUIRE_BOOKIE_METRICS_PORT=str(free_port()), QUIRE_PORT=str(ports[8080]))  # fmt: skip
    environment["QUIRE_COMPACTOR_METRICS_PORT"] = str(free_port())
    out = run_to_end(start + wait + rest, environment, tmp_path / "block.out", 180, tmp_path / "q")
    assert_printed(block, out)
    assert re.search(r"^401$", out, re.M), out
