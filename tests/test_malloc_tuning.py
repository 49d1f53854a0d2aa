"""common.malloc_tuning: fixed glibc thresholds for the server processes, unless the operator set
their own."""

from __future__ import annotations

import platform

import pytest

from common import malloc_tuning


@pytest.mark.skipif(platform.libc_ver()[0] != "glibc", reason="mallopt is glibc's")
def test_sets_the_thresholds_on_glibc(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("MALLOC_MMAP_THRESHOLD_", "MALLOC_TRIM_THRESHOLD_", "GLIBC_TUNABLES"):
        monkeypatch.delenv(name, raising=False)
    assert malloc_tuning.tune()


@pytest.mark.parametrize("name", ["MALLOC_MMAP_THRESHOLD_", "MALLOC_TRIM_THRESHOLD_", "GLIBC_TUNABLES"])
def test_an_operators_own_setting_wins(monkeypatch: pytest.MonkeyPatch, name: str) -> None:
    monkeypatch.setenv(name, "1048576")
    assert not malloc_tuning.tune()
