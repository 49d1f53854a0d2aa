"""The test kinds (tests/kinds.py): each rule gives the kind it says, two explicit kinds are
refused, and a fast test that starts a process fails."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys

import pytest

from tests.kinds import KindError, classify, kind


def test_an_explicit_mark_wins_over_fixtures_and_names() -> None:
    assert classify("t", ["unit"], ["live"], [], "api/test_x_live.py") == "unit"


def test_two_explicit_kinds_are_refused() -> None:
    with pytest.raises(KindError, match="2 kinds"):
        classify("t", ["unit", "process"], [], [], "test_x.py")


def test_a_fixtures_kind_wins_over_the_file_name_and_the_heavier_fixture_wins() -> None:
    assert classify("t", [], ["live"], [], "api/test_x_contract.py") == "live"
    assert classify("t", [], ["live", "process"], [], "test_x.py") == "process"


def test_a_spark_test_is_a_process_test() -> None:
    assert classify("t", [], [], ["spark", "slow"], "compactor/test_x.py") == "process"


@pytest.mark.parametrize(
    ("path", "expected"),
    [
        ("bookie/test_storage_contract.py", "contract"),
        ("bookie/test_server_process.py", "process"),
        ("api/test_stats_live.py", "live"),
        ("api/test_live_fuzz.py", "live"),
        ("cluster/test_leave.py", "process"),
        ("kafka_clients/test_groups.py", "live"),
        ("topics/test_produce.py", "unit"),
    ],
)
def test_the_file_name_or_folder_gives_the_kind(path: str, expected: str) -> None:
    assert classify("t", [], [], [], path) == expected


def test_a_fixture_declares_a_known_kind_only() -> None:
    with pytest.raises(KindError, match="unknown test kind"):
        kind("slow")


def test_a_unit_test_that_starts_a_process_fails() -> None:
    with pytest.raises(KindError, match="is a unit test but starts a process"):
        subprocess.run([sys.executable, "-c", "pass"], check=True)
    with pytest.raises(KindError):
        os.fork()


async def test_a_unit_test_that_starts_an_asyncio_subprocess_fails() -> None:
    with pytest.raises(KindError):
        await asyncio.create_subprocess_exec(sys.executable, "-c", "pass")


@pytest.mark.process
def test_a_process_test_may_start_a_process() -> None:
    assert subprocess.run([sys.executable, "-c", "pass"], check=False).returncode == 0


def test_every_kind_is_a_declared_marker(pytestconfig: pytest.Config) -> None:
    declared = {line.split(":")[0] for line in pytestconfig.getini("markers")}
    assert {"unit", "contract", "process", "live"} <= declared


def test_this_test_has_exactly_one_kind(request: pytest.FixtureRequest) -> None:
    kinds = [m.name for m in request.node.iter_markers() if m.name in ("unit", "contract", "process", "live")]
    assert kinds == ["unit"]
