"""HTTPS on the broker's port, with a test CA the test makes (cryptography): a client that trusts
the CA talks to it, through the generated client too, and is redirected to https URLs; one that
does not, or speaks plain HTTP, gets nowhere; with QUIRE_TLS_CA_FILE a client needs a
certificate the CA signed (mutual TLS). Settings that cannot work refuse to start."""

from __future__ import annotations

import ssl
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from quire_client import Client
from quire_client.api.admin import lookup_topic
from quire_client.api.data import produce
from quire_client.models import ProduceMessage, ProduceRequest

from app.cli import main
from tests.api.conftest import START_TIMEOUT_S
from tests.support import QuireProcess, free_port, port_open, wait_until
from tests.tls_support import CertAuthority


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
