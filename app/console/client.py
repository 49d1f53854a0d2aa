"""The console's only way to the cluster: Quire's own REST and admin API, called over HTTP with
the session's token, so every call passes the same gate (authentication, authorization) as a
script's would and the console can do nothing its user's token could not.

The calls go in-process: an httpx client whose transport for CONSOLE_ORIGIN is the broker's own
ASGI app (no socket, no port to know), so a page costs a few function calls, not connections. A
307 to the topic's owner (another broker) leaves through an ordinary HTTP transport.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote

import httpx
import orjson

CONSOLE_ORIGIN = "http://quire.console"
TIMEOUT_S = 10.0


@dataclass(frozen=True, slots=True)
class Problem:
    """An API refusal as its problem+json says it (RFC 9457), for the page to show."""

    status: int
    title: str
    detail: str
    type: str = "about:blank"

    @classmethod
    def of(cls, response: httpx.Response) -> Problem:
        try:
            body = response.json()
        except ValueError:
            body = {}
        if not isinstance(body, dict):
            body = {}
        return cls(
            status=response.status_code,
            title=str(body.get("title") or response.reason_phrase),
            detail=str(body.get("detail") or response.text[:300]),
            type=str(body.get("type") or "about:blank"),
        )


class ApiRefused(Exception):
    """The API answered 4xx or 5xx: the problem is shown, never hidden behind a 500."""

    def __init__(self, problem: Problem) -> None:
        super().__init__(f"{problem.status} {problem.title}: {problem.detail}")
        self.problem = problem


def path(*segments: str) -> str:
    """Names from the user become path segments, each quoted whole."""
    return "/".join(quote(s, safe="") for s in segments)


class ApiClient:
    """One request's view of the API, with that session's token (or none: authentication off)."""

    def __init__(self, http: httpx.AsyncClient, token: str | None) -> None:
        self._http = http
        self._headers = {"authorization": f"Bearer {token}"} if token else {}

    async def call(
        self, method: str, url: str, *, params: dict[str, Any] | None = None, body: Any = None
    ) -> Any:
        content = None if body is None else orjson.dumps(body)
        headers = self._headers if content is None else {**self._headers, "content-type": "application/json"}
        try:
            response = await self._http.request(method, url, params=params, content=content, headers=headers)
        except httpx.HTTPError as exc:
            raise ApiRefused(Problem(503, "Unreachable", f"{method} {url}: {exc}")) from exc
        if response.status_code >= 400:
            raise ApiRefused(Problem.of(response))
        if response.status_code == 204 or not response.content:
            return None
        if response.headers.get("content-type", "").startswith("text/plain"):
            return response.text
        return response.json()

    async def get(self, url: str, **params: Any) -> Any:
        return await self.call("GET", url, params=params or None)

    async def text(self, url: str) -> str:
        response = await self._http.get(url, headers=self._headers)
        if response.status_code >= 400:
            raise ApiRefused(Problem.of(response))
        return response.text


class _NotConsoleCalls(logging.Filter):
    """httpx logs every request at INFO; the console's in-process calls (several per page, and
    polls every few seconds) would bury the broker's own lines, so those are left out."""

    def filter(self, record: logging.LogRecord) -> bool:
        return not any(
            isinstance(a, httpx.URL) and str(a).startswith(CONSOLE_ORIGIN) for a in record.args or ()
        )


def in_process_client(app: Any) -> httpx.AsyncClient:
    """An httpx client whose requests to CONSOLE_ORIGIN are served by `app` itself, through its
    full ASGI entry (gate, body cap, fast path, routes); redirects to other brokers go out."""
    log = logging.getLogger("httpx")
    if not any(isinstance(f, _NotConsoleCalls) for f in log.filters):
        log.addFilter(_NotConsoleCalls())
    return httpx.AsyncClient(
        base_url=CONSOLE_ORIGIN,
        mounts={CONSOLE_ORIGIN: httpx.ASGITransport(app=app)},
        follow_redirects=True,
        timeout=TIMEOUT_S,
    )
