"""Schemathesis fuzzes the live broker from its own spec: no 5xx, and every response (status,
content type, headers, body) is what the spec says. Bounded: a few examples per operation, no
Hypothesis deadline, short long-poll cap. It runs on a stack of its own because it deletes
what it finds (namespaces, topics, subscriptions)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import schemathesis
from hypothesis import HealthCheck, settings
from schemathesis.checks import (
    content_type_conformance,
    not_a_server_error,
    response_schema_conformance,
    status_code_conformance,
)

from app.openapi_export import spec
from tests.api.conftest import Stack, start_stack

schema = schemathesis.openapi.from_dict(spec())
CHECKS = [not_a_server_error, status_code_conformance, content_type_conformance, response_schema_conformance]


@pytest.fixture(scope="module")
def fuzz_stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    s = start_stack(
        tmp_path_factory.mktemp("fuzz"), QUIRE_MAX_WAIT_MS="50", QUIRE_MAX_MESSAGES_PER_READ="200"
    )
    try:
        yield s
    finally:
        s.stop()


@schema.exclude(path="/metrics").parametrize()
@settings(
    max_examples=6,
    deadline=None,
    derandomize=True,
    suppress_health_check=list(HealthCheck),
)
def test_api_conforms_to_its_spec(case: schemathesis.Case, fuzz_stack: Stack) -> None:
    case.call_and_validate(base_url=fuzz_stack.base_url, checks=CHECKS, timeout=30)
