"""The console's frame: templates, sessions, the per-request API client, login and logout,
CSRF on every form, and how a refusal by the API becomes a page that shows its problem.

A page handler asks `Console.begin(request)` for a `Ctx` (session + API client with that
session's token), calls the API, and answers `ctx.render(...)` or, after an action,
`ctx.back(...)` (303 to the page with a flash message: POST, redirect, GET).
"""

from __future__ import annotations

import asyncio
import hmac
import inspect
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qsl, unquote, urlsplit

import jinja2
from fastapi import FastAPI, Request
from starlette.responses import HTMLResponse, RedirectResponse, Response

from app.console import CONSOLE_URL
from app.console.charts import History
from app.console.client import ApiClient, ApiRefused, Problem, in_process_client
from app.console.present import FILTERS
from app.console.sessions import COOKIE, SESSION_TTL_S, Flash, Session, SessionStore

log = logging.getLogger("quire.console")
HTMX_FILE = "htmx-2.0.11.min.js"
MAX_FORM_BYTES = 1024 * 1024


class LoginRequired(Exception):
    """No token in the session, or the API no longer takes it (401)."""


class Console:
    """What the console keeps for the life of the broker process."""

    def __init__(self, app: FastAPI) -> None:
        self.app = app
        self.sessions = SessionStore()
        self.history = History()
        self.http = in_process_client(app)
        self.env = jinja2.Environment(
            loader=jinja2.PackageLoader("app.console", "templates"),
            autoescape=True,
            undefined=jinja2.StrictUndefined,
            trim_blocks=True,
            lstrip_blocks=True,
        )
        self.env.filters.update(FILTERS)
        self.env.globals.update(base=CONSOLE_URL, htmx=f"{CONSOLE_URL}/static/{HTMX_FILE}")

    @property
    def auth_on(self) -> bool:
        return getattr(self.app.state, "gate", None) is not None

    def role_of(self, token: str) -> str:
        """The role the gate's verifier finds in `token`, or the refusal (app.auth.tokens)."""
        role: str = self.app.state.gate.config.verifier.role(token)
        return role

    async def may(self, role: str | None, checks: dict[str, tuple[str, str]]) -> dict[str, bool]:
        """For each name, whether `role` may call (method, API url): asked of the gate itself
        (app.auth.gate's `may`: its route table and authorizer), so who may do what is written
        once, in app/auth/policy.py. Everything when security is off."""
        gate = getattr(self.app.state, "gate", None)
        if gate is None or role is None:
            return dict.fromkeys(checks, True)
        names = list(checks)
        answers = await asyncio.gather(
            *(gate.may(role, method, unquote(urlsplit(url).path)) for method, url in checks.values())
        )
        return dict(zip(names, answers, strict=True))

    def begin(self, request: Request, *, login: bool = True) -> Ctx:
        session = self.sessions.get(request.cookies.get(COOKIE))
        fresh = session is None
        if session is None:
            session = self.sessions.new()
        if login and self.auth_on and session.token is None:
            raise LoginRequired
        return Ctx(self, request, session, ApiClient(self.http, session.token), fresh)


@dataclass
class Ctx:
    console: Console
    request: Request
    session: Session
    api: ApiClient
    fresh: bool

    def render(self, template: str, status: int = 200, fragment: bool = False, **values: Any) -> Response:
        """A page (which shows and spends the session's flash messages), or a fragment that
        htmx polls into a page (which leaves them for the next page)."""
        html = self.console.env.get_template(template).render(
            session=self.session,
            auth_on=self.console.auth_on,
            path=self.request.url.path,
            flashes=[] if fragment else self.session.pop_flashes(),
            **values,
        )
        return self._cookie(HTMLResponse(html, status_code=status))

    async def may(self, **checks: tuple[str, str]) -> dict[str, bool]:
        """Which of these API calls (name=(method, url)) the session's role may make: the page
        shows the forms that make them only then (the API still decides each call)."""
        return await self.console.may(self.session.role, checks)

    def back(self, to: str, ok: str | None = None, problem: Problem | None = None) -> Response:
        if ok is not None:
            self.session.flashes.append(Flash("ok", ok))
        if problem is not None:
            self.session.flashes.append(Flash("error", problem.detail, problem.status, problem.title))
        return self._cookie(RedirectResponse(safe_next(to), status_code=303))

    def _cookie(self, response: Response) -> Response:
        if self.fresh:
            response.set_cookie(
                COOKIE,
                self.session.sid,
                max_age=SESSION_TTL_S,
                path=CONSOLE_URL,
                httponly=True,
                samesite="strict",
                secure=self.request.url.scheme == "https",
            )
        return response

    async def form(self) -> dict[str, str]:
        """The posted form (application/x-www-form-urlencoded), after its CSRF token is checked."""
        body = await self.request.body()
        if len(body) > MAX_FORM_BYTES:
            raise ApiRefused(Problem(413, "Form too large", f"at most {MAX_FORM_BYTES} bytes"))
        fields = dict(parse_qsl(body.decode("utf-8", "replace"), keep_blank_values=True))
        if not hmac.compare_digest(fields.get("csrf", ""), self.session.csrf):
            raise ApiRefused(
                Problem(403, "Form expired", "the form is from another session: reload and retry")
            )
        return fields


def safe_next(to: str) -> str:
    """Only paths inside the console: a posted `next` cannot send the browser elsewhere."""
    parts = urlsplit(to)
    if parts.scheme or parts.netloc or not parts.path.startswith(CONSOLE_URL):
        return CONSOLE_URL
    return to


Handler = Callable[..., Awaitable[Response]]


def page(console: Console, *, login: bool = True) -> Callable[[Handler], Handler]:
    """Wrap a handler `(ctx, **path_params)`: a missing login goes to the login page; a refusal by
    the API on a page is that page's answer (its status, its problem detail); on an action
    (POST) it goes back to the page with the problem shown."""

    def wrap(handler: Handler) -> Handler:
        async def run(request: Request, **params: Any) -> Response:
            started = time.perf_counter()
            try:
                ctx = console.begin(request, login=login)
            except LoginRequired:
                return RedirectResponse(f"{CONSOLE_URL}/login?next={request.url.path}", status_code=303)
            try:
                response = await handler(ctx, **params)
            except ApiRefused as exc:
                response = _refused(ctx, exc.problem)
            # the page's time on the server, API calls included (`make bench-console` reads it)
            response.headers["server-timing"] = f"console;dur={(time.perf_counter() - started) * 1000:.1f}"
            return response

        # FastAPI reads the signature: the request, then the handler's path parameters (all str).
        wanted = list(inspect.signature(handler).parameters)[1:]
        run.__signature__ = inspect.Signature(  # type: ignore[attr-defined]
            [inspect.Parameter("request", inspect.Parameter.POSITIONAL_OR_KEYWORD, annotation=Request)]
            + [inspect.Parameter(n, inspect.Parameter.KEYWORD_ONLY, annotation=str) for n in wanted]
        )
        run.__name__ = handler.__name__
        return run

    return wrap


def _refused(ctx: Ctx, problem: Problem) -> Response:
    if problem.status == 401 and ctx.console.auth_on:
        ctx.session.token = ctx.session.role = None
        ctx.session.flashes.append(Flash("error", "the token was refused: log in again", 401, "Unauthorized"))
        return ctx._cookie(RedirectResponse(f"{CONSOLE_URL}/login", status_code=303))
    if ctx.request.method == "POST":
        return ctx.back(
            ctx.request.headers.get("x-console-back") or _referer_path(ctx.request), problem=problem
        )
    return ctx.render("problem.html", status=problem.status, problem=problem)


def _referer_path(request: Request) -> str:
    referer = request.headers.get("referer", "")
    parts = urlsplit(referer)
    if parts.netloc and parts.netloc != request.url.netloc:
        return CONSOLE_URL
    return parts.path + (f"?{parts.query}" if parts.query else "") if parts.path else CONSOLE_URL
