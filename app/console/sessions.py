"""Console sessions, kept on the server: the browser holds only a random session id in an
HttpOnly, SameSite=Strict cookie; the token it logged in with stays in this process's memory
(never in a URL, a page or a cookie). Each session also carries a CSRF token that every form
posts back, and the messages ("flash") the next page shows.

Sessions live for SESSION_TTL_S after their last use and at most MAX_SESSIONS are kept (the
oldest go first); a broker restart logs everyone out, which is the safe way round.
"""

from __future__ import annotations

import secrets
import time
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Literal

COOKIE = "quire_console"
SESSION_TTL_S = 12 * 3600
MAX_SESSIONS = 10_000


@dataclass(frozen=True, slots=True)
class Flash:
    kind: Literal["ok", "error"]
    text: str
    status: int | None = None
    title: str | None = None


@dataclass(slots=True)
class Session:
    sid: str
    csrf: str
    token: str | None = None
    role: str | None = None
    flashes: list[Flash] = field(default_factory=list)
    used_at: float = field(default_factory=time.monotonic)

    def pop_flashes(self) -> list[Flash]:
        out, self.flashes = self.flashes, []
        return out


class SessionStore:
    def __init__(self, ttl_s: float = SESSION_TTL_S, max_sessions: int = MAX_SESSIONS) -> None:
        self._sessions: OrderedDict[str, Session] = OrderedDict()
        self._ttl_s = ttl_s
        self._max = max_sessions

    def get(self, sid: str | None) -> Session | None:
        if not sid:
            return None
        session = self._sessions.get(sid)
        if session is None:
            return None
        now = time.monotonic()
        if now - session.used_at > self._ttl_s:
            del self._sessions[sid]
            return None
        session.used_at = now
        self._sessions.move_to_end(sid)
        return session

    def new(self) -> Session:
        session = Session(sid=secrets.token_urlsafe(32), csrf=secrets.token_urlsafe(24))
        self._sessions[session.sid] = session
        while len(self._sessions) > self._max:
            self._sessions.popitem(last=False)
        return session

    def rotate(self, old: Session) -> Session:
        """A new id (and CSRF token) for a session whose privileges change, as at login: an id
        someone planted or saw before cannot ride the new login."""
        self.drop(old.sid)
        session = self.new()
        session.flashes = old.flashes
        return session

    def drop(self, sid: str) -> None:
        self._sessions.pop(sid, None)

    def __len__(self) -> int:
        return len(self._sessions)
