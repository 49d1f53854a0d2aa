"""A `quire bookie` and a `quire broker` sharing the cluster secret and mutual TLS on the bookie
port (from the settings, with a test CA): produce and consume over REST work end to end, the
bookie says at start how its door is closed, and neither process logs the secret. (With tokens
and the metrics ports as well, and through `quire standalone` with its compactor:
tests/test_standalone_security.py.)"""

from __future__ import annotations

from pathlib import Path

import httpx

from tests.api.conftest import start_stack
from tests.tls_support import CertAuthority

SECRET = "a secret the broker and the bookie share"


def test_a_broker_with_the_secret_and_a_certificate_produces_and_consumes(tmp_path: Path) -> None:
    ca = CertAuthority(tmp_path / "ca")
    (cert, key), (client_cert, client_key) = ca.issue("bookie", server=True), ca.issue("broker", server=False)
    stack = start_stack(
        tmp_path / "stack",
        QUIRE_BOOKIE_AUTH_SECRET=SECRET,
        QUIRE_BOOKIE_TLS_CERT_FILE=str(cert),
        QUIRE_BOOKIE_TLS_KEY_FILE=str(key),
        QUIRE_BOOKIE_TLS_CA_FILE=str(ca.ca_file),
        QUIRE_BOOKIE_TLS_CLIENT_CERT_FILE=str(client_cert),
        QUIRE_BOOKIE_TLS_CLIENT_KEY_FILE=str(client_key),
    )
    try:
        base = f"{stack.base_url}/v1/topics/public/default/behind-the-door"
        r = httpx.put(f"{base}/subscriptions/s", json={"initial_position": "earliest"}, timeout=30)
        assert r.status_code in (200, 201), r.text
        batch = [{"value": f"m{i}"} for i in range(5)]
        assert httpx.post(f"{base}/messages", json={"messages": batch}, timeout=30).status_code == 200
        params: dict[str, str | int] = {"consumer_id": "c", "wait_ms": 1000}
        r = httpx.get(f"{base}/subscriptions/s/messages", params=params, timeout=30)
        assert [m["value"] for m in r.json()["messages"]] == [f"m{i}" for i in range(5)], r.text
        assert stack.bookie is not None and stack.broker is not None
        bookie_log, broker_log = stack.bookie.log(), stack.broker.log()
        assert "(mutual TLS, clients authenticate with the cluster secret)" in bookie_log
        assert "refused connection" not in bookie_log
        assert SECRET not in bookie_log + broker_log
    finally:
        stack.stop()
