"""The generated client (clients/python): it is what `make client` makes of the committed spec,
and it follows redirects by default, since any broker answers a request for a topic that another
broker owns with 307 to the owner (docs/rest-api.md#several-brokers).

The live test puts a redirecting server in front of a real broker: every request it gets is
answered 307 with `Location` on the broker (same path and query), as a broker that does not own
the topic answers. With the generator's default (`follow_redirects=False`) the client would stop
at the 307 and the test would fail.
"""

from __future__ import annotations

import filecmp
import shlex
import subprocess
import sys
import threading
import uuid
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import httpx
import pytest
from quire_client import AuthenticatedClient, Client
from quire_client.api.data import produce, read_messages
from quire_client.models import Problem, ProduceMessage, ProduceRequest

from tests.api.conftest import Stack, start_stack
from tests.support import REPO

NS = ("public", "default")
GENERATE_TIMEOUT_S = 120.0


def _generate_command(output: Path) -> list[str]:
    """The Makefile's `client` generate line, writing to `output` instead of clients/python."""
    lines = [line.strip() for line in (REPO / "Makefile").read_text().splitlines()]
    (line,) = [x for x in lines if "openapi-python-client generate" in x]
    argv = shlex.split(line.replace("$(BIN)/", str(Path(sys.executable).parent) + "/"))
    at = argv.index("--output-path")
    argv[at + 1] = str(output)
    return argv


def _files(root: Path) -> set[str]:
    return {
        str(p.relative_to(root))
        for p in root.rglob("*")
        if p.is_file() and "__pycache__" not in p.parts and not any(x.endswith(".egg-info") for x in p.parts)
    }


@pytest.mark.process
def test_committed_client_is_what_make_client_generates(tmp_path: Path) -> None:
    out = tmp_path / "python"
    done = subprocess.run(
        _generate_command(out), cwd=REPO, capture_output=True, text=True, timeout=GENERATE_TIMEOUT_S
    )
    assert done.returncode == 0, done.stdout + done.stderr
    committed = REPO / "clients" / "python"
    names = _files(committed)
    assert names == _files(out), "clients/python is stale: run `make client`"
    _, mismatch, errors = filecmp.cmpfiles(committed, out, sorted(names), shallow=False)
    assert not mismatch and not errors, f"clients/python is stale (run `make client`): {mismatch + errors}"


@pytest.mark.parametrize("cls", [Client, AuthenticatedClient])
def test_clients_follow_redirects_unless_told_not_to(cls: type[Client] | type[AuthenticatedClient]) -> None:
    kwargs = {"token": "t"} if cls is AuthenticatedClient else {}
    client = cls(base_url="http://127.0.0.1:1", **kwargs)
    assert client.get_httpx_client().follow_redirects is True
    assert client.get_async_httpx_client().follow_redirects is True
    off = cls(base_url="http://127.0.0.1:1", follow_redirects=False, **kwargs)
    assert off.get_httpx_client().follow_redirects is False


# --- live: a 307 in front of a real broker -----------------------------------------------------


class Redirector(ThreadingHTTPServer):
    """Answers every request 307 to `target` + the same path and query, and records it."""

    def __init__(self, target: str) -> None:
        self.target = target.rstrip("/")
        self.seen: list[tuple[str, str, bytes]] = []
        super().__init__(("127.0.0.1", 0), _RedirectHandler)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}"


class _RedirectHandler(BaseHTTPRequestHandler):
    server: Redirector

    def _redirect(self) -> None:
        body = self.rfile.read(int(self.headers.get("content-length") or 0))
        self.server.seen.append((self.command, self.path, body))
        problem = b'{"type":"https://quire.dev/problems/not-owner","status":307}'
        self.send_response(307)
        self.send_header("Location", self.server.target + self.path)
        self.send_header("Content-Type", "application/problem+json")
        self.send_header("Content-Length", str(len(problem)))
        self.end_headers()
        self.wfile.write(problem)

    do_GET = do_POST = do_PUT = do_DELETE = _redirect

    def log_message(self, format: str, *args: object) -> None:
        pass


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    s = start_stack(tmp_path_factory.mktemp("client-stack"))
    try:
        yield s
    finally:
        s.stop()


@pytest.fixture
def redirector(broker: Stack) -> Iterator[Redirector]:
    server = Redirector(broker.base_url)
    thread = threading.Thread(target=server.serve_forever, name="redirector", daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=10)


def test_generated_client_follows_a_307_with_method_body_and_query(
    broker: Stack, redirector: Redirector
) -> None:
    topic = f"t-{uuid.uuid4().hex[:10]}"
    body = ProduceRequest(messages=[ProduceMessage(key="k", value="through a redirect")])
    with Client(base_url=redirector.url, timeout=httpx.Timeout(30.0)) as client:
        produced = produce.sync_detailed(*NS, topic, client=client, body=body)
        assert produced.status_code == 200, produced.content
        assert produced.parsed is not None and not isinstance(produced.parsed, Problem)
        (result,) = produced.parsed.results
        page = read_messages.sync_detailed(*NS, topic, client=client, start="earliest", max_messages=5)
    assert page.status_code == 200, page.content
    assert page.parsed is not None and not isinstance(page.parsed, Problem)
    assert [(m.message_id, m.value) for m in page.parsed.messages] == [
        (result.message_id, "through a redirect")
    ]
    # Both requests went to the redirector first: the POST with its body, the GET with its query.
    (post, get) = redirector.seen
    assert post[:2] == ("POST", f"/v1/topics/public/default/{topic}/messages")
    assert b"through a redirect" in post[2]
    assert get[0] == "GET" and get[1].startswith(f"/v1/topics/public/default/{topic}/messages?")
    assert "max_messages=5" in get[1]
    # And what the broker stored came from the redirected POST (read here without a redirect).
    direct = httpx.get(f"{broker.base_url}/v1/topics/public/default/{topic}/messages", timeout=30)
    assert [m["value"] for m in direct.json()["messages"]] == ["through a redirect"]
