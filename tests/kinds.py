"""Test kinds: every collected test is exactly one of `unit`, `process`, `live` or `contract`.

- `unit`: runs inside the pytest process and starts no other process. In-memory fakes, temporary
  files, SQLite, the local PostgreSQL, and servers on loopback in a thread or the test's own event
  loop are all fine.
- `contract`: one suite run against every implementation of a seam (the fake and the real one);
  in process like `unit`. Files `test_*_contract.py`.
- `process`: starts real processes (`quire bookie`, a broker, a cluster, the compactor, the CLI as
  a child, Spark's JVM) and checks what a process does: its exit, signals, crash, restart, logs.
  Files `test_*_process.py`, and `tests/cluster`, `tests/chaos_torn`.
- `live`: drives a running stack of real processes over its network API as a client does (HTTP,
  the Kafka wire). Files `test_*_live.py` and `test_live_*.py`, and `tests/kafka_clients`.

`make test-fast` runs `unit` and `contract`. A test gets its kind, first match wins, from:
1. an explicit mark (`pytest.mark.process`, on the test, a parameter, its class or its module);
2. the kind of a fixture it uses, directly or through other fixtures (`@kind("live")` under the
   fixture decorator of a fixture that starts processes);
3. its file's name or its folder (the tables below);
4. otherwise `unit`.
A test with two explicit kinds (a `process` module with a `unit` test in it, say) fails the
collection, so `-m` selects each test by exactly one kind.
A `unit` or `contract` test that starts a process fails (`refuse_processes`).
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Callable, Iterable
from typing import Any, TypeVar

import pytest

KINDS = ("unit", "process", "live", "contract")
FAST = ("unit", "contract")
SUFFIXES = {"_contract": "contract", "_process": "process", "_live": "live"}
PREFIXES = {"test_live_": "live"}
FOLDERS = {"cluster": "process", "chaos_torn": "process", "kafka_clients": "live", "pulsar_listener": "live"}
# Markers that imply a kind: a Spark session starts a JVM.
IMPLIED = {"spark": "process"}
# When fixtures of different kinds meet, the heavier wins (a live stack that a test also restarts).
WEIGHT = {"unit": 0, "contract": 1, "live": 2, "process": 3}

F = TypeVar("F", bound=Callable[..., Any])


class KindError(Exception):
    """A test's kind is ambiguous, or a fast test did something its kind forbids."""


def kind(name: str) -> Callable[[F], F]:
    """Declare the kind of the tests that use a fixture; put it under `@pytest.fixture`."""
    if name not in KINDS:
        raise KindError(f"unknown test kind {name!r}; one of {', '.join(KINDS)}")

    def mark(func: F) -> F:
        func.quire_kind = name  # type: ignore[attr-defined]
        return func

    return mark


def classify(
    test: str, explicit: Iterable[str], fixture_kinds: Iterable[str], markers: Iterable[str], path: str
) -> str:
    """The one kind of `test` (rules in the module docstring); `path` is relative to tests/."""
    found = sorted(set(explicit))
    if len(found) > 1:
        raise KindError(f"{test} is marked with {len(found)} kinds ({', '.join(found)}); give it one")
    if found:
        return found[0]
    implied = sorted({IMPLIED[m] for m in markers if m in IMPLIED} | set(fixture_kinds))
    if implied:
        return max(implied, key=WEIGHT.__getitem__)
    parts = path.split("/")
    stem = parts[-1].removesuffix(".py")
    for suffix, name in SUFFIXES.items():
        if stem.endswith(suffix):
            return name
    for prefix, name in PREFIXES.items():
        if stem.startswith(prefix):
            return name
    for folder in parts[:-1]:
        if folder in FOLDERS:
            return FOLDERS[folder]
    return "unit"


def fixture_kinds(item: pytest.Item) -> set[str]:
    info = getattr(item, "_fixtureinfo", None)
    if info is None:
        return set()
    kinds: set[str] = set()
    for name in info.names_closure:
        for fixturedef in info.name2fixturedefs.get(name, ()):
            declared = getattr(fixturedef.func, "quire_kind", None)
            if declared is not None:
                kinds.add(declared)
    return kinds


def assign(items: list[pytest.Item], root: str) -> None:
    """Mark every item with its kind; raise KindError listing every test whose kind is unclear."""
    errors: list[str] = []
    for item in items:
        explicit = [m.name for m in item.iter_markers() if m.name in KINDS]
        markers = [m.name for m in item.iter_markers()]
        path = os.path.relpath(str(item.path), root).replace(os.sep, "/")
        try:
            name = classify(item.nodeid, explicit, fixture_kinds(item), markers, path)
        except KindError as exc:
            errors.append(str(exc))
            continue
        if not explicit:
            item.add_marker(getattr(pytest.mark, name))
        item.quire_kind = name  # type: ignore[attr-defined]
    if errors:
        raise KindError("\n".join(errors))


def kind_of(item: pytest.Item) -> str:
    return str(getattr(item, "quire_kind", "unit"))


def refuse_processes(monkeypatch: pytest.MonkeyPatch, test: str, name: str) -> None:
    """For the test's duration, starting a process raises KindError (subprocess, asyncio's
    subprocesses and multiprocessing all go through these)."""
    import _posixsubprocess

    def refuse(*args: object, **kwargs: object) -> Any:
        raise KindError(
            f"{test} is a {name} test but starts a process: mark it `process` or `live` "
            "(tests/kinds.py says which)"
        )

    monkeypatch.setattr(subprocess, "_fork_exec", refuse)
    monkeypatch.setattr(subprocess, "_USE_POSIX_SPAWN", False)
    monkeypatch.setattr(_posixsubprocess, "fork_exec", refuse)
    monkeypatch.setattr(os, "fork", refuse)
