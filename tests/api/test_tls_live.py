"""HTTPS on the broker's port, with a test CA the test makes (cryptography): a client that trusts
the CA talks to it, through the generated client too, and is redirected to https URLs; one that
does not, or speaks plain HTTP, gets nowhere; with QUIRE_TLS_CA_FILE a client needs a
certificate the CA signed (mutual TLS). Settings that cannot work refuse to start."""

from __future__ import annotations

import datetime
import ipaddress
import ssl
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID
from quire_client import Client
from quire_client.api.admin import lookup_topic
from quire_client.api.data import produce
from quire_client.models import ProduceMessage, ProduceRequest

from app.cli import main
from tests.api.conftest import START_TIMEOUT_S
from tests.support import QuireProcess, free_port, port_open, wait_until

Key = ec.EllipticCurvePrivateKey


def _name(common_name: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])


def _write_key(path: Path, key: Key) -> None:
    path.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
        )
    )


class CertAuthority:
    """A CA, and certificates it signs for 127.0.0.1 (a server) or a client, as PEM files."""

    def __init__(self, root: Path) -> None:
        root.mkdir(parents=True, exist_ok=True)
        self.root = root
        self.key = ec.generate_private_key(ec.SECP256R1())
        now = datetime.datetime.now(datetime.UTC)
        self.cert = (
            x509.CertificateBuilder()
            .subject_name(_name("Quire test CA"))
            .issuer_name(_name("Quire test CA"))
            .public_key(self.key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + datetime.timedelta(days=1))
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .add_extension(
                x509.KeyUsage(False, False, False, False, False, True, True, False, False), critical=True
            )
            .sign(self.key, hashes.SHA256())
        )
        self.ca_file = root / "ca.pem"
        self.ca_file.write_bytes(self.cert.public_bytes(serialization.Encoding.PEM))

    def issue(self, name: str, server: bool) -> tuple[Path, Path]:
        key = ec.generate_private_key(ec.SECP256R1())
        now = datetime.datetime.now(datetime.UTC)
        usage = ExtendedKeyUsageOID.SERVER_AUTH if server else ExtendedKeyUsageOID.CLIENT_AUTH
        builder = (
            x509.CertificateBuilder()
            .subject_name(_name(name))
            .issuer_name(self.cert.subject)
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + datetime.timedelta(days=1))
            .add_extension(x509.ExtendedKeyUsage([usage]), critical=False)
        )
        if server:
            alt = x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))])
            builder = builder.add_extension(alt, critical=False)
        cert_file, key_file = self.root / f"{name}.pem", self.root / f"{name}.key"
        cert_file.write_bytes(
            builder.sign(self.key, hashes.SHA256()).public_bytes(serialization.Encoding.PEM)
        )
        _write_key(key_file, key)
        return cert_file, key_file

    def client_context(self, cert: tuple[Path, Path] | None = None) -> ssl.SSLContext:
        context = ssl.create_default_context(cafile=str(self.ca_file))
        if cert is not None:
            context.load_cert_chain(str(cert[0]), str(cert[1]))
        return context


@pytest.fixture(scope="module")
def ca(tmp_path_factory: pytest.TempPathFactory) -> CertAuthority:
    return CertAuthority(tmp_path_factory.mktemp("ca"))


def _ready(url: str, context: ssl.SSLContext) -> bool:
    try:
        return httpx.get(f"{url}/readyz", verify=context, timeout=2).status_code == 200
    except httpx.HTTPError:
        return False


def _tls_stack(root: Path, ca: CertAuthority, mutual: bool) -> Iterator[str]:
    port, bookie_port = free_port(), free_port()
    cert, key = ca.issue("broker", server=True)
    env = {
        "QUIRE_DATA_DIR": str(root),
        "QUIRE_DATABASE_URL": f"sqlite:///{root / 'metadata.db'}",
        "QUIRE_BOOKIES": f'["127.0.0.1:{bookie_port}"]',
        "QUIRE_PORT": str(port),
        "QUIRE_TLS_CERT_FILE": str(cert),
        "QUIRE_TLS_KEY_FILE": str(key),
        **({"QUIRE_TLS_CA_FILE": str(ca.ca_file)} if mutual else {}),
    }
    (root / "bookie").mkdir()
    bookie_args = ["bookie", "--data-dir", str(root / "bookie"), "--port", str(bookie_port)]
    bookie = QuireProcess(bookie_args, env, root / "bookie.log").start()
    broker = None
    try:
        wait_until(lambda: port_open(bookie_port), START_TIMEOUT_S, "bookie")
        broker = QuireProcess(["broker"], env, root / "broker.log").start()
        url = f"https://127.0.0.1:{port}"
        context = ca.client_context(ca.issue("probe", server=False) if mutual else None)
        wait_until(lambda: _ready(url, context) or not broker.alive(), START_TIMEOUT_S, "broker over https")
        assert broker.alive(), broker.log()[-3000:]
        yield url
    finally:
        for process in (broker, bookie):
            if process is not None:
                process.stop()


@pytest.fixture(scope="module")
def https_url(tmp_path_factory: pytest.TempPathFactory, ca: CertAuthority) -> Iterator[str]:
    yield from _tls_stack(tmp_path_factory.mktemp("tls"), ca, mutual=False)


@pytest.fixture(scope="module")
def mutual_url(tmp_path_factory: pytest.TempPathFactory, ca: CertAuthority) -> Iterator[str]:
    yield from _tls_stack(tmp_path_factory.mktemp("mtls"), ca, mutual=True)


def test_a_client_that_trusts_the_ca_is_served_over_https(https_url: str, ca: CertAuthority) -> None:
    assert httpx.get(f"{https_url}/healthz", verify=ca.client_context()).status_code == 200
    body = ProduceRequest(messages=[ProduceMessage(value="over tls")])
    with Client(base_url=https_url, verify_ssl=ca.client_context(), timeout=httpx.Timeout(30)) as client:
        assert produce.sync_detailed("public", "default", "tls", client=client, body=body).status_code == 200
        owner = lookup_topic.sync_detailed("public", "default", "tls", client=client).parsed
    assert owner is not None and getattr(owner, "http_url", "").startswith("https://127.0.0.1:")


def test_without_the_ca_or_over_plain_http_nothing_is_served(https_url: str) -> None:
    with pytest.raises(httpx.ConnectError):
        httpx.get(f"{https_url}/healthz")  # the system's trust store does not know the test CA
    plain = https_url.replace("https://", "http://")
    with pytest.raises(httpx.HTTPError):
        httpx.get(f"{plain}/healthz", timeout=5)


def test_mutual_tls_needs_a_client_certificate_the_ca_signed(mutual_url: str, ca: CertAuthority) -> None:
    signed = ca.client_context(ca.issue("client", server=False))
    assert httpx.get(f"{mutual_url}/healthz", verify=signed).status_code == 200
    with pytest.raises(httpx.HTTPError):
        httpx.get(f"{mutual_url}/healthz", verify=ca.client_context(), timeout=5)
    stranger = CertAuthority(ca.root / "other")
    with pytest.raises(httpx.HTTPError):
        httpx.get(
            f"{mutual_url}/healthz", verify=ca.client_context(stranger.issue("x", server=False)), timeout=5
        )


@pytest.mark.parametrize("which", ["no key", "key of another certificate", "missing file"])
def test_tls_settings_that_cannot_work_refuse_to_start(
    which: str, ca: CertAuthority, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    cert, key = ca.issue(f"bad-{which.replace(' ', '-')}", server=True)
    _, other_key = ca.issue("other", server=True)
    monkeypatch.setenv("QUIRE_TLS_CERT_FILE", str(cert) if which != "missing file" else "/nonexistent.pem")
    if which != "no key":
        monkeypatch.setenv("QUIRE_TLS_KEY_FILE", str(other_key if which.startswith("key of") else key))
    with pytest.raises(SystemExit) as info:
        main(["broker"])
    assert info.value.code == 2
    assert "TLS" in capsys.readouterr().err
