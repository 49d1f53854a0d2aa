"""The generated client sends its token, and sends it again after a broker's 307 to another
broker, which httpx would drop (another host:port is another origin); never from https to http."""

from __future__ import annotations

import httpx
import pytest
from quire_client import AuthenticatedClient, Client
from quire_client.api.data import produce
from quire_client.models import ProduceMessage, ProduceRequest

TOKEN = "header.payload.signature"
BODY = ProduceRequest(messages=[ProduceMessage(value="x")])


def _cluster(seen: list[tuple[str, str | None]], owner: str) -> httpx.MockTransport:
    """Broker 8080 redirects every request to `owner`, which answers it."""

    def handle(request: httpx.Request) -> httpx.Response:
        seen.append((str(request.url), request.headers.get("authorization")))
        if request.url.port == 8080:
            return httpx.Response(307, headers={"location": owner + request.url.raw_path.decode()})
        return httpx.Response(200, json={"results": [{"message_id": "1:0:0", "duplicate": False}]})

    return httpx.MockTransport(handle)


def test_plain_httpx_drops_the_token_on_a_redirect_to_another_port() -> None:
    """Why the client needs its hook: what httpx itself does."""
    seen: list[tuple[str, str | None]] = []
    transport = _cluster(seen, "http://127.0.0.1:8081")
    with httpx.Client(transport=transport, follow_redirects=True) as client:
        client.post("http://127.0.0.1:8080/x", headers={"Authorization": f"Bearer {TOKEN}"})
    assert seen[1] == ("http://127.0.0.1:8081/x", None)


def test_the_client_sends_its_token_to_the_owner_too() -> None:
    seen: list[tuple[str, str | None]] = []
    transport = _cluster(seen, "http://127.0.0.1:8081")
    client = AuthenticatedClient(
        base_url="http://127.0.0.1:8080", token=TOKEN, httpx_args={"transport": transport}
    )
    with client:
        assert produce.sync_detailed("public", "default", "t", client=client, body=BODY).status_code == 200
    assert [auth for _, auth in seen] == [f"Bearer {TOKEN}", f"Bearer {TOKEN}"]
    assert seen[1][0].startswith("http://127.0.0.1:8081/v1/topics/public/default/t/messages")


async def test_the_async_client_sends_its_token_to_the_owner_too() -> None:
    seen: list[tuple[str, str | None]] = []
    transport = _cluster(seen, "http://127.0.0.1:8081")
    client = AuthenticatedClient(
        base_url="http://127.0.0.1:8080", token=TOKEN, httpx_args={"transport": transport}
    )
    async with client:
        response = await produce.asyncio_detailed("public", "default", "t", client=client, body=BODY)
    assert response.status_code == 200
    assert [auth for _, auth in seen] == [f"Bearer {TOKEN}", f"Bearer {TOKEN}"]


def test_the_token_never_goes_from_https_down_to_http() -> None:
    seen: list[tuple[str, str | None]] = []

    def handle(request: httpx.Request) -> httpx.Response:
        seen.append((str(request.url), request.headers.get("authorization")))
        if request.url.scheme == "https":
            return httpx.Response(307, headers={"location": "http://127.0.0.1:8081/v1/x"})
        return httpx.Response(401, json={"type": "x", "title": "Unauthorized", "status": 401, "detail": "no"})

    client = AuthenticatedClient(
        base_url="https://127.0.0.1:8443", token=TOKEN, httpx_args={"transport": httpx.MockTransport(handle)}
    )
    with client:
        produce.sync_detailed("public", "default", "t", client=client, body=BODY)
    assert seen[1] == ("http://127.0.0.1:8081/v1/x", None)


def test_hooks_of_the_caller_are_kept() -> None:
    calls: list[str] = []
    seen: list[tuple[str, str | None]] = []
    client = AuthenticatedClient(
        base_url="http://127.0.0.1:8080",
        token=TOKEN,
        httpx_args={
            "transport": _cluster(seen, "http://127.0.0.1:8081"),
            "event_hooks": {"request": [lambda r: calls.append(str(r.url.port))]},
        },
    )
    with client:
        produce.sync_detailed("public", "default", "t", client=client, body=BODY)
    assert calls == ["8080", "8081"]
    assert seen[1][1] == f"Bearer {TOKEN}"


@pytest.mark.parametrize("cls", [Client])
def test_a_client_without_a_token_sends_none(cls: type[Client]) -> None:
    seen: list[tuple[str, str | None]] = []
    with cls(
        base_url="http://127.0.0.1:8080", httpx_args={"transport": _cluster(seen, "http://127.0.0.1:8081")}
    ) as c:
        produce.sync_detailed("public", "default", "t", client=c, body=BODY)
    assert [auth for _, auth in seen] == [None, None]
