"""`make bench-auth`: Quire's batched produce and consume rows of `make bench` on two stacks, one
with authentication off and one with it on (HS256 tokens, authorization on, a role that is neither
a super-user nor a tenant admin, so every request checks a namespace permission), taking turns
row set by row set, each side's best of ROUNDS runs, and the ratio.

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


ROUNDS = 2  # each side's best of two, the sides taking turns: one run of a row varies by 20% here


def measure(port: int, round_: int) -> dict[str, float]:
    return {
        "batch100": 100 * wrk_rate(port, f"{TOPIC}/b100/messages", batch_body(100), BATCH_CONNECTIONS),
        "batch1000": 1000 * wrk_rate(port, f"{TOPIC}/b1000/messages", batch_body(1000), BATCH_CONNECTIONS),
        "consume": bounded(quire_consume(port, f"drain-{round_}"), PHASE_TIMEOUT_S, "quire consume"),
    }


def best(rows: list[dict[str, float]]) -> dict[str, float]:
    return {key: max(row[key] for row in rows) for key in ROWS}


def secured(port: int, key: bytes) -> str:
    """A super-user lets `bench-app` produce and consume in public/default; its token, which the
    rows run with."""
    root = create_token("bench-root", key, "HS256")
    url = f"http://{HOST}:{port}/admin/v2/namespaces/public/default/permissions/bench-app"
    granted = httpx.post(url, json=["produce", "consume"], headers={"Authorization": f"Bearer {root}"})
    granted.raise_for_status()
    return create_token("bench-app", key, "HS256", 3600)


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
    off_rows: list[dict[str, float]] = []
    on_rows: list[dict[str, float]] = []
    try:
        with quire_stack(tmp / "off") as off_port, quire_stack(tmp / "on", env) as on_port:
            token = secured(on_port, key)
            for round_ in range(ROUNDS):
                progress(f"round {round_ + 1}: authentication off")
                http_load.EXTRA_HEADERS.clear()
                off_rows.append(measure(off_port, round_))
                progress(f"round {round_ + 1}: authentication on")
                http_load.EXTRA_HEADERS["Authorization"] = f"Bearer {token}"
                on_rows.append(measure(on_port, round_))
        off, on = best(off_rows), best(on_rows)
    finally:
        http_load.EXTRA_HEADERS.clear()
        shutil.rmtree(tmp, ignore_errors=True)
    print(f"\nQuire with authentication off and on, best of {ROUNDS} runs each (bar: on >= {BAR:.0%} of off)")
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
