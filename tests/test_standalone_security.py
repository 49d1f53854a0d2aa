"""`quire standalone` with every door closed, set once in its environment (it passes that on to
its children): the cluster secret and mutual TLS on the bookie port, tokens on the HTTP port and
on the bookie's and compactor's metrics ports. Produce and consume over REST work, and so does a
compaction run (the compactor's Spark tasks open their own connections to the bookie); a client
of the bookie without the secret or without a certificate gets nothing from it."""

from __future__ import annotations

import asyncio
import re
import secrets
from pathlib import Path

import httpx
import pytest

from app.auth.tokens import create_token
from bookie.auth import ClientSecurity
from bookie.client import BookieClientConfig, BookieLedgerClient
from bookie.errors import BookieError
from tests.metrics_text import scrape
from tests.support import wait_until
from tests.test_cli_standalone import _stop_what_was_started, start  # noqa: F401 - the fixture stops it
from tests.tls_support import CertAuthority

pytestmark = pytest.mark.process

SECRET = "the bookies' secret, shared by the cluster"
TOPIC = "public/default/door"
RUN_BOUND_S = 180.0


def door_env(tmp_path: Path, token_key: bytes) -> dict[str, str]:
    ca = CertAuthority(tmp_path / "ca")
    (cert, key), (client_cert, client_key) = ca.issue("bookie", server=True), ca.issue("quire", server=False)
    (tmp_path / "bookie.secret").write_text(SECRET + "\n")
    (tmp_path / "token.key").write_bytes(token_key)
    return {
        "QUIRE_BOOKIE_AUTH_SECRET": f"file:{tmp_path / 'bookie.secret'}",
        "QUIRE_BOOKIE_TLS_CERT_FILE": str(cert),
        "QUIRE_BOOKIE_TLS_KEY_FILE": str(key),
        "QUIRE_BOOKIE_TLS_CA_FILE": str(ca.ca_file),
        "QUIRE_BOOKIE_TLS_CLIENT_CERT_FILE": str(client_cert),
        "QUIRE_BOOKIE_TLS_CLIENT_KEY_FILE": str(client_key),
        "QUIRE_AUTHENTICATION_ENABLED": "true",
        "QUIRE_TOKEN_SECRET_KEY": f"file:{tmp_path / 'token.key'}",
        "QUIRE_SUPER_USER_ROLES": '["root"]',
        "QUIRE_METRICS_REQUIRE_TOKEN": "true",
    }


def produce_consume_compact(port: int, root: dict[str, str]) -> None:
    base = f"http://127.0.0.1:{port}/v1/topics/{TOPIC}"
    r = httpx.put(f"{base}/subscriptions/s", json={"initial_position": "earliest"}, headers=root, timeout=30)
    assert r.status_code in (200, 201), r.text
    batch = [{"key": k, "value": v} for k, v in (("a", "1"), ("b", "2"), ("a", "3"))]
    r = httpx.post(f"{base}/messages", json={"messages": batch}, headers=root, timeout=30)
    assert r.status_code == 200, r.text
    params: dict[str, str | int] = {"consumer_id": "c", "wait_ms": 1000}
    r = httpx.get(f"{base}/subscriptions/s/messages", params=params, headers=root, timeout=30)
    assert [m["value"] for m in r.json()["messages"]] == ["1", "2", "3"], r.text
    compaction = f"http://127.0.0.1:{port}/admin/v2/persistent/{TOPIC}/compaction"
    assert httpx.put(compaction, headers=root, timeout=30).status_code == 204

    def done() -> bool:
        status = httpx.get(compaction, headers=root, timeout=30).json()
        assert status["status"] != "ERROR", status
        return bool(status["status"] == "SUCCESS" and not status["requested"])

    wait_until(done, RUN_BOUND_S, "the compaction run", interval_s=0.5)


async def bookie_stats(address: str, security: ClientSecurity) -> dict[str, object] | BookieError:
    client = BookieLedgerClient(
        BookieClientConfig(connect_timeout_s=5, request_timeout_s=10, security=security)
    )
    try:
        return await client.bookie_stats(address)
    except BookieError as exc:
        return exc
    finally:
        await client.close()


@pytest.mark.slow  # a standalone and a Spark run: minutes on a busy machine
def test_standalone_with_every_door_closed(tmp_path: Path) -> None:
    token_key = secrets.token_bytes(32)
    env = door_env(tmp_path, token_key)
    proc, port = start(tmp_path, env=env)
    root = {"Authorization": f"Bearer {create_token('root', token_key, 'HS256')}"}
    someone = {"Authorization": f"Bearer {create_token('someone', token_key, 'HS256')}"}
    produce_consume_compact(port, root)

    for metrics_port in (
        int(proc.env["QUIRE_BOOKIE_METRICS_PORT"]),
        int(proc.env["QUIRE_COMPACTOR_METRICS_PORT"]),
    ):
        url = f"http://127.0.0.1:{metrics_port}/metrics"
        assert httpx.get(url, timeout=10).status_code == 401
        assert httpx.get(url, headers=someone, timeout=10).status_code == 403
        assert scrape(metrics_port, headers=root)  # a super-user's token reads them
    assert (
        scrape(int(proc.env["QUIRE_BOOKIE_METRICS_PORT"]), headers=root)["quire_bookie_add_entries_total"]
        >= 1
    )

    found = re.search(r"started bookie \(pid \d+\) on (127\.0\.0\.1:\d+)", proc.log())
    assert found is not None, proc.log()
    address = found.group(1)
    tls = ClientSecurity(
        ca_file=env["QUIRE_BOOKIE_TLS_CA_FILE"],
        cert_file=env["QUIRE_BOOKIE_TLS_CLIENT_CERT_FILE"],
        key_file=env["QUIRE_BOOKIE_TLS_CLIENT_KEY_FILE"],
    )
    member = ClientSecurity(SECRET.encode(), tls.ca_file, tls.cert_file, tls.key_file)
    assert isinstance(asyncio.run(bookie_stats(address, member)), dict)
    assert isinstance(asyncio.run(bookie_stats(address, tls)), BookieError)  # no secret
    assert isinstance(
        asyncio.run(bookie_stats(address, ClientSecurity(SECRET.encode()))), BookieError
    )  # no TLS
    no_cert = ClientSecurity(SECRET.encode(), tls.ca_file)
    assert isinstance(asyncio.run(bookie_stats(address, no_cert)), BookieError)
    assert "(mutual TLS, clients authenticate with the cluster secret)" in proc.log()
    assert SECRET not in proc.log()
