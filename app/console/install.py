"""`install(app)`: the console's routes, its static files (htmx, the stylesheet) and `/` → `/console`."""

from __future__ import annotations

from fastapi import APIRouter, FastAPI
from starlette.responses import RedirectResponse, Response
from starlette.staticfiles import StaticFiles

from app.console import CONSOLE_URL
from app.console.cluster_pages import cluster_routes
from app.console.topic_pages import topic_routes
from app.console.web import Console
from app.routes.common import add_routes

STATIC_URL = CONSOLE_URL + "/static"


def install(app: FastAPI) -> Console:
    console = Console(app)
    router = APIRouter()

    @router.get("/", include_in_schema=False)
    async def root() -> Response:
        return RedirectResponse(CONSOLE_URL, status_code=307)

    cluster_routes(router, console)
    topic_routes(router, console)
    add_routes(app, router)
    app.mount(STATIC_URL, StaticFiles(packages=[("app.console", "static")]), name="console-static")
    app.state.console = console
    return console
