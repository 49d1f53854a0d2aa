"""`quire <process>` refuses bad configuration with a clear message and exit code 2, before it
starts anything (settings are validated first, for every process)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from app.cli import PROCESSES, main
from bookie.registry import BookieRecord, BookieState, wall_clock_ms
from managed_ledger.metadata.sql import SqlMetadataStore
from tests.support import REPO


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


# --- malformed settings files: one line naming the variable, exit code 2, never a traceback -----

BAD_ENV_FILES = [
    # name, env file text, what the one line must name
    ("bookies not JSON", "QUIRE_BOOKIES=[127.0.0.1:3181]\n", ["QUIRE_BOOKIES", "not valid JSON"]),
    ("bookies torn JSON", 'QUIRE_BOOKIES=["127.0.0.1:3181",\n', ["QUIRE_BOOKIES", "not valid JSON"]),
    ("bookies not a list", 'QUIRE_BOOKIES={"a": 1}\n', ["QUIRE_BOOKIES", "list"]),
    ("bookie not a string", 'QUIRE_BOOKIES=["127.0.0.1:3181", 7]\n', ["QUIRE_BOOKIES[1]", "string"]),
    ("port not an integer", "QUIRE_PORT=eighty\n", ["QUIRE_PORT='eighty'", "integer"]),
    ("port out of range", "QUIRE_BOOKIE_PORT=70000\n", ["QUIRE_BOOKIE_PORT='70000'"]),
    (
        "unknown enum value",
        "QUIRE_KEYLESS_COMPACTION_POLICY=shred\n",
        ["QUIRE_KEYLESS_COMPACTION_POLICY", "'drop'"],
    ),
    ("not a boolean", "QUIRE_AUTO_MIGRATE=perhaps\n", ["QUIRE_AUTO_MIGRATE", "boolean"]),
    ("E < Qw", "QUIRE_ENSEMBLE_SIZE=2\nQUIRE_WRITE_QUORUM=3\n", ["ensemble_size=2, write_quorum=3"]),
    ("two bad values", "QUIRE_PORT=x\nQUIRE_MAX_WAIT_MS=-5\n", ["QUIRE_PORT='x'", "QUIRE_MAX_WAIT_MS='-5'"]),
    ("a line that is not NAME=value", "QUIRE_PORT=8080\nthis is not a setting\n", ["line 2", "cannot parse"]),
]


@pytest.mark.parametrize(("name", "text", "named"), BAD_ENV_FILES, ids=[row[0] for row in BAD_ENV_FILES])
@pytest.mark.parametrize("process", PROCESSES)
def test_malformed_env_file_is_one_clear_line(
    process: str,
    name: str,
    text: str,
    named: list[str],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    env_file = tmp_path / "quire.env"
    env_file.write_text(text)
    monkeypatch.setenv("QUIRE_ENV_FILE", str(env_file))
    with pytest.raises(SystemExit) as exit_info:
        main([process])
    assert exit_info.value.code == 2
    err = capsys.readouterr().err
    assert err.startswith("quire: invalid settings: ") and err.count("\n") == 1, err
    for part in named:
        assert part in err, err
    if "line" not in name and "E < Qw" not in name:
        assert f"from {env_file}" in err  # the file the value came from


def test_the_environment_wins_over_the_env_file_and_is_named_as_such(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    env_file = tmp_path / "quire.env"
    env_file.write_text("QUIRE_PORT=8080\n")
    monkeypatch.setenv("QUIRE_ENV_FILE", str(env_file))
    monkeypatch.setenv("QUIRE_PORT", "x")
    with pytest.raises(SystemExit):
        main(["broker"])
    err = capsys.readouterr().err
    assert "QUIRE_PORT='x' (port):" in err and "from" not in err


@pytest.mark.parametrize("content", [None, b"\xff\xfeQUIRE_PORT=1\n"], ids=["missing", "not UTF-8"])
def test_env_file_that_cannot_be_read_is_refused(
    content: bytes | None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    env_file = tmp_path / "quire.env"
    if content is not None:
        env_file.write_bytes(content)
    monkeypatch.setenv("QUIRE_ENV_FILE", str(env_file))
    with pytest.raises(SystemExit) as exit_info:
        main(["bookie"])
    assert exit_info.value.code == 2
    err = capsys.readouterr().err
    assert f"QUIRE_ENV_FILE={env_file}: cannot read it" in err and err.count("\n") == 1


def test_a_long_value_is_shortened(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("QUIRE_PORT", "9" * 10_000)
    with pytest.raises(SystemExit):
        main(["broker"])
    err = capsys.readouterr().err
    assert "QUIRE_PORT='999" in err and len(err) < 300


@pytest.mark.process
@pytest.mark.parametrize(
    ("text", "named"),
    [('QUIRE_BOOKIES=["127.0.0.1:3181"\n', "QUIRE_BOOKIES"), ("QUIRE_WRITE_QUORUM=2\n", "write_quorum=2")],
    ids=["bad JSON list", "E < Qw"],
)
def test_the_real_command_exits_2_without_a_traceback(text: str, named: str, tmp_path: Path) -> None:
    env_file = tmp_path / "quire.env"
    env_file.write_text(text)
    env = {k: v for k, v in os.environ.items() if not k.startswith("QUIRE_")}
    done = subprocess.run(
        [sys.executable, "-m", "app.cli", "broker", "--data-dir", str(tmp_path)],
        cwd=REPO,
        env={**env, "QUIRE_ENV_FILE": str(env_file)},
        capture_output=True,
        timeout=60,
    )
    assert done.returncode == 2
    err = done.stderr.decode()
    assert "Traceback" not in err and err.count("\n") == 1 and named in err, err
    assert not (tmp_path / "metadata.db").exists()  # refused before anything started
