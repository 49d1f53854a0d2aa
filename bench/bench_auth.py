"""`make bench-auth`: Quire's batched produce and consume rows of `make bench`, once with
authentication off and once with it on (HS256 tokens, authorization on, a role that is neither a
super-user nor a tenant admin, so every request checks a namespace permission), and the ratio.

The bar (the security issue): with authentication on, batched produce and consume stay within 10%
of the figures with it off. The broker verifies a token once and then finds it in its cache, and
reads a namespace's grants once per QUIRE_AUTHORIZATION_CACHE_MS, never a JWT verification or a
database read per message (docs/operations.md#security). Exit status 1 when a row misses the bar.
"""

from __future__ import annotations

import base64
import shutil
import sys
import tempfile
from pathlib import Path

import httpx

from app.auth.keys import new_secret_key
from app.auth.tokens import create_token
from bench import http_load
from bench.bench_api import (
    BATCH_CONNECTIONS,
    HOST,
    PHASE_TIMEOUT_S,
    TOPIC,
    batch_body,
    bounded,
    progress,
    quire_consume,
    quire_stack,
    wrk_rate,
)
from bench.http_load import wrk_path

BAR = 0.90
ROWS = {
    "batch100": "produce batches of 100 (msg/s)",
    "batch1000": "produce batches of 1,000 (msg/s)",
    "consume": "consume pull 1,000 + ack (msg/s)",
}


def measure(port: int) -> dict[str, float]:
    return {
        "batch100": 100 * wrk_rate(port, f"{TOPIC}/b100/messages", batch_body(100), BATCH_CONNECTIONS),
        "batch1000": 1000 * wrk_rate(port, f"{TOPIC}/b1000/messages", batch_body(1000), BATCH_CONNECTIONS),
        "consume": bounded(quire_consume(port), PHASE_TIMEOUT_S, "quire consume"),
    }


def secured(port: int, key: bytes) -> None:
    """A super-user lets `bench-app` produce and consume in public/default; the rows run as it."""
    root = create_token("bench-root", key, "HS256")
    url = f"http://{HOST}:{port}/admin/v2/namespaces/public/default/permissions/bench-app"
    granted = httpx.post(url, json=["produce", "consume"], headers={"Authorization": f"Bearer {root}"})
    granted.raise_for_status()
    http_load.EXTRA_HEADERS["Authorization"] = f"Bearer {create_token('bench-app', key, 'HS256', 3600)}"


def main() -> None:
    if wrk_path() is None:
        sys.exit("make bench-auth needs wrk (the HTTP load generator): apt-get install wrk")
    tmp = Path(tempfile.mkdtemp(prefix="quire-bench-auth-"))
    key = new_secret_key()
    env = {
        "QUIRE_AUTHENTICATION_ENABLED": "true",
        "QUIRE_TOKEN_SECRET_KEY": base64.b64encode(key).decode(),
        "QUIRE_SUPER_USER_ROLES": '["bench-root"]',
    }
    try:
        progress("authentication off")
        with quire_stack(tmp / "off") as port:
            off = measure(port)
        progress("authentication on")
        with quire_stack(tmp / "on", env) as port:
            secured(port, key)
            on = measure(port)
    finally:
        http_load.EXTRA_HEADERS.clear()
        shutil.rmtree(tmp, ignore_errors=True)
    print(f"\nQuire with authentication off and on (bar: on >= {BAR:.0%} of off)")
    print(f"{'row':<40}{'off':>12}{'on':>12}{'on/off':>8}")
    missed = []
    for key_, label in ROWS.items():
        ratio = on[key_] / off[key_] if off[key_] else 0.0
        if ratio < BAR:
            missed.append(label)
        print(f"{label:<40}{off[key_]:>12,.0f}{on[key_]:>12,.0f}{ratio:>7.2f}x")
    if missed:
        print(f"\nbelow the bar: {', '.join(missed)}")
        sys.exit(1)


if __name__ == "__main__":
    main()
