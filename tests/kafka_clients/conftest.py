"""One standalone per test module (SQLite metadata unless the module says otherwise)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.kafka_clients.support import Standalone, standalone
from tests.kinds import kind


@pytest.fixture(scope="module")
@kind("live")
def quire(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Standalone]:
    with standalone(tmp_path_factory.mktemp("quire")) as s:
        yield s
