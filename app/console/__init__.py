"""The web console every broker serves at /console: server-rendered pages (Jinja2) with htmx
for the small live parts, over the public REST and admin API only (app.console.client)."""

CONSOLE_URL = "/console"
