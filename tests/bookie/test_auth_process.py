"""A real `quire bookie` behind its door. With QUIRE_BOOKIE_AUTH_SECRET it refuses a raw socket
and the real client without the secret or with another one, and serves one with it. With
QUIRE_BOOKIE_TLS_CERT_FILE and _KEY_FILE it speaks TLS to clients that trust the test CA (made
here with `cryptography`) and to nobody else; with QUIRE_BOOKIE_TLS_CA_FILE as well it asks for a
client certificate the CA signed (mutual TLS). Settings that cannot work stop it at start (exit
2) without showing the secret."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Iterator
from pathlib import Path

import pytest

from app.cli import main
from bookie.auth import ClientSecurity
from bookie.client import BookieClientConfig, BookieLedgerClient
from bookie.errors import BookieError, ErrorCode
from bookie.protocol import CODE, Op, encode_frame
from bookie.types import LedgerSpec
from tests.bookie.conftest import BookieProcess, start_bookie_process
from tests.bookie.raw import Raw
from tests.tls_support import CertAuthority

SECRET = "a secret all the cluster shares"


def client(security: ClientSecurity) -> BookieLedgerClient:
    return BookieLedgerClient(
        BookieClientConfig(connect_timeout_s=5, request_timeout_s=10, security=security)
    )


async def write_and_read(address: str, ledger_id: int, security: ClientSecurity) -> list[bytes]:
    c = client(security)
    try:
        spec = LedgerSpec(ledger_id, (address,))
        writer = await c.create_ledger(spec)
        await asyncio.gather(*(writer.add_entry(b"entry %d" % i) for i in range(20)))
        await writer.close()
        return await c.read_entries(spec, 0, 19)
    finally:
        await c.close()


async def stats_error(address: str, security: ClientSecurity) -> BookieError:
    """The error a client with `security` gets for one request to the bookie."""
    c = client(security)
    try:
        with pytest.raises(BookieError) as info:
            await c.bookie_stats(address)
        return info.value
    finally:
        await c.close()


def served(address: str, security: ClientSecurity, ledger_id: int) -> None:
    assert asyncio.run(write_and_read(address, ledger_id, security)) == [b"entry %d" % i for i in range(20)]


@pytest.fixture(scope="module")
def ca(tmp_path_factory: pytest.TempPathFactory) -> CertAuthority:
    return CertAuthority(tmp_path_factory.mktemp("bookie-ca"))


@contextlib.contextmanager
def started(tmp_path: Path, env: dict[str, str]) -> Iterator[BookieProcess]:
    bookie = start_bookie_process(tmp_path, env=env)
    try:
        yield bookie
    finally:
        bookie.stop()


# --- the cluster secret ------------------------------------------------------------------------------


def test_a_bookie_with_a_secret_serves_only_clients_that_know_it(tmp_path: Path) -> None:
    secret_file = tmp_path / "bookie.secret"
    secret_file.write_text(SECRET + "\n")  # as `echo` writes it: the line break is not part of it
    with started(tmp_path, {"QUIRE_BOOKIE_AUTH_SECRET": f"file:{secret_file}"}) as bookie:
        raw = Raw(bookie.port)
        raw.send(encode_frame(Op.STATS, 0, 1))
        (frame,) = raw.recv()
        assert frame[3][:2] == CODE.pack(ErrorCode.NOT_AUTHENTICATED) and raw.closed_by_peer()

        nobody = asyncio.run(stats_error(bookie.address, ClientSecurity()))
        assert nobody.code == ErrorCode.NOT_AUTHENTICATED
        wrong = asyncio.run(
            stats_error(bookie.address, ClientSecurity(secret=b"not the secret, but long enough"))
        )
        assert wrong.code == ErrorCode.NOT_AUTHENTICATED and "could not prove" in wrong.message
        served(bookie.address, ClientSecurity(secret=SECRET.encode()), 1)

        log = bookie.log()
        assert "clients authenticate with the cluster secret" in log
        assert "refused connection" in log and SECRET not in log


# --- TLS ---------------------------------------------------------------------------------------------------


def tls_env(ca: CertAuthority, name: str, mutual: bool) -> dict[str, str]:
    cert, key = ca.issue(name, server=True)
    env = {"QUIRE_BOOKIE_TLS_CERT_FILE": str(cert), "QUIRE_BOOKIE_TLS_KEY_FILE": str(key)}
    return {**env, "QUIRE_BOOKIE_TLS_CA_FILE": str(ca.ca_file)} if mutual else env


def test_a_tls_bookie_serves_clients_that_trust_its_ca_and_nobody_else(
    tmp_path: Path, ca: CertAuthority
) -> None:
    with started(tmp_path, tls_env(ca, "bookie-tls", mutual=False)) as bookie:
        served(bookie.address, ClientSecurity(ca_file=str(ca.ca_file)), 1)
        plain = asyncio.run(stats_error(bookie.address, ClientSecurity()))
        assert plain.code in (ErrorCode.UNAVAILABLE, ErrorCode.TIMEOUT)
        stranger = CertAuthority(tmp_path / "other-ca")
        distrust = asyncio.run(stats_error(bookie.address, ClientSecurity(ca_file=str(stranger.ca_file))))
        assert distrust.code == ErrorCode.UNAVAILABLE and "CERTIFICATE_VERIFY_FAILED" in distrust.message
        assert "listening on" in bookie.log() and "(TLS, open to anyone who reaches it)" in bookie.log()


def test_a_mutual_tls_bookie_asks_for_a_certificate_its_ca_signed(tmp_path: Path, ca: CertAuthority) -> None:
    with started(tmp_path, tls_env(ca, "bookie-mtls", mutual=True)) as bookie:
        cert, key = ca.issue("broker-client", server=False)
        served(
            bookie.address, ClientSecurity(ca_file=str(ca.ca_file), cert_file=str(cert), key_file=str(key)), 1
        )
        anonymous = asyncio.run(stats_error(bookie.address, ClientSecurity(ca_file=str(ca.ca_file))))
        assert anonymous.code == ErrorCode.UNAVAILABLE and "certificate" in anonymous.message.lower()
        stranger = CertAuthority(tmp_path / "other-ca")
        other_cert, other_key = stranger.issue("intruder", server=False)
        foreign = ClientSecurity(ca_file=str(ca.ca_file), cert_file=str(other_cert), key_file=str(other_key))
        assert asyncio.run(stats_error(bookie.address, foreign)).code == ErrorCode.UNAVAILABLE
        assert "(mutual TLS)" in bookie.log()


# --- settings that cannot work --------------------------------------------------------------------------


@pytest.mark.parametrize(
    "which", ["short secret", "missing secret file", "cert without key", "client cert without ca", "bad cert"]
)
def test_bookie_door_settings_that_cannot_work_refuse_to_start(
    which: str,
    tmp_path: Path,
    ca: CertAuthority,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    cert, key = ca.issue("settings", server=True)
    junk = tmp_path / "junk.pem"
    junk.write_text("not a certificate")
    env = {
        "short secret": {"QUIRE_BOOKIE_AUTH_SECRET": "tiny-secret"},
        "missing secret file": {"QUIRE_BOOKIE_AUTH_SECRET": f"file:{tmp_path / 'absent'}"},
        "cert without key": {"QUIRE_BOOKIE_TLS_CERT_FILE": str(cert)},
        "client cert without ca": {
            "QUIRE_BOOKIE_TLS_CLIENT_CERT_FILE": str(cert),
            "QUIRE_BOOKIE_TLS_CLIENT_KEY_FILE": str(key),
        },
        "bad cert": {"QUIRE_BOOKIE_TLS_CERT_FILE": str(junk), "QUIRE_BOOKIE_TLS_KEY_FILE": str(key)},
    }[which]
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    with pytest.raises(SystemExit) as info:
        main(["bookie", "--data-dir", str(tmp_path / "never")])
    assert info.value.code == 2
    err = capsys.readouterr().err
    assert "BOOKIE" in err.upper() and "tiny-secret" not in err
    assert not (tmp_path / "never").exists()
