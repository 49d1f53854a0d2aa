"""Torn files against a whole cluster: the bookie's fault table (tests/bookie/test_storage_faults.py)
run on a bookie of a real cluster -- three `quire bookie` processes and a `quire broker` writing
every entry to two of them (E=3, Qw=2, Qa=2), on PostgreSQL.

Each round produces a batch through the broker, stops bookie 0 (SIGTERM, or kill -9 for the
crash rows), damages its journal or index files while it is down, and starts it again on the
same directory. The bookie must either start (cutting a torn tail and keeping the cut bytes in
`<segment>.log.broken`) or refuse with a clear message; and through the broker every message
it ever acknowledged must still read back, in order, with nothing else in between. At the end
the broker itself is restarted, so that its open ledger is recovered over the damaged bookie,
and everything is read once more.

Bookie 0 is the only one damaged: every entry has its second copy on bookie 1 or 2, so no round
may lose an acknowledged message.
"""

from __future__ import annotations

import os
import signal
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import pytest

from bookie.storage.records import SEGMENT_HEADER_SIZE, Record, parse_segment_name, scan_segment
from bookie.storage.recovery import BROKEN_SUFFIX
from tests.conftest import drop_postgres_schema, fresh_postgres_schema_url
from tests.support import QuireProcess, free_port, port_open, wait_until

pytestmark = pytest.mark.postgres

TOPIC = "public/default/torn"
MESSAGES = f"/v1/topics/{TOPIC}/messages"
BATCH = 60
START_TIMEOUT_S = 60.0
PRODUCE_TIMEOUT_S = 60.0
HTTP = httpx.Timeout(30.0, connect=5.0)
QUORUM = {"QUIRE_ENSEMBLE_SIZE": "3", "QUIRE_WRITE_QUORUM": "2", "QUIRE_ACK_QUORUM": "2"}
# Keep every message: with no subscription and no retention a closed ledger is trimmed at once
# (as in Pulsar), and each round closes one.
RETENTION = {"QUIRE_RETENTION_TIME_MINUTES": "-1", "QUIRE_RETENTION_SIZE_MB": "-1"}
DEDUP = {"QUIRE_DEDUPLICATION_ENABLED": "true"}


@dataclass
class Cluster:
    root: Path
    database_url: str
    bookie_ports: list[int] = field(default_factory=lambda: [free_port() for _ in range(3)])
    port: int = field(default_factory=free_port)
    bookies: list[QuireProcess | None] = field(default_factory=lambda: [None, None, None])
    broker: QuireProcess | None = None
    acknowledged: list[str] = field(default_factory=list)  # values, in produce order
    produced_batches: int = 0

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def bookie_dir(self, i: int) -> Path:
        return self.root / f"bookie-{i}"

    def env(self) -> dict[str, str]:
        bookies = ", ".join(f'"127.0.0.1:{p}"' for p in self.bookie_ports)
        return {
            "QUIRE_DATABASE_URL": self.database_url,
            "QUIRE_BOOKIE_HOST": "127.0.0.1",
            "QUIRE_BOOKIES": f"[{bookies}]",
            "QUIRE_PORT": str(self.port),
            **QUORUM,
            **RETENTION,
            **DEDUP,
        }

    def start_bookie(self, i: int, *extra: str) -> QuireProcess:
        args = ["bookie", "--data-dir", str(self.bookie_dir(i)), "--port", str(self.bookie_ports[i]), *extra]
        log = self.root / f"bookie-{i}.log"
        process = QuireProcess(args, self.env(), log).start()
        self.bookies[i] = process
        return process

    def wait_bookie(self, i: int) -> bool:
        """True once bookie i listens, False if it exited first."""
        process = self.bookies[i]
        assert process is not None
        wait_until(
            lambda: not process.alive() or port_open(self.bookie_ports[i]), START_TIMEOUT_S, f"bookie {i}"
        )
        return process.alive()

    def start_broker(self) -> None:
        env = {**self.env(), "QUIRE_DATA_DIR": str(self.root / "broker")}
        self.broker = QuireProcess(["broker"], env, self.root / "broker.log").start()
        broker = self.broker

        def ready() -> bool:
            if not broker.alive():
                raise RuntimeError(f"broker exited:\n{broker.log()[-3000:]}")
            try:
                return httpx.get(f"{self.base_url}/readyz", timeout=2).status_code == 200
            except httpx.HTTPError:
                return False

        wait_until(ready, START_TIMEOUT_S, "broker /readyz", interval_s=0.2)

    def stop(self) -> None:
        for process in [self.broker, *self.bookies]:
            if process is not None:
                process.stop()

    # --- through the broker ------------------------------------------------------------------
    def produce_batch(self) -> None:
        """One batch in chunks, each retried as a careful client does (same producer name and
        sequence ids, on 503, bounded) until the broker answers 200.

        A 503 is expected once per round: the broker's first add to the restarted bookie finds
        its old connection gone, and with E=3 on three bookies there is no bookie to replace it
        with, so that add fails and the ledger is closed through recovery -- which may find the
        failed add durable after all. Dedup is on, so the retry of such a chunk is answered
        `duplicate` (stored once, by the first attempt) and the exact read-back shows any chunk
        stored twice or lost."""
        n = self.produced_batches
        values = [f"round-{n}-message-{i}-" + "x" * (i * 7 % 300) for i in range(BATCH)]
        with httpx.Client(base_url=self.base_url, timeout=HTTP) as http:
            for start in range(0, BATCH, 20):
                chunk = values[start : start + 20]
                first_seq = n * BATCH + start
                body = {
                    "producer_name": "torn",
                    "messages": [{"value": v, "sequence_id": first_seq + i} for i, v in enumerate(chunk)],
                }

                def accepted(body: dict[str, object] = body) -> bool:
                    r = http.post(MESSAGES, json=body)
                    assert r.status_code in (200, 503), r.text
                    return r.status_code == 200

                wait_until(accepted, PRODUCE_TIMEOUT_S, f"chunk {start} of round {n}", interval_s=0.2)
                self.acknowledged += chunk
        self.produced_batches += 1

    def read_all(self) -> list[str]:
        out: list[str] = []
        start = "earliest"
        with httpx.Client(base_url=self.base_url, timeout=HTTP) as http:
            for _ in range(10_000):
                r = http.get(MESSAGES, params={"start": start, "max_messages": 500})
                assert r.status_code == 200, r.text
                page = r.json()
                out += [m["value"] for m in page["messages"]]
                if not page["messages"] or page["next"] is None:
                    return out
                start = page["next"]
        raise AssertionError("reader did not reach the end")

    def assert_every_acknowledged_message_reads_back(self, what: str) -> None:
        got = self.read_all()
        missing = len(set(self.acknowledged) - set(got))
        assert got == self.acknowledged, (
            f"{what}: read {len(got)}, acknowledged {len(self.acknowledged)}, {missing} missing"
        )


# --- damage to bookie 0's files, done while it is down -----------------------------------------


def current_segment(data_dir: Path) -> Path:
    logs = sorted(p for p in (data_dir / "journal").iterdir() if parse_segment_name(p.name))
    return logs[-1]


def records(segment: Path) -> list[Record]:
    _scan, it = scan_segment(segment)
    return list(it)


def ledger_index_files(data_dir: Path) -> list[Path]:
    return sorted((data_dir / "index").glob("*.idx"))


def tear_last_record(data_dir: Path) -> None:
    """Cut the journal in the middle of its last record (an add of the last batch)."""
    segment = current_segment(data_dir)
    last = records(segment)[-1]
    os.truncate(segment, last.offset + last.length // 2)


def garbage_after_last_record(data_dir: Path) -> None:
    segment = current_segment(data_dir)
    last = records(segment)[-1]
    with open(segment, "r+b") as f:
        f.seek(last.offset + last.length)
        f.write(bytes(range(1, 256)) * 8)


def zero_a_page_among_the_records(data_dir: Path) -> None:
    """A page of the journal reads back as zeros (lost write): entries there are damaged."""
    segment = current_segment(data_dir)
    recs = records(segment)
    middle = recs[len(recs) * 3 // 4].offset
    with open(segment, "r+b") as f:
        f.seek(max(SEGMENT_HEADER_SIZE, middle))
        f.write(bytes(4096))


def garble_index_files(data_dir: Path) -> None:
    for index_file in ledger_index_files(data_dir):
        with open(index_file, "r+b") as f:
            f.write(b"garbage!")


def truncate_index_files(data_dir: Path) -> None:
    for index_file in ledger_index_files(data_dir):
        os.truncate(index_file, 40)


def remove_checkpoint(data_dir: Path) -> None:
    (data_dir / "index" / "CHECKPOINT").unlink()


def torn_segment_header(data_dir: Path) -> None:
    """The newest segment's header torn while it holds records: a header is synced before any
    record is written after it, so this is damage to acknowledged records, not a torn tail, and
    the bookie refuses to start (it once recreated the segment, cutting every record in it)."""
    with open(current_segment(data_dir), "r+b") as f:
        f.write(b"QJ\0\0\0\0\0")


def both(*damages: Callable[[Path], None]) -> Callable[[Path], None]:
    def damage(data_dir: Path) -> None:
        for d in damages:
            d(data_dir)

    return damage


@dataclass(frozen=True)
class Fault:
    name: str
    damage: Callable[[Path], None]
    crash: bool = False  # kill -9 instead of SIGTERM
    broken_copy: bool = False  # the restart keeps a cut tail in <segment>.log.broken
    refused: bool = False  # the damage is not a tail: the bookie must refuse to start


# A round costs a bookie restart (seconds), so the journal and index damage of a round go together,
# as one crash may leave them.
FAULTS = [
    Fault(
        "journal tail torn mid-record, index files garbled",
        both(tear_last_record, garble_index_files),
        broken_copy=True,
    ),
    Fault(
        "garbage after the last record, index checkpoint removed",
        both(garbage_after_last_record, remove_checkpoint),
        broken_copy=True,
    ),
    Fault(
        "kill -9, journal tail torn mid-record, index files truncated",
        both(tear_last_record, truncate_index_files),
        crash=True,
        broken_copy=True,
    ),
    # After a SIGTERM the checkpoint covers the page: replay never reads it, and a read of a
    # damaged record fails its CRC (answered CORRUPT, served from the other copy).
    Fault("zeroed page among the journal records", zero_a_page_among_the_records),
    Fault("newest segment header torn", torn_segment_header, refused=True),
]


@pytest.fixture
def cluster(tmp_path: Path, postgres_url: str) -> Iterator[Cluster]:
    url, schema = fresh_postgres_schema_url(postgres_url)
    c = Cluster(tmp_path, url)
    try:
        for i in range(3):
            c.start_bookie(i)
        for i in range(3):
            assert c.wait_bookie(i), c.bookies[i].log() if c.bookies[i] else ""
        c.start_broker()
        yield c
    finally:
        c.stop()
        drop_postgres_schema(postgres_url, schema)


def restart_damaged(cluster: Cluster, fault: Fault) -> str:
    """Stop bookie 0, damage it, start it again; how it came back ('started' or 'refused')."""
    process = cluster.bookies[0]
    assert process is not None and process.proc is not None
    if fault.crash:
        process.kill9()
    else:
        os.killpg(process.pid, signal.SIGTERM)
        assert process.proc.wait(timeout=30) == 0, process.log()[-3000:]
    process.stop()
    data_dir = cluster.bookie_dir(0)
    for old in (data_dir / "journal").glob("*" + BROKEN_SUFFIX):
        old.unlink()  # only this round's copy counts
    fault.damage(data_dir)
    restarted = cluster.start_bookie(0)
    if cluster.wait_bookie(0):
        return "started"
    # Refused: exit non-zero with a message, never a traceback. It is re-formatted (an empty
    # disk, a new instance) so that the rounds go on with three bookies.
    assert restarted.proc is not None and restarted.proc.returncode != 0
    log = restarted.log()
    assert "Traceback" not in log, log[-3000:]
    assert "not a torn tail" in log or not fault.refused, log[-3000:]
    cluster.start_bookie(0, "--format")
    assert cluster.wait_bookie(0), cluster.bookies[0].log() if cluster.bookies[0] else ""
    return "refused"


def test_torn_files_on_one_bookie_lose_no_acknowledged_message(cluster: Cluster) -> None:
    outcomes: dict[str, str] = {}
    for fault in FAULTS:
        cluster.produce_batch()
        outcome = restart_damaged(cluster, fault)
        outcomes[fault.name] = outcome
        copies = list((cluster.bookie_dir(0) / "journal").glob("*" + BROKEN_SUFFIX))
        if outcome == "started" and fault.broken_copy:
            assert copies, f"{fault.name}: no {BROKEN_SUFFIX} copy of the cut tail"
        cluster.assert_every_acknowledged_message_reads_back(f"after {fault.name}")
    # The broker restarts: its open ledger is recovered (fenced, its end found) over the
    # damaged bookie's copy, and the topic goes on in a new ledger.
    assert cluster.broker is not None
    cluster.broker.stop()
    cluster.start_broker()
    cluster.assert_every_acknowledged_message_reads_back("after the broker restarted")
    cluster.produce_batch()
    cluster.assert_every_acknowledged_message_reads_back("after a produce on the new ledger")
    assert outcomes == {f.name: "refused" if f.refused else "started" for f in FAULTS}, outcomes
