"""`quire <process>` refuses bad configuration with a clear message and exit code 2, before it
starts anything (settings are validated first, for every process)."""

from __future__ import annotations

from pathlib import Path

import pytest

from app.cli import PROCESSES, main
from bookie.registry import BookieRecord, BookieState, wall_clock_ms
from managed_ledger.metadata.sql import SqlMetadataStore


@pytest.mark.parametrize("process", PROCESSES)
@pytest.mark.parametrize(
    ("variable", "value", "named"),
    [
        ("QUIRE_KEYLESS_COMPACTION_POLICY", "banana", "keyless_compaction_policy"),
        ("QUIRE_PORT", "-1", "port"),
        ("QUIRE_DISK_USAGE_LOW_WATER", "0.99", "disk_usage_low_water"),
        ("QUIRE_MAX_WAIT_MS", "soon", "max_wait_ms"),
        # E >= Qw >= Qa >= 1 (defaults 1/1/1): each broken order is refused, naming the quorum.
        ("QUIRE_WRITE_QUORUM", "2", "write_quorum=2"),
        ("QUIRE_ACK_QUORUM", "2", "ack_quorum=2"),
        ("QUIRE_ACK_QUORUM", "0", "ack_quorum"),
        ("QUIRE_BOOKIE_HEARTBEAT_TIMEOUT_MS", "1000", "bookie_heartbeat_timeout_ms"),
        ("QUIRE_AUTORECOVERY_LEASE_MS", "5000", "autorecovery_lease_ms"),
    ],
)
def test_bad_setting_is_refused_with_its_name(
    process: str,
    variable: str,
    value: str,
    named: str,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.setenv(variable, value)
    with pytest.raises(SystemExit) as exit_info:
        main([process])
    assert exit_info.value.code == 2
    err = capsys.readouterr().err
    assert "invalid settings" in err and named in err


def test_quorums_in_order_but_above_the_ensemble_are_refused(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("QUIRE_ENSEMBLE_SIZE", "2")
    monkeypatch.setenv("QUIRE_WRITE_QUORUM", "3")
    monkeypatch.setenv("QUIRE_ACK_QUORUM", "2")
    with pytest.raises(SystemExit) as exit_info:
        main(["broker"])
    assert exit_info.value.code == 2
    err = capsys.readouterr().err
    assert "ensemble_size >= write_quorum >= ack_quorum >= 1" in err
    assert "ensemble_size=2, write_quorum=3, ack_quorum=2" in err


def test_broker_gives_up_naming_the_shortfall_of_live_bookies(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    url = f"sqlite:///{tmp_path / 'metadata.db'}"
    store = SqlMetadataStore(url)
    try:
        now = wall_clock_ms()
        store.put_bookie(
            BookieRecord("127.0.0.1:1", "i1", BookieState.WRITABLE, heartbeat_ms=now + 3_600_000)
        )
        store.put_bookie(BookieRecord("127.0.0.1:2", "i2", BookieState.WRITABLE, heartbeat_ms=0))
    finally:
        store.close()
    for name, value in {
        "QUIRE_DATA_DIR": str(tmp_path),
        "QUIRE_DATABASE_URL": url,
        "QUIRE_ENSEMBLE_SIZE": "2",
        "QUIRE_BOOKIE_WAIT_TIMEOUT_MS": "300",
    }.items():
        monkeypatch.setenv(name, value)
    with pytest.raises(SystemExit) as exit_info:
        main(["broker"])
    message = str(exit_info.value.code)
    assert "ensemble_size is 2 but only 1 bookie(s) are live" in message
    assert "down: 127.0.0.1:2" in message


def test_format_is_a_bookie_flag_only(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_info:
        main(["broker", "--format"])
    assert exit_info.value.code == 2
    assert "unrecognized arguments: --format" in capsys.readouterr().err


def test_unknown_process_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_info:
        main(["gateway"])
    assert exit_info.value.code == 2
    assert "invalid choice" in capsys.readouterr().err
