"""The Pulsar client tests' fixtures: a real `quire standalone` per test module and metadata
store (SQLite, PostgreSQL), and a `pulsar-client` connected to it per test."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pulsar
import pytest

from tests.pulsar_listener.support import CLIENT_TIMEOUT_S, STORES, Standalone, serving_on


@pytest.fixture(scope="module", params=STORES)
def standalone(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Standalone]:
    name = request.module.__name__.rsplit(".", 1)[-1].removeprefix("test_")
    yield from serving_on(request, Path(tmp_path_factory.mktemp(f"pulsar-{name}")))


@pytest.fixture
def client(standalone: Standalone) -> Iterator[pulsar.Client]:
    c = pulsar.Client(standalone.service_url, operation_timeout_seconds=CLIENT_TIMEOUT_S)
    try:
        yield c
    finally:
        c.close()
