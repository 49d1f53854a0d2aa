"""Console pages above a topic: login, the cluster (brokers, bookies, throughput), tenants,
namespaces with their topics and policies, and Kafka consumer groups."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable
from typing import Any, TypeVar

from fastapi import APIRouter
from starlette.responses import Response

from app.console import CONSOLE_URL
from app.console.charts import legend, now_point, svg
from app.console.client import ApiRefused, Problem, path
from app.console.web import Console, Ctx, page

T = TypeVar("T")
TOPICS_PER_PAGE = 100
NAMESPACE_POLICIES = (
    "retention",
    "messageTTL",
    "compactionThreshold",
    "deduplication",
    "rolloverPolicy",
    "compactionPolicy",
    "backlogQuotaMap",
)
RATE_SERIES = ("quire_rate_in", "quire_rate_out", "quire_throughput_in", "quire_throughput_out")


async def attempt(call: Awaitable[T]) -> tuple[T | None, Problem | None]:
    """A section of a page: its data, or the problem the API answered (the rest still renders)."""
    try:
        return await call, None
    except ApiRefused as exc:
        return None, exc.problem


def rates_from_metrics(text: str) -> tuple[float, float, float, float]:
    """Sum each topic's rate gauges from a broker's Prometheus text (the `_others` row too)."""
    sums = dict.fromkeys(RATE_SERIES, 0.0)
    for line in text.splitlines():
        if not line.startswith("quire_"):
            continue
        name = line.split("{", 1)[0].split(" ", 1)[0]
        if name in sums:
            try:
                sums[name] += float(line.rsplit(" ", 1)[1])
            except (IndexError, ValueError):
                continue
    return (
        sums["quire_rate_in"],
        sums["quire_rate_out"],
        sums["quire_throughput_in"],
        sums["quire_throughput_out"],
    )


def cluster_routes(router: APIRouter, console: Console) -> None:
    @router.get(CONSOLE_URL, include_in_schema=False)
    @page(console)
    async def cluster(ctx: Ctx) -> Response:
        (brokers, brokers_problem), (bookies, bookies_problem), (under, _), may = await asyncio.gather(
            attempt(ctx.api.get("/admin/v2/brokers")),
            attempt(ctx.api.get("/admin/v2/bookies/all")),
            attempt(ctx.api.get("/admin/v2/bookies/underreplicated")),
            ctx.may(decommission=("POST", "/admin/v2/bookies/_/decommission")),
        )
        return ctx.render(
            "cluster.html",
            may=may,
            brokers=brokers or [],
            brokers_problem=brokers_problem,
            bookies=(bookies or {}).get("bookies", []),
            bookies_problem=bookies_problem,
            under=(under or {}).get("ledgers", []),
            chart_url=f"{CONSOLE_URL}/cluster/chart",
        )

    @router.get(CONSOLE_URL + "/cluster/chart", include_in_schema=False)
    @page(console)
    async def cluster_chart(ctx: Ctx) -> Response:
        brokers, _ = await attempt(ctx.api.get("/admin/v2/brokers"))
        urls = [b["httpUrl"].rstrip("/") + "/metrics" for b in brokers or []] or ["/metrics"]
        texts = await asyncio.gather(*(attempt(ctx.api.text(u)) for u in urls))
        total = [0.0, 0.0, 0.0, 0.0]
        for text, _problem in texts:
            for i, v in enumerate(rates_from_metrics(text or "")):
                total[i] += v
        problems = [p for text, p in texts if p is not None]
        if len(problems) == len(texts):  # no broker's rates could be read: say why, draw nothing
            return ctx.render(
                "chart.html", fragment=True, charts=[], scope="the cluster", problem=problems[0]
            )
        points = console.history.add("cluster", now_point(*total))
        return ctx.render(
            "chart.html", fragment=True, charts=_charts(points), scope="the cluster", problem=None
        )

    @router.post(CONSOLE_URL + "/bookies/{bookie_id}/decommission", include_in_schema=False)
    @page(console)
    async def decommission(ctx: Ctx, bookie_id: str) -> Response:
        form = await ctx.form()
        method = "DELETE" if form.get("cancel") else "POST"
        await ctx.api.call(method, f"/admin/v2/bookies/{path(bookie_id)}/decommission")
        done = "decommission cancelled" if method == "DELETE" else "decommissioning: its ledgers move away"
        return ctx.back(CONSOLE_URL, ok=f"bookie {bookie_id}: {done}")

    tenant_routes(router, console)
    namespace_routes(router, console)
    kafka_routes(router, console)
    login_routes(router, console)


def _charts(points: list[Any]) -> list[dict[str, Any]]:
    return [{"kind": k, "svg": svg(points, k), "legend": legend(points, k)} for k in ("messages", "bytes")]


def tenant_routes(router: APIRouter, console: Console) -> None:
    @router.get(CONSOLE_URL + "/tenants", include_in_schema=False)
    @page(console)
    async def tenants(ctx: Ctx) -> Response:
        names: list[str] = await ctx.api.get("/admin/v2/tenants")
        q = ctx.request.query_params.get("q", "").strip()
        shown = [n for n in sorted(names) if q.lower() in n.lower()]
        details = await asyncio.gather(*(attempt(ctx.api.get(f"/admin/v2/tenants/{path(n)}")) for n in shown))
        rows = [{"name": n, "info": info, "problem": p} for n, (info, p) in zip(shown, details, strict=True)]
        may = await ctx.may(create=("PUT", "/admin/v2/tenants/_"), delete=("DELETE", "/admin/v2/tenants/_"))
        return ctx.render("tenants.html", rows=rows, total=len(names), q=q, may=may)

    @router.post(CONSOLE_URL + "/tenants", include_in_schema=False)
    @page(console)
    async def tenant_action(ctx: Ctx) -> Response:
        form = await ctx.form()
        name = form.get("name", "").strip()
        if form.get("action") == "delete":
            await ctx.api.call("DELETE", f"/admin/v2/tenants/{path(name)}")
            return ctx.back(CONSOLE_URL + "/tenants", ok=f"tenant {name} deleted")
        roles = [r.strip() for r in form.get("admin_roles", "").split(",") if r.strip()]
        await ctx.api.call(
            "PUT", f"/admin/v2/tenants/{path(name)}", body={"adminRoles": roles, "allowedClusters": []}
        )
        return ctx.back(f"{CONSOLE_URL}/tenants/{path(name)}", ok=f"tenant {name} created")

    @router.get(CONSOLE_URL + "/tenants/{tenant}", include_in_schema=False)
    @page(console)
    async def tenant(ctx: Ctx, tenant: str) -> Response:
        names: list[str] = await ctx.api.get(f"/admin/v2/namespaces/{path(tenant)}")
        lists = await asyncio.gather(
            *(attempt(ctx.api.get(f"/admin/v2/persistent/{path(*n.split('/', 1))}")) for n in names)
        )
        rows = [
            {"name": n, "short": n.split("/", 1)[-1], "topics": None if t is None else len(t), "problem": p}
            for n, (t, p) in zip(names, lists, strict=True)
        ]
        url = f"/admin/v2/namespaces/{path(tenant)}/_"
        may = await ctx.may(create=("PUT", url), delete=("DELETE", url))
        return ctx.render("tenant.html", tenant=tenant, rows=rows, may=may)

    @router.post(CONSOLE_URL + "/tenants/{tenant}", include_in_schema=False)
    @page(console)
    async def namespace_action(ctx: Ctx, tenant: str) -> Response:
        form = await ctx.form()
        name = form.get("name", "").strip()
        url = f"/admin/v2/namespaces/{path(tenant, name)}"
        if form.get("action") == "delete":
            await ctx.api.call("DELETE", url)
            return ctx.back(f"{CONSOLE_URL}/tenants/{path(tenant)}", ok=f"namespace {tenant}/{name} deleted")
        await ctx.api.call("PUT", url)
        return ctx.back(
            f"{CONSOLE_URL}/namespaces/{path(tenant, name)}", ok=f"namespace {tenant}/{name} created"
        )


def namespace_routes(router: APIRouter, console: Console) -> None:
    @router.get(CONSOLE_URL + "/namespaces/{tenant}/{namespace}", include_in_schema=False)
    @page(console)
    async def namespace(ctx: Ctx, tenant: str, namespace: str) -> Response:
        base = f"/admin/v2/namespaces/{path(tenant, namespace)}"
        topic_url = f"/admin/v2/persistent/{path(tenant, namespace)}/_"
        listing, may, *policies = await asyncio.gather(
            ctx.api.get(f"/admin/v2/persistent/{path(tenant, namespace)}"),
            ctx.may(create=("PUT", topic_url), delete=("DELETE", topic_url)),
            *(attempt(ctx.api.get(f"{base}/{p}")) for p in NAMESPACE_POLICIES),
        )
        prefix = f"persistent://{tenant}/{namespace}/"
        names = sorted(n.removeprefix(prefix) for n in listing)
        q = ctx.request.query_params.get("q", "").strip()
        matching = [n for n in names if q.lower() in n.lower()] if q else names
        page_no = max(1, _int(ctx.request.query_params.get("page"), 1))
        pages = max(1, -(-len(matching) // TOPICS_PER_PAGE))
        page_no = min(page_no, pages)
        shown = matching[(page_no - 1) * TOPICS_PER_PAGE : page_no * TOPICS_PER_PAGE]
        return ctx.render(
            "namespace.html",
            tenant=tenant,
            namespace=namespace,
            topics=shown,
            total=len(names),
            matching=len(matching),
            q=q,
            page_no=page_no,
            pages=pages,
            may=may,
            policies=[(n, v, p) for n, (v, p) in zip(NAMESPACE_POLICIES, policies, strict=True)],
        )

    @router.post(CONSOLE_URL + "/namespaces/{tenant}/{namespace}", include_in_schema=False)
    @page(console)
    async def topic_action(ctx: Ctx, tenant: str, namespace: str) -> Response:
        form = await ctx.form()
        name = form.get("name", "").strip()
        url = f"/admin/v2/persistent/{path(tenant, namespace, name)}"
        here = f"{CONSOLE_URL}/namespaces/{path(tenant, namespace)}"
        if form.get("action") == "delete":
            await ctx.api.call("DELETE", url, params={"force": "true" if form.get("force") else "false"})
            return ctx.back(here, ok=f"topic {name} deleted")
        partitions = _int(form.get("partitions"), 0)
        if partitions > 0:
            await ctx.api.call("PUT", url + "/partitions", body=partitions)
        else:
            await ctx.api.call("PUT", url)
        return ctx.back(f"{CONSOLE_URL}/topics/{path(tenant, namespace, name)}", ok=f"topic {name} created")


def kafka_routes(router: APIRouter, console: Console) -> None:
    @router.get(CONSOLE_URL + "/kafka/groups", include_in_schema=False)
    @page(console)
    async def groups(ctx: Ctx) -> Response:
        names: list[str] = await ctx.api.get("/admin/v2/kafka/groups")
        details = await asyncio.gather(
            *(attempt(ctx.api.get(f"/admin/v2/kafka/groups/{path(g)}")) for g in names)
        )
        rows = [{"name": g, "info": info, "problem": p} for g, (info, p) in zip(names, details, strict=True)]
        return ctx.render("groups.html", rows=rows)

    @router.post(CONSOLE_URL + "/kafka/groups", include_in_schema=False)
    @page(console)
    async def delete_group(ctx: Ctx) -> Response:
        form = await ctx.form()
        group = form.get("group", "")
        await ctx.api.call("DELETE", f"/admin/v2/kafka/groups/{path(group)}")
        return ctx.back(CONSOLE_URL + "/kafka/groups", ok=f"group {group}: offsets deleted")


def login_routes(router: APIRouter, console: Console) -> None:
    @router.get(CONSOLE_URL + "/login", include_in_schema=False)
    @page(console, login=False)
    async def login_form(ctx: Ctx) -> Response:
        return ctx.render("login.html", next=ctx.request.query_params.get("next", CONSOLE_URL))

    @router.post(CONSOLE_URL + "/login", include_in_schema=False)
    @page(console, login=False)
    async def login(ctx: Ctx) -> Response:
        form = await ctx.form()
        token = form.get("token", "").strip()
        if not console.auth_on:
            return ctx.back(CONSOLE_URL, ok="authentication is off on this cluster: no token needed")
        try:
            role = console.role_of(token)
        except Exception as exc:  # TokenRefused, or anything the verifier raises on garbage
            return ctx.back(
                f"{CONSOLE_URL}/login", problem=Problem(401, "Unauthorized", f"token refused: {exc}")
            )
        ctx.session = console.sessions.rotate(ctx.session)
        ctx.fresh = True  # the new id goes out in the cookie
        ctx.session.token, ctx.session.role = token, role
        return ctx.back(form.get("next") or CONSOLE_URL, ok=f"logged in as {role}")

    @router.post(CONSOLE_URL + "/logout", include_in_schema=False)
    @page(console, login=False)
    async def logout(ctx: Ctx) -> Response:
        await ctx.form()
        ctx.session.token = ctx.session.role = None
        return ctx.back(f"{CONSOLE_URL}/login", ok="logged out")


def _int(value: str | None, default: int) -> int:
    try:
        return int(value or default)
    except ValueError:
        return default
