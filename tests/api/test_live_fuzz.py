"""Schemathesis fuzzes the live broker from its own spec: no 5xx, and every response (status,
content type, headers, body) is what the spec says. Bounded: a few examples per operation, no
Hypothesis deadline, short long-poll cap. It runs on a stack of its own because it deletes
what it finds (namespaces, topics, subscriptions).

Two sizes: the CI run (6 examples per operation, about 300 cases, a couple of minutes) and the
thorough one, thousands of cases (QUIRE_FUZZ_EXAMPLES per operation, 50 from `make
chaos-fuzz`; over ten minutes here), which also checks the response headers. The thorough one
is skipped unless QUIRE_FUZZ_EXAMPLES is set."""

from __future__ import annotations

import os
from collections import Counter
from collections.abc import Iterator

import pytest
import schemathesis
from hypothesis import HealthCheck, settings
from schemathesis.checks import (
    content_type_conformance,
    not_a_server_error,
    response_headers_conformance,
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


THOROUGH_EXAMPLES = int(os.environ.get("QUIRE_FUZZ_EXAMPLES", "0"))
THOROUGH_CHECKS = [*CHECKS, response_headers_conformance]
MIN_THOROUGH_CASES = 2_000
THOROUGH_SKIP = "the thorough run: set QUIRE_FUZZ_EXAMPLES (make chaos-fuzz)"
thorough_cases: Counter[str] = Counter()


@pytest.mark.slow
@pytest.mark.skipif(not THOROUGH_EXAMPLES, reason=THOROUGH_SKIP)
@schema.exclude(path="/metrics").parametrize()
@settings(
    max_examples=max(THOROUGH_EXAMPLES, 1),
    deadline=None,
    derandomize=True,
    suppress_health_check=list(HealthCheck),
)
def test_api_conforms_to_its_spec_thoroughly(case: schemathesis.Case, fuzz_stack: Stack) -> None:
    thorough_cases[case.operation.label] += 1
    case.call_and_validate(base_url=fuzz_stack.base_url, checks=THOROUGH_CHECKS, timeout=30)


@pytest.mark.slow
@pytest.mark.skipif(not THOROUGH_EXAMPLES, reason=THOROUGH_SKIP)
def test_zz_the_thorough_run_sent_thousands_of_cases(fuzz_stack: Stack) -> None:
    """After the thorough run above (same module, runs after it): the cases it sent, in total."""
    total = sum(thorough_cases.values())
    print(f"\nthorough fuzz: {total} cases over {len(thorough_cases)} operations")
    if THOROUGH_EXAMPLES >= 50:
        assert total >= MIN_THOROUGH_CASES, thorough_cases
