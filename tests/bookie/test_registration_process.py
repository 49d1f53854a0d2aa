"""Registration with real processes: a `quire bookie` registers and heartbeats, a real broker
lists it as writable and, after `kill -9`, as down once the heartbeat expired; a bookie whose
disk was wiped refuses to start until `--format` registers it as a new instance."""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from managed_ledger.metadata.sql import SqlMetadataStore
from tests.bookie.conftest import BookieProcess
from tests.support import QuireProcess, free_port, port_open, wait_until

START_TIMEOUT_S = 60.0
HEARTBEAT_ENV = {"QUIRE_BOOKIE_HEARTBEAT_INTERVAL_MS": "200", "QUIRE_BOOKIE_HEARTBEAT_TIMEOUT_MS": "2000"}


@pytest.fixture
def database_url(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path / 'metadata.db'}"


@pytest.fixture
def store(database_url: str) -> Iterator[SqlMetadataStore]:
    store = SqlMetadataStore(database_url)
    try:
        yield store
    finally:
        store.close()


def _bookie(tmp_path: Path, database_url: str) -> BookieProcess:
    env = {"QUIRE_DATABASE_URL": database_url, **HEARTBEAT_ENV}
    return BookieProcess(tmp_path / "bookie", tmp_path / "bookie.log", env)


def _states(base_url: str) -> dict[str, str]:
    body = httpx.get(f"{base_url}/admin/v2/bookies/all", timeout=5).json()
    return {b["bookieId"]: b["state"] for b in body["bookies"]}


def test_bookie_registers_heartbeats_and_shows_down_after_kill9(
    tmp_path: Path, database_url: str, store: SqlMetadataStore
) -> None:
    bookie = _bookie(tmp_path, database_url).start()
    port = free_port()
    broker = QuireProcess(
        ["broker", "--port", str(port)],
        {
            "QUIRE_DATA_DIR": str(tmp_path / "broker"),
            "QUIRE_DATABASE_URL": database_url,
            "QUIRE_BOOKIES": f'["{bookie.address}"]',
            **HEARTBEAT_ENV,
        },
        tmp_path / "broker.log",
    ).start()
    try:
        wait_until(lambda: port_open(port) or not broker.alive(), START_TIMEOUT_S, "broker port")
        assert broker.alive(), broker.log()[-3000:]
        base_url = f"http://127.0.0.1:{port}"
        assert _states(base_url) == {bookie.address: "writable"}
        (first,) = store.list_bookies()
        wait_until(lambda: store.list_bookies()[0].heartbeat_ms > first.heartbeat_ms, 30, "a heartbeat")
        cookie = store.get_bookie_cookie(bookie.address)
        assert cookie is not None and first.instance_id == cookie.instance_id
        bookie.kill9()
        wait_until(lambda: _states(base_url) == {bookie.address: "down"}, 30, "the bookie shown down")
        assert 'quire_bookies{state="down"} 1.0' in httpx.get(f"{base_url}/metrics", timeout=5).text
    finally:
        broker.stop()
        bookie.stop()


def test_wiped_disk_is_refused_until_formatted(
    tmp_path: Path, database_url: str, store: SqlMetadataStore
) -> None:
    bookie = _bookie(tmp_path, database_url).start()
    first = store.get_bookie_cookie(bookie.address)
    assert first is not None
    assert bookie.stop() == 0
    assert store.list_bookies()[0].heartbeat_ms == 0  # a clean stop shows as down at once
    shutil.rmtree(bookie.data_dir)
    bookie.data_dir.mkdir()

    refused = QuireProcess(bookie.process.args, bookie.env, tmp_path / "refused.log").start()  # type: ignore[union-attr]
    try:
        wait_until(lambda: not refused.alive(), START_TIMEOUT_S, "the refusal")
    finally:
        code = refused.stop()
    assert code == 2
    assert "wiped" in refused.log() and "quire bookie --format" in refused.log()
    assert not port_open(bookie.port)
    assert store.get_bookie_cookie(bookie.address) == first  # refusing changed nothing

    formatted = QuireProcess(
        [*bookie.process.args, "--format"],
        bookie.env,
        tmp_path / "formatted.log",  # type: ignore[union-attr]
    ).start()
    try:
        wait_until(
            lambda: port_open(bookie.port) or not formatted.alive(), START_TIMEOUT_S, "formatted bookie"
        )
        assert formatted.alive(), formatted.log()[-3000:]
        second = store.get_bookie_cookie(bookie.address)
        assert second is not None and second.instance_id != first.instance_id
        assert (bookie.data_dir / "COOKIE").read_text().count(second.instance_id) == 1
        wait_until(
            lambda: store.list_bookies()[0].instance_id == second.instance_id,
            30,
            "the new instance registered",
        )
    finally:
        assert formatted.stop() == 0


def test_a_paused_bookie_whose_id_was_formatted_elsewhere_stops_when_it_resumes(
    tmp_path: Path, database_url: str, store: SqlMetadataStore
) -> None:
    """Two processes under one bookie id (review 2026-11-28, finding 9): A is paused past its
    heartbeat timeout, orchestration starts B with `--format` under A's id on another disk and
    port. When A resumes, its heartbeats are refused (the cookie names B's instance) and A
    stops, exit 1, without marking the id down; the row keeps B's instance throughout."""
    a = _bookie(tmp_path, database_url).start()
    first = store.get_bookie_cookie(a.address)
    assert first is not None and a.process is not None and a.process.proc is not None
    wait_until(lambda: len(store.list_bookies()) == 1, START_TIMEOUT_S, "A registered")
    os.killpg(a.process.proc.pid, signal.SIGSTOP)
    b = QuireProcess(
        ["bookie", "--data-dir", str(tmp_path / "b"), "--port", str(free_port()), "--format"],
        {
            "QUIRE_BOOKIE_HOST": "127.0.0.1",
            "QUIRE_BOOKIE_ADVERTISED_ADDRESS": a.address,
            "QUIRE_DATABASE_URL": database_url,
            **HEARTBEAT_ENV,
        },
        tmp_path / "b.log",
    ).start()
    try:
        second = None

        def formatted() -> bool:
            nonlocal second
            second = store.get_bookie_cookie(a.address)
            return (second is not None and second.instance_id != first.instance_id) or not b.alive()

        wait_until(formatted, START_TIMEOUT_S, "the second instance's cookie")
        assert b.alive() and second is not None, b.log()[-3000:]
        # B watches A's registration for a heartbeat timeout first (A is paused: it stays still).
        wait_until(lambda: store.list_bookies()[0].instance_id == second.instance_id, 30, "B registered")
        os.killpg(a.process.proc.pid, signal.SIGCONT)
        wait_until(lambda: not a.alive(), 30, "A to stop")
        assert a.stop() == 1
        assert "formatted as new" in a.log(), a.log()[-3000:]
        (row,) = store.list_bookies()
        assert row.instance_id == second.instance_id and row.heartbeat_ms > 0  # A did not mark it down
        assert b.alive()
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(a.process.proc.pid, signal.SIGCONT)
        a.stop()
        assert b.stop() == 0


def _row_process(store: SqlMetadataStore) -> str:
    (row,) = store.list_bookies()
    return row.process_id


def test_a_bookie_restarted_after_kill9_takes_its_id_over_at_once(
    tmp_path: Path, database_url: str, store: SqlMetadataStore
) -> None:
    """Its predecessor's registration is fresh, but the data directory's process mark proves it
    was this directory's process, now dead (this one holds the directory's lock): no watch."""
    bookie = _bookie(tmp_path, database_url).start()
    try:
        wait_until(lambda: len(store.list_bookies()) == 1, START_TIMEOUT_S, "the registration")
        first = _row_process(store)
        bookie.kill9()
        bookie.start()
        wait_until(lambda: _row_process(store) != first, START_TIMEOUT_S, "the restart's registration")
        assert "watching its heartbeat" not in bookie.log(), bookie.log()[-3000:]
    finally:
        assert bookie.stop() == 0


def test_a_copy_of_a_dead_bookies_disk_takes_the_id_over_after_watching_it(
    tmp_path: Path, database_url: str, store: SqlMetadataStore
) -> None:
    """A copied (or restored) directory is not proof: the copy watches the registration for a
    heartbeat timeout, sees it still, and takes the id over."""
    a = _bookie(tmp_path, database_url).start()
    copy: BookieProcess | None = None
    try:
        wait_until(lambda: len(store.list_bookies()) == 1, START_TIMEOUT_S, "the registration")
        first = _row_process(store)
        a.kill9()
        shutil.copytree(a.data_dir, tmp_path / "copy")
        env = {**a.env, "QUIRE_BOOKIE_ADVERTISED_ADDRESS": a.address}
        copy = BookieProcess(tmp_path / "copy", tmp_path / "copy.log", env).start()
        wait_until(lambda: _row_process(store) != first or not copy.alive(), START_TIMEOUT_S, "the takeover")
        assert copy.alive(), copy.log()[-3000:]
        assert "watching its heartbeat" in copy.log()
    finally:
        a.stop()
        if copy is not None:
            assert copy.stop() == 0


def test_a_paused_bookie_whose_id_a_copy_took_over_stops_when_it_resumes(
    tmp_path: Path, database_url: str, store: SqlMetadataStore
) -> None:
    """A is paused past its heartbeat timeout; a process on a copy of its disk watches the
    registration, sees it still, and takes the id over. When A resumes its heartbeat is refused
    (another process registered) and it stops, exit 1, without marking the id down."""
    a = _bookie(tmp_path, database_url).start()
    copy: BookieProcess | None = None
    assert a.process is not None and a.process.proc is not None
    try:
        wait_until(lambda: len(store.list_bookies()) == 1, START_TIMEOUT_S, "the registration")
        first = _row_process(store)
        os.killpg(a.process.proc.pid, signal.SIGSTOP)
        shutil.copytree(a.data_dir, tmp_path / "copy", ignore=shutil.ignore_patterns("LOCK"))
        env = {**a.env, "QUIRE_BOOKIE_ADVERTISED_ADDRESS": a.address}
        copy = BookieProcess(tmp_path / "copy", tmp_path / "copy.log", env).start()
        wait_until(lambda: _row_process(store) != first or not copy.alive(), START_TIMEOUT_S, "the takeover")
        assert copy.alive(), copy.log()[-3000:]
        os.killpg(a.process.proc.pid, signal.SIGCONT)
        wait_until(lambda: not a.alive(), 30, "A to stop")
        assert a.stop() == 1
        assert "registered by process" in a.log(), a.log()[-3000:]
        (row,) = store.list_bookies()
        assert row.process_id != first and row.heartbeat_ms > 0
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(a.process.proc.pid, signal.SIGCONT)
        a.stop()
        if copy is not None:
            assert copy.stop() == 0
