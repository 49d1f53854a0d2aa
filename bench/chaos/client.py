"""The careful client: what a well-behaved user of a Quire cluster does, over httpx.

It knows every broker's URL. A request for a topic goes to the broker that last owned it (or the
next broker in turn); a 307 is followed to the owner and remembered; a 503, any other 5xx, a
connection error or a timeout is retried after a jittered exponential back-off on the next
broker, until the caller's deadline. Every attempt can be reported to an observer, so the history
holds each answer, not only the last one. It never gives up on its own: the deadline is the
caller's, and past it `Unavailable` is raised.
"""

from __future__ import annotations

import asyncio
import random
import time
from collections.abc import Callable
from typing import Any
from urllib.parse import urlsplit

import httpx

MAX_REDIRECTS = 8
BACKOFF_FIRST_S = 0.05
BACKOFF_MAX_S = 1.0

# Called once per HTTP attempt: (broker base url, status or None, exception name or "").
AttemptObserver = Callable[[str, int | None, str], None]


class Unavailable(Exception):
    """No definite answer before the deadline; `last` says what the last attempt got."""

    def __init__(self, last: str) -> None:
        super().__init__(last)
        self.last = last


class CarefulClient:
    def __init__(self, brokers: list[str], rng: random.Random, request_timeout_s: float = 8.0) -> None:
        self.brokers = brokers
        self.rng = rng
        self.owner: dict[str, str] = {}
        self._next = 0
        self.unexpected: list[str] = []  # 5xx other than 503, with where and when
        self.http = httpx.AsyncClient(
            timeout=httpx.Timeout(request_timeout_s, connect=2.0),
            limits=httpx.Limits(max_connections=200, max_keepalive_connections=100),
            follow_redirects=False,
        )

    async def close(self) -> None:
        await self.http.aclose()

    def _pick(self, topic: str | None) -> str:
        if topic is not None and topic in self.owner:
            return self.owner[topic]
        self._next = (self._next + 1) % len(self.brokers)
        return self.brokers[self._next]

    async def request(
        self,
        method: str,
        path: str,
        *,
        topic: str | None = None,
        deadline: float,
        params: dict[str, Any] | None = None,
        json: Any = None,
        timeout_s: float | None = None,
        observe: AttemptObserver | None = None,
    ) -> httpx.Response:
        """The first definite answer (not 307, not 5xx) for `method path`, retried until the
        `deadline` (a `time.monotonic()` value)."""
        failures = 0
        last = "no attempt"
        while True:
            base = self._pick(topic)
            try:
                response = await self._follow(method, base + path, topic, params, json, timeout_s)
            except (httpx.TransportError, _TooManyRedirects) as exc:
                last = f"{type(exc).__name__} from {base}"
                if observe is not None:
                    observe(base, None, type(exc).__name__)
            else:
                status = response.status_code
                if observe is not None:
                    observe(base, status, "")
                if status < 500:
                    return response
                last = f"{status} from {base}: {response.text[:200]}"
                if status != 503:
                    self.unexpected.append(f"{time.time():.3f} {method} {path}: {last}")
            if topic is not None:
                self.owner.pop(topic, None)
            failures += 1
            pause = self.rng.uniform(0, min(BACKOFF_MAX_S, BACKOFF_FIRST_S * 2**failures))
            if time.monotonic() + pause >= deadline:
                raise Unavailable(last)
            await asyncio.sleep(pause)

    async def _follow(
        self,
        method: str,
        url: str,
        topic: str | None,
        params: dict[str, Any] | None,
        json: Any,
        timeout_s: float | None,
    ) -> httpx.Response:
        extra: dict[str, Any] = {} if timeout_s is None else {"timeout": timeout_s}
        for _ in range(MAX_REDIRECTS):
            response = await self.http.request(method, url, params=params, json=json, **extra)
            if response.status_code != 307:
                return response
            url = response.headers["location"]
            params = None  # the Location carries the query
            if topic is not None:
                parts = urlsplit(url)
                self.owner[topic] = f"{parts.scheme}://{parts.netloc}"
        raise _TooManyRedirects(url)


class _TooManyRedirects(Exception):
    pass
