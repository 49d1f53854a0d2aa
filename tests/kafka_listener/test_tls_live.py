"""TLS on the Kafka port (the HTTP port's certificate, key and CA settings), with a CA the test
makes: a client that trusts the CA produces and consumes; a plaintext client gets nothing; with
a CA configured (mutual TLS) a client without a certificate is refused."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition

from tests.api.test_tls_live import CertAuthority, _ready
from tests.support import QuireProcess, free_port, port_open, wait_until

START_TIMEOUT_S = 60.0
pytestmark = pytest.mark.timeout(180)


@pytest.fixture(scope="module")
def ca(tmp_path_factory: pytest.TempPathFactory) -> CertAuthority:
    return CertAuthority(tmp_path_factory.mktemp("ca"))


def _stack(root: Path, ca: CertAuthority, mutual: bool) -> Iterator[str]:
    port, bookie_port, kafka_port = free_port(), free_port(), free_port()
    cert, key = ca.issue("broker", server=True)
    env = {
        "QUIRE_DATA_DIR": str(root),
        "QUIRE_DATABASE_URL": f"sqlite:///{root / 'metadata.db'}",
        "QUIRE_BOOKIES": f'["127.0.0.1:{bookie_port}"]',
        "QUIRE_PORT": str(port),
        "QUIRE_KAFKA_PORT": str(kafka_port),
        "QUIRE_ADVERTISED_ADDRESS": f"127.0.0.1:{port}",
        "QUIRE_TLS_CERT_FILE": str(cert),
        "QUIRE_TLS_KEY_FILE": str(key),
        **({"QUIRE_TLS_CA_FILE": str(ca.ca_file)} if mutual else {}),
    }
    (root / "bookie").mkdir()
    bookie = QuireProcess(
        ["bookie", "--data-dir", str(root / "bookie"), "--port", str(bookie_port)], env, root / "b.log"
    )
    bookie.start()
    broker = None
    try:
        wait_until(lambda: port_open(bookie_port), START_TIMEOUT_S, "bookie")
        broker = QuireProcess(["broker"], env, root / "broker.log").start()
        context = ca.client_context(ca.issue("probe", server=False) if mutual else None)
        url = f"https://127.0.0.1:{port}"
        wait_until(lambda: _ready(url, context) or not broker.alive(), START_TIMEOUT_S, "broker")
        assert broker.alive(), broker.log()[-3000:]
        yield f"127.0.0.1:{kafka_port}"
    finally:
        for process in (broker, bookie):
            if process is not None:
                process.stop()


@pytest.fixture(scope="module")
def tls_bootstrap(tmp_path_factory: pytest.TempPathFactory, ca: CertAuthority) -> Iterator[str]:
    yield from _stack(tmp_path_factory.mktemp("tls"), ca, mutual=False)


@pytest.fixture(scope="module")
def mutual_bootstrap(tmp_path_factory: pytest.TempPathFactory, ca: CertAuthority) -> Iterator[str]:
    yield from _stack(tmp_path_factory.mktemp("mtls"), ca, mutual=True)


def _produce(config: dict[str, object]) -> KafkaError | None:
    errors: list[KafkaError | None] = []
    producer = Producer({**config, "message.timeout.ms": 8_000})
    producer.produce("tls-topic", b"over-tls", on_delivery=lambda e, _m: errors.append(e))
    producer.flush(15)
    return errors[0] if errors else KafkaError(KafkaError._MSG_TIMED_OUT)


def test_a_client_that_trusts_the_ca_produces_and_consumes(tls_bootstrap: str, ca: CertAuthority) -> None:
    config = {
        "bootstrap.servers": tls_bootstrap,
        "security.protocol": "SSL",
        "ssl.ca.location": str(ca.ca_file),
    }
    assert _produce(config) is None
    consumer = Consumer({**config, "group.id": "g", "enable.auto.commit": False})
    consumer.assign([TopicPartition("tls-topic", 0, 0)])
    deadline, value = time.monotonic() + 20, None
    while value is None and time.monotonic() < deadline:
        m = consumer.poll(0.5)
        if m is not None and not m.error():
            value = m.value()
    consumer.close()
    assert value == b"over-tls"


def test_plaintext_gets_nothing_from_a_tls_port(tls_bootstrap: str) -> None:
    assert _produce({"bootstrap.servers": tls_bootstrap}) is not None


def test_mutual_tls_needs_a_client_certificate(mutual_bootstrap: str, ca: CertAuthority) -> None:
    base = {
        "bootstrap.servers": mutual_bootstrap,
        "security.protocol": "SSL",
        "ssl.ca.location": str(ca.ca_file),
    }
    assert _produce(base) is not None
    cert, key = ca.issue("client", server=False)
    assert _produce({**base, "ssl.certificate.location": str(cert), "ssl.key.location": str(key)}) is None
