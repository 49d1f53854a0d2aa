"""Schemathesis against a live broker with authentication and authorization on, from the spec:
without a token every operation but the open ones is 401; with a role allowed only to produce
and consume in public/default, no operation it is not allowed answers 2xx; with a super-user's
token the answers conform to the spec; never a 5xx. Bounded like tests/api/test_live_fuzz.py."""

from __future__ import annotations

import base64
from collections.abc import Iterator

import httpx
import pytest
import schemathesis
from hypothesis import HealthCheck, settings

from app.auth.keys import new_secret_key
from app.auth.tokens import create_token
from app.openapi_export import spec
from tests.api.conftest import Stack, start_stack
from tests.api.test_live_fuzz import CHECKS

schema = schemathesis.openapi.from_dict(spec())
KEY = new_secret_key()
OPEN = {"healthz", "readyz", "metrics"}  # metrics: QUIRE_METRICS_REQUIRE_TOKEN is off here
APP = "app"


def _token(role: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {create_token(role, KEY, 'HS256', 3600)}"}


@pytest.fixture(scope="module")
def secure_stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    s = start_stack(
        tmp_path_factory.mktemp("fuzz-auth"),
        QUIRE_MAX_WAIT_MS="50",
        QUIRE_MAX_MESSAGES_PER_READ="200",
        QUIRE_AUTHENTICATION_ENABLED="true",
        QUIRE_TOKEN_SECRET_KEY=base64.b64encode(KEY).decode(),
        QUIRE_SUPER_USER_ROLES='["root"]',
    )
    try:
        granted = httpx.post(
            f"{s.base_url}/admin/v2/namespaces/public/default/permissions/{APP}",
            json=["produce", "consume"],
            headers=_token("root"),
            timeout=30,
        )
        assert granted.status_code == 204, granted.text
        yield s
    finally:
        s.stop()


def _allowed_to_app(case: schemathesis.Case) -> bool:
    need = case.operation.definition.raw.get("x-quire-permission")
    if case.operation.definition.raw["operationId"] in OPEN:
        return True
    params = case.path_parameters or {}
    in_public_default = params.get("tenant") == "public" and params.get("namespace") == "default"
    return need in ("produce", "consume", "produce-or-consume") and in_public_default


FUZZ = settings(max_examples=3, deadline=None, derandomize=True, suppress_health_check=list(HealthCheck))


@schema.parametrize()
@FUZZ
def test_without_a_token_only_open_operations_answer(case: schemathesis.Case, secure_stack: Stack) -> None:
    response = case.call(base_url=secure_stack.base_url, timeout=30)
    if case.operation.definition.raw["operationId"] in OPEN:
        assert response.status_code < 500, response.text
    else:
        assert response.status_code == 401, (case.operation.label, response.status_code, response.text[:200])


@schema.parametrize()
@FUZZ
def test_a_produce_and_consume_role_gets_no_2xx_it_is_not_allowed(
    case: schemathesis.Case, secure_stack: Stack
) -> None:
    response = case.call(base_url=secure_stack.base_url, headers=_token(APP), timeout=30)
    assert response.status_code < 500, (case.operation.label, response.text[:300])
    if not _allowed_to_app(case):
        assert not 200 <= response.status_code < 300, (case.operation.label, response.status_code)
        assert response.status_code != 401


@schema.exclude(path="/metrics").parametrize()
@FUZZ
def test_a_super_user_gets_answers_that_conform(case: schemathesis.Case, secure_stack: Stack) -> None:
    case.call_and_validate(base_url=secure_stack.base_url, headers=_token("root"), checks=CHECKS, timeout=30)
