"""Tokens on the Pulsar listener, with `pulsar-client` against a real standalone with
authentication on: CONNECT without a token or with a bad one is refused; a token's role may
produce or consume only as the namespace's permissions say (AuthorizationError otherwise)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx
import pulsar
import pytest

from tests.api.test_auth_live import Secrets
from tests.pulsar_listener.support import Standalone, serving
from tests.pulsar_listener.test_clients import RECEIVE_MS, topic

pytestmark = pytest.mark.timeout(300)
REFUSED_TIMEOUT_S = 5  # a refused CONNECT: the client retries until its operation timeout


@pytest.fixture(scope="module")
def secrets(tmp_path_factory: pytest.TempPathFactory) -> Secrets:
    return Secrets(tmp_path_factory.mktemp("pulsar-keys"))


@pytest.fixture(scope="module")
def standalone(tmp_path_factory: pytest.TempPathFactory, secrets: Secrets) -> Iterator[Standalone]:
    env = {
        "QUIRE_AUTHENTICATION_ENABLED": "true",
        "QUIRE_TOKEN_SECRET_KEY": f"file:{secrets.key_file}",
        "QUIRE_SUPER_USER_ROLES": '["root"]',
    }
    yield from serving(Path(tmp_path_factory.mktemp("pulsar-auth")), env)


def as_role(standalone: Standalone, token: str | None, timeout_s: int = 30) -> pulsar.Client:
    auth = pulsar.AuthenticationToken(token) if token is not None else None
    return pulsar.Client(standalone.service_url, authentication=auth, operation_timeout_seconds=timeout_s)


@pytest.mark.parametrize("token", [None, "not-a-token"], ids=["none", "garbage"])
def test_connect_without_a_valid_token_is_refused(standalone: Standalone, token: str | None) -> None:
    client = as_role(standalone, token, REFUSED_TIMEOUT_S)
    try:
        with pytest.raises(pulsar.PulsarException):
            client.create_producer(topic()[0])
    finally:
        client.close()


def test_roles_produce_and_consume_as_the_namespace_permits(standalone: Standalone, secrets: Secrets) -> None:
    name, _ = topic()
    root = {"Authorization": f"Bearer {secrets.tokens['root']}"}
    url = f"{standalone.http}/admin/v2/namespaces/public/default/permissions/app-consumer"
    r = httpx.post(url, json=["consume"], headers=root, timeout=10)
    assert r.status_code == 204, r.text
    admin = as_role(standalone, secrets.tokens["root"])
    consumer_client = as_role(standalone, secrets.tokens["app-consumer"])
    try:
        producer = admin.create_producer(name)
        consumer = consumer_client.subscribe(name, "s", initial_position=pulsar.InitialPosition.Earliest)
        producer.send(b"allowed")
        assert consumer.receive(RECEIVE_MS).data() == b"allowed"
        with pytest.raises(pulsar.AuthorizationError):
            consumer_client.create_producer(name)  # consume only
    finally:
        consumer_client.close()
        admin.close()
    nobody = as_role(standalone, secrets.tokens["app-producer"])  # granted nothing here
    try:
        with pytest.raises(pulsar.AuthorizationError):
            nobody.subscribe(name, "t")
        with pytest.raises(pulsar.AuthorizationError):
            nobody.create_producer(name)
    finally:
        nobody.close()
