"""The Kafka door with authentication and authorization on, against a real bookie and broker:
real clients (confluent-kafka, kafka-python, aiokafka, kcat) authenticate with SASL/PLAIN (the
token as password) or OAUTHBEARER; a bad or missing token gets nothing; a produce-only role
produces but may not consume; a role without grants sees TOPIC_AUTHORIZATION_FAILED."""

from __future__ import annotations

import asyncio
import shutil
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition

from tests.api.conftest import Stack, start_stack
from tests.api.test_auth_live import Secrets
from tests.support import free_port

pytestmark = pytest.mark.timeout(240)
TOPIC = "secured"  # public/default/secured


@pytest.fixture(scope="module")
def secrets(tmp_path_factory: pytest.TempPathFactory) -> Secrets:
    return Secrets(tmp_path_factory.mktemp("keys"))


@pytest.fixture(scope="module")
def kafka(tmp_path_factory: pytest.TempPathFactory, secrets: Secrets) -> Iterator[tuple[Stack, str]]:
    port = free_port()
    stack = start_stack(
        tmp_path_factory.mktemp("stack"),
        QUIRE_KAFKA_PORT=str(port),
        QUIRE_AUTHENTICATION_ENABLED="true",
        QUIRE_TOKEN_SECRET_KEY=f"file:{secrets.key_file}",
        QUIRE_SUPER_USER_ROLES='["root"]',
        QUIRE_KAFKA_GROUP_INITIAL_REBALANCE_DELAY_MS="100",
    )
    try:
        root = {"Authorization": f"Bearer {secrets.tokens['root']}"}
        grant = httpx.post(
            f"{stack.base_url}/admin/v2/namespaces/public/default/permissions/app-producer",
            json=["produce"],
            headers=root,
            timeout=30,
        )
        assert grant.status_code == 204, grant.text
        yield stack, f"127.0.0.1:{port}"
    finally:
        stack.stop()


def plain(bootstrap: str, token: str, **extra: object) -> dict[str, object]:
    return {
        "bootstrap.servers": bootstrap,
        "security.protocol": "SASL_PLAINTEXT",
        "sasl.mechanisms": "PLAIN",
        "sasl.username": "ignored",
        "sasl.password": token,
        **extra,
    }


def produce(config: dict[str, object], n: int, timeout_ms: int = 10_000) -> list[KafkaError | None]:
    """Each message's delivery error (None: delivered); a produce expected to fail is given a
    short `timeout_ms`, since its error comes when the message times out."""
    errors: list[KafkaError | None] = []
    producer = Producer({**config, "acks": "all", "message.timeout.ms": timeout_ms})
    for i in range(n):
        producer.produce(TOPIC, key=b"k%d" % i, value=b"v%d" % i, on_delivery=lambda e, _m: errors.append(e))
    producer.flush(20)
    return errors


def consume_from_start(config: dict[str, object], n: int) -> tuple[list[bytes], KafkaError | None]:
    consumer = Consumer({**config, "group.id": "g", "enable.auto.commit": False})
    consumer.assign([TopicPartition(TOPIC, 0, 0)])
    got: list[bytes] = []
    error = None
    deadline = time.monotonic() + 20
    try:
        while len(got) < n and time.monotonic() < deadline:
            m = consumer.poll(0.5)
            if m is None:
                continue
            if m.error():
                error = m.error()
                break
            got.append(m.value())
    finally:
        consumer.close()
    return got, error


def test_a_super_user_produces_and_consumes_with_plain(kafka: tuple[Stack, str], secrets: Secrets) -> None:
    _, bootstrap = kafka
    config = plain(bootstrap, secrets.tokens["root"])
    assert produce(config, 5) == [None] * 5
    got, error = consume_from_start(config, 5)
    assert error is None and got == [b"v%d" % i for i in range(5)]


def test_a_produce_only_role_may_produce_but_not_consume(kafka: tuple[Stack, str], secrets: Secrets) -> None:
    _, bootstrap = kafka
    config = plain(bootstrap, secrets.tokens["app-producer"])
    assert produce(config, 2) == [None, None]
    got, error = consume_from_start(config, 1)
    assert got == [] and error is not None
    assert error.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED


def test_a_role_without_grants_may_not_produce(kafka: tuple[Stack, str], secrets: Secrets) -> None:
    _, bootstrap = kafka
    errors = produce(plain(bootstrap, secrets.tokens["app-consumer"]), 1)
    assert len(errors) == 1 and errors[0] is not None
    assert errors[0].code() == KafkaError.TOPIC_AUTHORIZATION_FAILED


def test_a_bad_token_and_no_sasl_get_nothing(kafka: tuple[Stack, str], secrets: Secrets) -> None:
    _, bootstrap = kafka
    seen: list[KafkaError] = []
    bad = plain(bootstrap, secrets.tokens["root"][:-4] + "AAAA", error_cb=seen.append)
    assert produce(bad, 1, timeout_ms=2_500)[0] is not None
    assert any(e.code() == KafkaError._AUTHENTICATION for e in seen), seen
    # no SASL at all: the listener closes the connection at the first request after ApiVersions
    none: list[KafkaError] = []
    bare = {"bootstrap.servers": bootstrap, "error_cb": none.append}
    assert produce(bare, 1, timeout_ms=2_500)[0] is not None


def test_kafka_python_and_aiokafka_authenticate(kafka: tuple[Stack, str], secrets: Secrets) -> None:
    from aiokafka import AIOKafkaProducer
    from aiokafka.abc import AbstractTokenProvider
    from kafka import KafkaProducer

    _, bootstrap = kafka
    token = secrets.tokens["root"]
    producer = KafkaProducer(
        bootstrap_servers=bootstrap,
        security_protocol="SASL_PLAINTEXT",
        sasl_mechanism="PLAIN",
        sasl_plain_username="ignored",
        sasl_plain_password=token,
    )
    try:
        assert producer.send(TOPIC, b"from-kafka-python").get(timeout=20).offset >= 0
    finally:
        producer.close(timeout=10)

    class Tokens(AbstractTokenProvider):
        async def token(self) -> str:
            return token

    async def oauth() -> int:
        p = AIOKafkaProducer(
            bootstrap_servers=bootstrap,
            security_protocol="SASL_PLAINTEXT",
            sasl_mechanism="OAUTHBEARER",
            sasl_oauth_token_provider=Tokens(),
        )
        await p.start()
        try:
            return (await p.send_and_wait(TOPIC, b"from-aiokafka")).offset
        finally:
            await p.stop()

    assert asyncio.run(asyncio.wait_for(oauth(), 30)) >= 0


@pytest.mark.skipif(shutil.which("kcat") is None, reason="kcat is installed by make setup")
def test_kcat_authenticates(kafka: tuple[Stack, str], secrets: Secrets, tmp_path: Path) -> None:
    _, bootstrap = kafka
    sasl = ["-X", "security.protocol=SASL_PLAINTEXT", "-X", "sasl.mechanisms=PLAIN"]
    good = [*sasl, "-X", "sasl.username=u", "-X", f"sasl.password={secrets.tokens['root']}"]
    run = subprocess.run(
        ["kcat", "-b", bootstrap, *good, "-P", "-t", TOPIC], input=b"from-kcat\n", timeout=60, check=False
    )
    assert run.returncode == 0
    bad = [*sasl, "-X", "sasl.username=u", "-X", "sasl.password=not-a-token"]
    refused = subprocess.run(
        ["kcat", "-b", bootstrap, *bad, "-L", "-m", "5"], capture_output=True, timeout=60, check=False
    )
    assert refused.returncode != 0
    assert b"from-kcat" not in refused.stdout


async def _closed_by_the_broker(bootstrap: str, first_bytes: bytes) -> bool:
    host, port = bootstrap.rsplit(":", 1)
    reader, writer = await asyncio.open_connection(host, int(port))
    try:
        writer.write(first_bytes)
        await writer.drain()
        return await asyncio.wait_for(reader.read(1), 15) == b""  # EOF: the broker closed it
    finally:
        writer.close()


def test_before_authenticating_a_client_may_not_send_a_huge_frame_nor_wait_for_ever(
    kafka: tuple[Stack, str],
) -> None:
    """Kafka's sasl.server.max.receive.size: a frame declared over 512 KiB before SASL closes the
    connection at once (no 100 MB buffered for a client with no rights); a connection that never
    authenticates is closed after the authentication timeout (10 s)."""
    _, bootstrap = kafka
    huge = (50 * 1024 * 1024).to_bytes(4, "big") + b"\x00" * 1024
    assert asyncio.run(_closed_by_the_broker(bootstrap, huge))
    assert asyncio.run(_closed_by_the_broker(bootstrap, b""))  # silent: closed by the timeout


def _two_tenants(stack: Stack, root: str) -> None:
    """Role a-app may consume in public/default (tenant A's); b-app only in tenant-b/apps."""
    headers = {"Authorization": f"Bearer {root}"}
    base = f"{stack.base_url}/admin/v2"
    assert httpx.put(f"{base}/tenants/tenant-b", json={}, headers=headers, timeout=30).is_success
    assert httpx.put(f"{base}/namespaces/tenant-b/apps", headers=headers, timeout=30).is_success
    for namespace, role in (("public/default", "a-app"), ("tenant-b/apps", "b-app")):
        url = f"{base}/namespaces/{namespace}/permissions/{role}"
        assert httpx.post(url, json=["consume"], headers=headers, timeout=30).status_code == 204


class _GroupMember(threading.Thread):
    """A confluent-kafka consumer in `group`, recording its assignments and what it reads."""

    def __init__(self, config: dict[str, object], group: str) -> None:
        super().__init__(daemon=True)
        self.config = {
            **config,
            "group.id": group,
            "auto.offset.reset": "earliest",
            "session.timeout.ms": 10_000,
            "heartbeat.interval.ms": 300,
        }
        self.assignments: list[set[int]] = []
        self.got: list[bytes] = []
        self.stop = threading.Event()

    def run(self) -> None:
        consumer = Consumer(self.config)
        consumer.subscribe(
            [TOPIC],
            on_assign=lambda _c, ps: self.assignments.append({p.partition for p in ps}),
            on_revoke=lambda _c, _ps: self.assignments.append(set()),
        )
        try:
            while not self.stop.is_set():
                m = consumer.poll(0.2)
                if m is not None and m.error() is None:
                    self.got.append(m.value())
        finally:
            consumer.close()

    def wait_for(self, count: int, timeout_s: float = 30) -> None:
        deadline = time.monotonic() + timeout_s
        while not (self.assignments and len(self.got) >= count) and time.monotonic() < deadline:
            time.sleep(0.1)


def test_another_tenants_role_may_not_join_a_group(kafka: tuple[Stack, str], secrets: Secrets) -> None:
    """Issue 23 (finding 10): groups belong to the listener's namespace (public/default, tenant
    A's here). Tenant B's role, with consume only in its own namespace, joining A's group gets
    GROUP_AUTHORIZATION_FAILED, and A's consumer keeps its partition (no rebalance)."""
    from kafka import KafkaConsumer
    from kafka.errors import GroupAuthorizationFailedError

    stack, bootstrap = kafka
    root = secrets.tokens["root"]
    _two_tenants(stack, root)
    assert produce(plain(bootstrap, root), 1) == [None]  # the topic exists
    a = _GroupMember(plain(bootstrap, secrets.token("a-app")), "shared-group")
    a.start()
    try:
        a.wait_for(1)
        assert a.assignments == [{0}] and a.got, (a.assignments, a.got)
        b = KafkaConsumer(
            TOPIC,
            bootstrap_servers=bootstrap,
            group_id="shared-group",
            security_protocol="SASL_PLAINTEXT",
            sasl_mechanism="PLAIN",
            sasl_plain_username="ignored",
            sasl_plain_password=secrets.token("b-app"),
            auto_offset_reset="earliest",
        )
        try:
            with pytest.raises(GroupAuthorizationFailedError):
                deadline = time.monotonic() + 30
                while time.monotonic() < deadline:
                    b.poll(timeout_ms=200)
        finally:
            b.close()
        count = len(a.got)
        assert produce(plain(bootstrap, root), 1) == [None]
        a.wait_for(count + 1, 20)
        assert a.assignments == [{0}] and len(a.got) > count, (a.assignments, a.got)  # A went on
    finally:
        a.stop.set()
        a.join(30)
        assert not a.is_alive()
