"""Console pages of one topic: stats, throughput chart, subscriptions and their actions, peek,
produce, compaction with its status and horizon, ledgers, producers and policies."""

from __future__ import annotations

import asyncio
import time
from typing import Any

from fastapi import APIRouter
from starlette.responses import Response

from app.console import CONSOLE_URL
from app.console.charts import legend, now_point, svg
from app.console.client import ApiRefused, Problem, path
from app.console.cluster_pages import attempt
from app.console.present import render_payload
from app.console.web import Console, Ctx, page

TOPIC_URL = CONSOLE_URL + "/topics/{tenant}/{namespace}/{topic}"
TOPIC_POLICIES = (
    "retention",
    "compactionThreshold",
    "deduplicationEnabled",
    "messageTTL",
    "rolloverPolicy",
    "compactionPolicy",
)
PEEK_MAX = 100
MODES = ("auto", "text", "json", "hex")


def _names(tenant: str, namespace: str, topic: str) -> dict[str, str]:
    return {
        "admin": f"/admin/v2/persistent/{path(tenant, namespace, topic)}",
        "data": f"/v1/topics/{path(tenant, namespace, topic)}",
        "page": f"{CONSOLE_URL}/topics/{path(tenant, namespace, topic)}",
    }


def _topic_checks(urls: dict[str, str]) -> dict[str, tuple[str, str]]:
    """The API call behind each form of the topic page (a subscription's name does not change
    who may call it, so `_` stands for every one)."""
    admin, data, sub = urls["admin"], urls["data"], f"{urls['admin']}/subscription/_"
    checks = {
        "produce": ("POST", data + "/messages"),
        "browse": ("GET", data + "/messages"),
        "compact": ("PUT", admin + "/compaction"),
        "unload": ("PUT", admin + "/unload"),
        "delete": ("DELETE", admin),
        "sub_create": ("PUT", data + "/subscriptions/_"),
        "sub_reset": ("POST", sub + "/resetcursor/0"),
        "sub_skip": ("POST", sub + "/skip/1"),
        "sub_clear": ("POST", sub + "/skip_all"),
        "sub_delete": ("DELETE", sub),
        "sub_peek": ("GET", sub + "/position/1"),
    }
    checks.update({f"policy_{p}": ("POST", f"{admin}/{p}") for p in TOPIC_POLICIES})
    return checks


def topic_routes(router: APIRouter, console: Console) -> None:
    @router.get(TOPIC_URL, include_in_schema=False)
    @page(console)
    async def topic(ctx: Ctx, tenant: str, namespace: str, topic: str) -> Response:
        return await _topic_page(ctx, tenant, namespace, topic)

    @router.get(TOPIC_URL + "/chart", include_in_schema=False)
    @page(console)
    async def topic_chart(ctx: Ctx, tenant: str, namespace: str, topic: str) -> Response:
        stats = await ctx.api.get(_names(tenant, namespace, topic)["admin"] + "/stats")
        point = now_point(
            stats.get("msgRateIn", 0.0),
            stats.get("msgRateOut", 0.0),
            stats.get("msgThroughputIn", 0.0),
            stats.get("msgThroughputOut", 0.0),
        )
        points = console.history.add(f"topic:{tenant}/{namespace}/{topic}", point)
        charts = [
            {"kind": k, "svg": svg(points, k), "legend": legend(points, k)} for k in ("messages", "bytes")
        ]
        return ctx.render("chart.html", fragment=True, charts=charts, scope="this topic", problem=None)

    @router.get(TOPIC_URL + "/compaction", include_in_schema=False)
    @page(console)
    async def compaction_status(ctx: Ctx, tenant: str, namespace: str, topic: str) -> Response:
        urls = _names(tenant, namespace, topic)
        (status, problem), (internal, _), (stats, _) = await asyncio.gather(
            attempt(ctx.api.get(urls["admin"] + "/compaction")),
            attempt(ctx.api.get(urls["admin"] + "/internalStats")),
            attempt(ctx.api.get(urls["admin"] + "/stats")),
        )
        return ctx.render(
            "compaction.html",
            fragment=True,
            urls=urls,
            compaction=status,
            compaction_problem=problem,
            internal=internal,
            horizon=(internal or {}).get("compactionHorizon"),
            stats=stats,
        )

    topic_action_routes(router, console)


def topic_action_routes(router: APIRouter, console: Console) -> None:
    @router.get(TOPIC_URL + "/messages", include_in_schema=False)
    @page(console)
    async def peek(ctx: Ctx, tenant: str, namespace: str, topic: str) -> Response:
        return await _peek(ctx, tenant, namespace, topic)

    @router.post(TOPIC_URL, include_in_schema=False)
    @page(console)
    async def act(ctx: Ctx, tenant: str, namespace: str, topic: str) -> Response:
        form = await ctx.form()
        urls = _names(tenant, namespace, topic)
        action = form.get("action", "")
        handler = ACTIONS.get(action)
        if handler is None:
            raise ApiRefused(Problem(422, "Unknown action", f"no action {action!r} on a topic"))
        done, to = await handler(ctx, urls, form)
        return ctx.back(to or urls["page"], ok=done)


async def _topic_page(ctx: Ctx, tenant: str, namespace: str, topic: str) -> Response:
    urls = _names(tenant, namespace, topic)
    (
        stats,
        (internal, internal_problem),
        (compaction, compaction_problem),
        may,
        *policies,
    ) = await asyncio.gather(
        ctx.api.get(urls["admin"] + "/stats"),
        attempt(ctx.api.get(urls["admin"] + "/internalStats")),
        attempt(ctx.api.get(urls["admin"] + "/compaction")),
        ctx.may(**_topic_checks(urls)),
        *(attempt(ctx.api.get(f"{urls['admin']}/{p}")) for p in TOPIC_POLICIES),
    )
    return ctx.render(
        "topic.html",
        may=may,
        tenant=tenant,
        namespace=namespace,
        topic=topic,
        urls=urls,
        stats=stats,
        internal=internal,
        internal_problem=internal_problem,
        compaction=compaction,
        compaction_problem=compaction_problem,
        horizon=(internal or {}).get("compactionHorizon"),
        policies=[(n, v, p) for n, (v, p) in zip(TOPIC_POLICIES, policies, strict=True)],
    )


async def _peek(ctx: Ctx, tenant: str, namespace: str, topic: str) -> Response:
    urls = _names(tenant, namespace, topic)
    query = ctx.request.query_params
    mode = query.get("mode", "auto") if query.get("mode") in MODES else "auto"
    count = max(1, min(PEEK_MAX, _int(query.get("n"), 20)))
    sub, position = query.get("sub", "").strip(), _int(query.get("position"), 0)
    if sub and position > 0:  # examine the n-th unacked message of a subscription
        one = await ctx.api.get(f"{urls['admin']}/subscription/{path(sub)}/position/{position}")
        messages, next_start, start = [one], None, ""
    else:
        start = query.get("start", "earliest").strip() or "earliest"
        read = await ctx.api.get(
            urls["data"] + "/messages",
            start=start,
            max_messages=count,
            read_compacted=query.get("compacted") == "1",
        )
        messages, next_start = read.get("messages", []), read.get("next")
    shown = []
    for m in messages:
        form, text = render_payload(m, mode)
        shown.append({**m, "form": form, "text": text})
    return ctx.render(
        "messages.html",
        tenant=tenant,
        namespace=namespace,
        topic=topic,
        urls=urls,
        messages=shown,
        next_start=next_start,
        start=start,
        mode=mode,
        modes=MODES,
        n=count,
        sub=sub,
        position=position or "",
        compacted=query.get("compacted") == "1",
    )


Urls = dict[str, str]


async def _produce(ctx: Ctx, urls: Urls, form: dict[str, str]) -> tuple[str, str | None]:
    message: dict[str, Any] = {"value": form.get("value", ""), "value_encoding": "text"}
    if form.get("key"):
        message["key"] = form["key"]
    body = {"producer_name": "console", "messages": [message]}
    result = await ctx.api.call("POST", urls["data"] + "/messages", body=body)
    return f"produced {result['results'][0]['message_id']}", None


async def _compact(ctx: Ctx, urls: Urls, form: dict[str, str]) -> tuple[str, str | None]:
    await ctx.api.call("PUT", urls["admin"] + "/compaction")
    return "compaction requested: its status follows below", None


async def _sub_create(ctx: Ctx, urls: Urls, form: dict[str, str]) -> tuple[str, str | None]:
    sub = form.get("sub", "").strip()
    body = {"type": form.get("type") or "exclusive", "initial_position": form.get("position") or "latest"}
    await ctx.api.call("PUT", f"{urls['data']}/subscriptions/{path(sub)}", body=body)
    return f"subscription {sub} created", None


async def _sub_reset(ctx: Ctx, urls: Urls, form: dict[str, str]) -> tuple[str, str | None]:
    sub, to = form.get("sub", ""), form.get("to", "earliest")
    admin = f"{urls['admin']}/subscription/{path(sub)}"
    if to == "latest":
        await ctx.api.call(
            "POST", f"{urls['data']}/subscriptions/{path(sub)}/seek", body={"message_id": "latest"}
        )
    elif to == "earliest":
        await ctx.api.call("POST", f"{admin}/resetcursor/0")
    elif to.endswith("m") and to[:-1].isdigit():
        at = int(time.time() * 1000) - int(to[:-1]) * 60_000
        await ctx.api.call("POST", f"{admin}/resetcursor/{at}")
    else:
        await ctx.api.call("POST", f"{admin}/resetcursor", body={"messageId": to})
    return f"subscription {sub} reset to {to}", None


async def _sub_skip(ctx: Ctx, urls: Urls, form: dict[str, str]) -> tuple[str, str | None]:
    sub, n = form.get("sub", ""), _int(form.get("n"), 1)
    await ctx.api.call("POST", f"{urls['admin']}/subscription/{path(sub)}/skip/{n}")
    return f"subscription {sub}: skipped {n}", None


async def _sub_clear(ctx: Ctx, urls: Urls, form: dict[str, str]) -> tuple[str, str | None]:
    sub = form.get("sub", "")
    await ctx.api.call("POST", f"{urls['admin']}/subscription/{path(sub)}/skip_all")
    return f"subscription {sub}: backlog cleared", None


async def _sub_delete(ctx: Ctx, urls: Urls, form: dict[str, str]) -> tuple[str, str | None]:
    sub = form.get("sub", "")
    await ctx.api.call("DELETE", f"{urls['admin']}/subscription/{path(sub)}")
    return f"subscription {sub} deleted", None


async def _unload(ctx: Ctx, urls: Urls, form: dict[str, str]) -> tuple[str, str | None]:
    await ctx.api.call("PUT", urls["admin"] + "/unload")
    return "topic unloaded: its current ledger is closed", None


async def _delete(ctx: Ctx, urls: Urls, form: dict[str, str]) -> tuple[str, str | None]:
    await ctx.api.call("DELETE", urls["admin"], params={"force": "true" if form.get("force") else "false"})
    namespace_page = urls["page"].replace("/topics/", "/namespaces/", 1).rsplit("/", 1)[0]
    return "topic deleted", namespace_page


async def _policy(ctx: Ctx, urls: Urls, form: dict[str, str]) -> tuple[str, str | None]:
    name, raw = form.get("policy", ""), form.get("value", "").strip()
    if name not in TOPIC_POLICIES:
        raise ApiRefused(Problem(422, "Unknown policy", f"no topic policy {name!r}"))
    url = f"{urls['admin']}/{name}"
    if raw == "":
        await ctx.api.call("DELETE", url)
        return f"{name}: back to the namespace's value", None
    if name == "messageTTL":
        await ctx.api.call("POST", url, params={"messageTTL": raw})
    else:
        try:
            import orjson

            value = orjson.loads(raw)
        except orjson.JSONDecodeError as exc:
            raise ApiRefused(Problem(422, "Not JSON", f"{name}: {exc}")) from exc
        await ctx.api.call("POST", url, body=value)
    return f"{name} set", None


ACTIONS = {
    "produce": _produce,
    "compact": _compact,
    "sub-create": _sub_create,
    "sub-reset": _sub_reset,
    "sub-skip": _sub_skip,
    "sub-clear": _sub_clear,
    "sub-delete": _sub_delete,
    "unload": _unload,
    "delete": _delete,
    "policy": _policy,
}


def _int(value: str | None, default: int) -> int:
    try:
        return int(value or default)
    except ValueError:
        return default
