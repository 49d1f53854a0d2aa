"""The cap on an HTTP request body, applied before any route reads it.

Limits on messages and batches are the topics layer's (413 with the limit named), but they can
only be judged once the body is parsed; without a cap here a client could make the broker buffer
and parse any amount of bytes first. A declared `content-length` over the cap is refused at once,
without reading the body; a body sent without a length (chunked) is counted as it arrives and
refused as soon as it passes the cap. Either way the answer is a 413 problem naming the setting.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

from app.errors import problem

Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]


async def _answered() -> Message:  # a sentinel: never called
    return {"type": "http.disconnect"}


ANSWERED: Receive = _answered


def _declared_length(scope: MutableMapping[str, Any]) -> int | None:
    for name, value in scope.get("headers", ()):
        if name == b"content-length":
            try:
                return int(value)
            except ValueError:
                return None
    return None


def _too_large(size: int | None, limit: int) -> Message:
    seen = f"{size} bytes" if size is not None else "more"
    response = problem(
        413,
        f"request body is {seen}, over the limit of {limit} bytes (setting max_request_body_bytes)",
        "Request body too large",
        code="request-body-too-large",
        limit=limit,
    )
    return {"status": response.status_code, "headers": response.raw_headers, "body": bytes(response.body)}


async def _answer(send: Send, reply: Message) -> None:
    await send({"type": "http.response.start", "status": reply["status"], "headers": reply["headers"]})
    await send({"type": "http.response.body", "body": reply["body"]})


async def guard(scope: MutableMapping[str, Any], receive: Receive, send: Send, limit: int) -> Receive:
    """The `receive` to hand on: the original one when the declared length fits, a counting one
    when there is no declared length, or ANSWERED once a 413 was sent."""
    declared = _declared_length(scope)
    if declared is not None:
        if declared <= limit:
            return receive
        await _answer(send, _too_large(declared, limit))
        return ANSWERED
    if scope.get("method") in ("GET", "HEAD", "DELETE", "OPTIONS"):
        return receive
    return await _read_bounded(receive, send, limit)


async def _read_bounded(receive: Receive, send: Send, limit: int) -> Receive:
    """A body without a declared length, read here up to the cap (the route would buffer it
    anyway), then handed on as one message; over the cap it is answered 413 at once."""
    parts: list[bytes] = []
    seen = 0
    while True:
        message = await receive()
        if message["type"] != "http.request":
            return _replay(message, receive)  # the client went away: downstream sees the same
        chunk = message.get("body", b"")
        seen += len(chunk)
        if seen > limit:
            await _answer(send, _too_large(None, limit))
            return ANSWERED
        parts.append(chunk)
        if not message.get("more_body", False):
            whole = {"type": "http.request", "body": b"".join(parts), "more_body": False}
            return _replay(whole, receive)


def _replay(first: Message, receive: Receive) -> Receive:
    """`first`, then whatever the server says next (a disconnect, when it comes)."""
    sent = False

    async def replay() -> Message:
        nonlocal sent
        if not sent:
            sent = True
            return first
        return await receive()

    return replay
