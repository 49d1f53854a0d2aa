"""The bookie door's settings reach every side through small frozen configs: the bookie's server
config, the bookie client config of brokers and compactors (and, pickled, of the compactor's
Spark tasks). The secret is read from text or `file:/path`, and never shown."""

from __future__ import annotations

import pickle
from pathlib import Path

import pytest
from pydantic import ValidationError

from app.processes.bookie import door, server_config
from app.settings import Settings
from app.wiring import bookie_client_config
from bookie.client import BookieLedgerClient
from compactor.job import BookieClientFactory
from tests.tls_support import CertAuthority

SECRET = "sixteen or more bytes of secret"


def settings(**values: object) -> Settings:
    return Settings.model_validate(values)


def test_the_secret_is_off_by_default_and_the_port_open() -> None:
    s = settings()
    assert s.bookie_secret() == b""
    assert bookie_client_config(s).security.secret == b""
    assert door(server_config(s)) == "plain TCP, open to anyone who reaches it"


def test_a_secret_from_a_file_loses_its_trailing_line_break(tmp_path: Path) -> None:
    path = tmp_path / "secret"
    path.write_bytes(SECRET.encode() + b"\r\n")
    assert settings(bookie_auth_secret=f"file:{path}").bookie_secret() == SECRET.encode()
    assert settings(bookie_auth_secret=SECRET).bookie_secret() == SECRET.encode()


@pytest.mark.parametrize(
    ("value", "why"), [("too-short", "has 9 bytes"), ("file:/nonexistent/secret", "cannot read")]
)
def test_a_secret_that_cannot_work_is_refused(value: str, why: str) -> None:
    # `quire` prints such an error with the value masked (tests/bookie/test_auth_process.py).
    with pytest.raises(ValidationError, match=why):
        settings(bookie_auth_secret=value)


def test_the_secret_is_never_shown_in_a_dump_of_the_settings() -> None:
    s = settings(bookie_auth_secret=SECRET)
    for text in (repr(s), str(s.model_dump()), s.model_dump_json()):
        assert SECRET not in text
    assert SECRET not in repr(bookie_client_config(s)) and SECRET not in repr(server_config(s))


def test_every_side_gets_the_secret_and_its_tls_files(tmp_path: Path) -> None:
    s = settings(bookie_auth_secret=SECRET)
    client = bookie_client_config(s, bookies=("127.0.0.1:1",))
    assert client.security.secret == SECRET.encode() and client.bookies == ("127.0.0.1:1",)
    assert server_config(s).security.secret == SECRET.encode()
    assert door(server_config(s)) == "plain TCP, clients authenticate with the cluster secret"

    ca = CertAuthority(tmp_path / "ca")
    (cert, key), (client_cert, client_key) = ca.issue("bookie", server=True), ca.issue("broker", server=False)
    files = {
        "bookie_tls_cert_file": str(cert),
        "bookie_tls_key_file": str(key),
        "bookie_tls_ca_file": str(ca.ca_file),
        "bookie_tls_client_cert_file": str(client_cert),
        "bookie_tls_client_key_file": str(client_key),
    }
    tls = settings(**files)
    server = server_config(tls).security
    assert (server.cert_file, server.key_file, server.ca_file) == (str(cert), str(key), str(ca.ca_file))
    assert door(server_config(tls)) == "mutual TLS"
    security = bookie_client_config(tls).security
    assert (security.ca_file, security.cert_file, security.key_file) == (
        str(ca.ca_file),
        str(client_cert),
        str(client_key),
    )
    assert security.ssl_context() is not None and server.ssl_context() is not None


def test_the_compactors_spark_tasks_carry_the_client_config() -> None:
    config = bookie_client_config(settings(bookie_auth_secret=SECRET, bookie_max_frame_bytes=1 << 20))
    shipped = pickle.loads(pickle.dumps(BookieClientFactory(config)))  # as Spark ships a task
    client = shipped()
    assert isinstance(client, BookieLedgerClient) and client.config == config
    assert client.config.security.secret == SECRET.encode() and client.config.max_frame_bytes == 1 << 20
