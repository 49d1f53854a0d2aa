"""A secured session against real processes: two brokers and a bookie on PostgreSQL, with
authentication and authorization on, keys and tokens made by `quire tokens`, driven through the
generated client and `quire admin`. Then: the tokens and the key appear in no log, no problem and
no metric; a 307 to the topic's owner keeps working with the token."""

from __future__ import annotations

import base64
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from quire_client import AuthenticatedClient, Client
from quire_client.api.admin import (
    create_namespace,
    create_tenant,
    get_permissions,
    get_topic_stats,
    grant_permission,
    lookup_topic,
)
from quire_client.api.data import ack_messages, create_subscription, produce, receive
from quire_client.models import (
    AckRequest,
    AuthAction,
    MessageList,
    Problem,
    ProduceMessage,
    ProduceRequest,
    SubscriptionRequest,
    SubscriptionRequestInitialPosition,
    TenantInfo,
)

from tests.api.conftest import START_TIMEOUT_S, Stack, postgres_stack
from tests.support import REPO, QuireProcess, free_port, port_open, wait_until

TIMEOUT = httpx.Timeout(30.0)
ROLES = ("root", "acme-admin", "app-producer", "app-consumer")


def _quire(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "app.cli", *args],
        cwd=REPO,
        env={**os.environ, **(env or {})},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


class Secrets:
    def __init__(self, root: Path) -> None:
        self.key_file = root / "secret.key"
        assert _quire("tokens", "create-secret-key", "--output", str(self.key_file)).returncode == 0
        self.tokens = {role: self.token(role) for role in ROLES}

    def token(self, role: str, expiry: str | None = None) -> str:
        extra = ["--expiry-time", expiry] if expiry else []
        made = _quire("tokens", "create", "--subject", role, "--secret-key", f"file:{self.key_file}", *extra)
        assert made.returncode == 0, made.stderr
        return made.stdout.strip()

    def all(self) -> list[str]:
        key = self.key_file.read_bytes()
        return [*self.tokens.values(), base64.b64encode(key).decode(), key.hex()]


@pytest.fixture(scope="module")
def secrets(tmp_path_factory: pytest.TempPathFactory) -> Secrets:
    return Secrets(tmp_path_factory.mktemp("keys"))


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory, postgres_url: str, secrets: Secrets) -> Iterator[Stack]:
    with postgres_stack(
        tmp_path_factory.mktemp("auth"),
        postgres_url,
        QUIRE_AUTHENTICATION_ENABLED="true",
        QUIRE_TOKEN_SECRET_KEY=f"file:{secrets.key_file}",
        QUIRE_SUPER_USER_ROLES='["root"]',
        QUIRE_METRICS_REQUIRE_TOKEN="true",
    ) as s:
        yield s


@pytest.fixture(scope="module")
def second_broker(stack: Stack) -> Iterator[str]:
    port = free_port()
    env = {**stack.env(), "QUIRE_PORT": str(port)}
    broker = QuireProcess(["broker"], env, stack.root / "broker-2.log").start()
    try:
        wait_until(lambda: _ready(port) or not broker.alive(), START_TIMEOUT_S, "second broker /readyz")
        assert broker.alive(), broker.log()[-3000:]
        yield f"http://127.0.0.1:{port}"
    finally:
        broker.stop()


def _ready(port: int) -> bool:
    if not port_open(port):
        return False
    try:
        return httpx.get(f"http://127.0.0.1:{port}/readyz", timeout=2).status_code == 200
    except httpx.HTTPError:
        return False


def _as(stack: Stack, secrets: Secrets, role: str, url: str | None = None) -> AuthenticatedClient:
    return AuthenticatedClient(base_url=url or stack.base_url, token=secrets.tokens[role], timeout=TIMEOUT)


def _ok(response: Any, status: int = 204) -> Any:
    assert response.status_code == status, response.content
    return response.parsed


@pytest.fixture(scope="module")
def acme(stack: Stack, secrets: Secrets) -> None:
    """root makes tenant acme for acme-admin, who makes acme/app and grants the two app roles."""
    with _as(stack, secrets, "root") as root:
        body = TenantInfo(admin_roles=["acme-admin"], allowed_clusters=["standalone"])
        _ok(create_tenant.sync_detailed("acme", client=root, body=body))
    with _as(stack, secrets, "acme-admin") as admin:
        _ok(create_namespace.sync_detailed("acme", "app", client=admin))
        for role, action in (("app-producer", AuthAction.PRODUCE), ("app-consumer", AuthAction.CONSUME)):
            _ok(grant_permission.sync_detailed("acme", "app", role, client=admin, body=[action]))
        got = _ok(get_permissions.sync_detailed("acme", "app", client=admin), 200)
        assert got.to_dict() == {"app-consumer": ["consume"], "app-producer": ["produce"]}


def test_a_secured_session(stack: Stack, secrets: Secrets, acme: None) -> None:
    batch = ProduceRequest(messages=[ProduceMessage(key="k", value="v1"), ProduceMessage(value="v2")])
    sub = SubscriptionRequest(initial_position=SubscriptionRequestInitialPosition.EARLIEST)
    with _as(stack, secrets, "app-consumer") as consumer, _as(stack, secrets, "app-producer") as producer:
        _ok(create_subscription.sync_detailed("acme", "app", "orders", "sub", client=consumer, body=sub), 201)
        _ok(produce.sync_detailed("acme", "app", "orders", client=producer, body=batch), 200)
        got = _ok(receive.sync_detailed("acme", "app", "orders", "sub", client=consumer, wait_ms=2000), 200)
        assert isinstance(got, MessageList) and [m.value for m in got.messages] == ["v1", "v2"]
        ack = AckRequest(cumulative=got.messages[-1].message_id)
        _ok(ack_messages.sync_detailed("acme", "app", "orders", "sub", client=consumer, body=ack))
        _ok(get_topic_stats.sync_detailed("acme", "app", "orders", client=consumer), 200)
        refused = receive.sync_detailed("acme", "app", "orders", "sub", client=producer)
        assert refused.status_code == 403 and isinstance(refused.parsed, Problem)
        assert refused.parsed.to_dict()["permission"] == "consume"
    with Client(base_url=stack.base_url, timeout=TIMEOUT) as anonymous:
        assert produce.sync_detailed("acme", "app", "orders", client=anonymous, body=batch).status_code == 401
    expired = secrets.token("app-producer", "1s")
    wait_until(lambda: _status(stack.base_url, expired) == 401, 10, "the token to expire")


def _status(url: str, token: str) -> int:
    response = httpx.get(f"{url}/admin/v2/persistent/acme/app", headers={"Authorization": f"Bearer {token}"})
    return response.status_code


def test_quire_admin_takes_a_token(stack: Stack, secrets: Secrets, acme: None) -> None:
    argv = ["admin", "--url", stack.base_url, "namespaces", "permissions", "acme/app"]
    with_flag = _quire(argv[0], "--token", secrets.tokens["acme-admin"], *argv[1:])
    assert with_flag.returncode == 0, with_flag.stderr
    assert json.loads(with_flag.stdout)["app-producer"] == ["produce"]
    from_env = _quire(*argv, env={"QUIRE_ADMIN_TOKEN": secrets.tokens["acme-admin"]})
    assert from_env.returncode == 0 and from_env.stdout == with_flag.stdout
    without = _quire(*argv)
    assert without.returncode == 1 and "401" in without.stderr
    refused = _quire(*argv, env={"QUIRE_ADMIN_TOKEN": secrets.tokens["app-producer"]})
    assert refused.returncode == 1 and "403" in refused.stderr and "admin of tenant acme" in refused.stderr


def test_a_redirect_to_the_owner_keeps_the_token(
    stack: Stack, secrets: Secrets, acme: None, second_broker: str
) -> None:
    """The generated client sends the token again to the owner, which httpx alone would not."""
    brokers = [stack.base_url, second_broker]
    with _as(stack, secrets, "app-producer") as producer:
        owner = _ok(lookup_topic.sync_detailed("acme", "app", "redirected", client=producer), 200).http_url
    other = next(url for url in brokers if url.rstrip("/") != owner.rstrip("/"))
    batch = ProduceRequest(messages=[ProduceMessage(value="x")])
    with _as(stack, secrets, "app-producer", url=other) as producer:
        response = produce.sync_detailed("acme", "app", "redirected", client=producer, body=batch)
    assert response.status_code == 200, response.content
    plain = httpx.post(
        f"{other}/v1/topics/acme/app/redirected/messages",
        json={"messages": [{"value": "x"}]},
        headers={"Authorization": f"Bearer {secrets.tokens['app-producer']}"},
        follow_redirects=True,
        timeout=TIMEOUT,
    )
    assert plain.status_code == 401  # what httpx does alone: the owner gets no token


def test_metrics_need_a_super_user_and_nothing_leaks(stack: Stack, secrets: Secrets, acme: None) -> None:
    assert httpx.get(f"{stack.base_url}/metrics", timeout=TIMEOUT).status_code == 401
    assert httpx.get(f"{stack.base_url}/healthz", timeout=TIMEOUT).status_code == 200
    scraped = httpx.get(
        f"{stack.base_url}/metrics",
        headers={"Authorization": f"Bearer {secrets.tokens['root']}"},
        timeout=TIMEOUT,
    )
    assert scraped.status_code == 200
    logs = "".join(path.read_text(errors="replace") for path in stack.root.glob("*.log"))
    for secret in secrets.all():
        assert secret not in scraped.text
        assert secret not in logs
