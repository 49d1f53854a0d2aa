"""`quire <process>` refuses bad configuration with a clear message and exit code 2, before it
starts anything (settings are validated first, for every process)."""

from __future__ import annotations

import pytest

from app.cli import PROCESSES, main


@pytest.mark.parametrize("process", PROCESSES)
@pytest.mark.parametrize(
    ("variable", "value", "named"),
    [
        ("QUIRE_KEYLESS_COMPACTION_POLICY", "banana", "keyless_compaction_policy"),
        ("QUIRE_PORT", "-1", "port"),
        ("QUIRE_DISK_USAGE_LOW_WATER", "0.99", "disk_usage_low_water"),
        ("QUIRE_MAX_WAIT_MS", "soon", "max_wait_ms"),
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


def test_unknown_process_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_info:
        main(["gateway"])
    assert exit_info.value.code == 2
    assert "invalid choice" in capsys.readouterr().err
