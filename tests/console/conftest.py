"""A real `quire standalone` (authentication off, and one with it on) and Debian's chromium
driven by Playwright, for the console's browser tests; screenshots go to ARTIFACTS (printed)."""

from __future__ import annotations

import os
import secrets
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any, NamedTuple

import httpx
import pytest

from tests.kinds import kind
from tests.support import QuireProcess, free_port, wait_until
from tests.test_cli_standalone import START_TIMEOUT_S, free_port_run

CHROMIUM = os.environ.get("QUIRE_CHROMIUM") or shutil.which("chromium") or "/usr/bin/chromium"


class Standalone(NamedTuple):
    url: str
    proc: QuireProcess
    token_key: bytes | None


def start_standalone(tmp: Path, env: dict[str, str] | None = None) -> QuireProcess:
    port = free_port()
    proc = QuireProcess(
        [
            "standalone",
            "--data-dir",
            str(tmp / "data"),
            "--port",
            str(port),
            "--bookie-port",
            str(free_port_run(4)),
            "--kafka-port",
            str(free_port()),
        ],
        {
            "QUIRE_BOOKIE_METRICS_PORT": str(free_port_run(4)),
            "QUIRE_COMPACTOR_METRICS_PORT": str(free_port()),
            **(env or {}),
        },
        tmp / "standalone.log",
    ).start()
    proc.env["port"] = str(port)

    def ready() -> bool:
        assert proc.alive(), proc.log()
        try:
            return httpx.get(f"http://127.0.0.1:{port}/readyz", timeout=2).status_code == 200
        except httpx.HTTPError:
            return False

    try:
        wait_until(ready, START_TIMEOUT_S, "standalone ready")
    except BaseException:
        proc.stop()
        raise
    return proc


@pytest.fixture(scope="module")
@kind("live")
def standalone(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Standalone]:
    proc = start_standalone(tmp_path_factory.mktemp("standalone"))
    try:
        yield Standalone(f"http://127.0.0.1:{proc.env['port']}", proc, None)
    finally:
        proc.stop()


@pytest.fixture(scope="module")
@kind("live")
def secured_standalone(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Standalone]:
    tmp = tmp_path_factory.mktemp("secured")
    key = secrets.token_bytes(32)
    (tmp / "token.key").write_bytes(key)
    env = {
        "QUIRE_AUTHENTICATION_ENABLED": "true",
        "QUIRE_TOKEN_SECRET_KEY": f"file:{tmp / 'token.key'}",
        "QUIRE_SUPER_USER_ROLES": '["root"]',
    }
    proc = start_standalone(tmp, env)
    try:
        yield Standalone(f"http://127.0.0.1:{proc.env['port']}", proc, key)
    finally:
        proc.stop()


@pytest.fixture(scope="session")
def artifacts() -> Path:
    """Where the screenshots go: QUIRE_CONSOLE_ARTIFACTS, else a fresh directory (printed)."""
    path = Path(os.environ.get("QUIRE_CONSOLE_ARTIFACTS") or (Path("/tmp") / f"quire-console-{os.getpid()}"))
    path.mkdir(parents=True, exist_ok=True)
    print(f"\nconsole screenshots: {path}")
    return path


@pytest.fixture(scope="module")
@kind("live")
def browser() -> Iterator[Any]:
    from playwright.sync_api import sync_playwright

    assert Path(CHROMIUM).exists(), f"no chromium at {CHROMIUM}: scripts/install-system-deps.sh installs it"
    with sync_playwright() as p:
        # --no-sandbox: CI runs as root, where chromium's sandbox refuses to start
        instance = p.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
        try:
            yield instance
        finally:
            instance.close()


class Watched(NamedTuple):
    page: Any
    errors: list[str]


@pytest.fixture
def page(browser: Any) -> Iterator[Watched]:
    """A page in a fresh context (its own cookies) that records console errors, uncaught
    exceptions and failed requests."""
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    page = context.new_page()
    page.set_default_timeout(15_000)
    errors: list[str] = []
    page.on("console", lambda m: errors.append(f"console {m.type}: {m.text}") if m.type == "error" else None)
    page.on("pageerror", lambda e: errors.append(f"page error: {e}"))
    # a poll that htmx cancels because the page moved on (net::ERR_ABORTED) is not a failure
    page.on(
        "requestfailed",
        lambda r: (
            None
            if "ERR_ABORTED" in (r.failure or "")
            else errors.append(f"request failed: {r.url} {r.failure}")
        ),
    )
    try:
        yield Watched(page, errors)
    finally:
        context.close()
