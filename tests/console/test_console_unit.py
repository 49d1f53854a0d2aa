"""The console without a browser: its formatting, charts and sessions, and its pages served by
the app in process (a real TopicService on in-memory storage, security on): the login, what a
role is refused, CSRF, escaping, and that the console holds no door of its own into the API."""

from __future__ import annotations

import hashlib
import re
from pathlib import Path

import httpx
import pytest

from app.console import present
from app.console.charts import KEEP_S, History, Point, svg
from app.console.sessions import SessionStore
from managed_ledger.metadata.api import GroupOffset
from tests.api.auth_support import SUPER_USER, secured, token
from topics.api import Message

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize(
    ("value", "text"),
    [
        (0, "0"),
        (999, "999"),
        (1234, "1.2 k"),
        (3_400_000, "3.4 M"),
        (2.5, "2.5"),
        (None, "-"),
        (-1500, "-1.5 k"),
    ],
)
def test_counts(value: float | None, text: str) -> None:
    assert present.count(value) == text


@pytest.mark.parametrize(
    ("value", "text"), [(0, "0 B"), (1023, "1023 B"), (1536, "1.5 KiB"), (3_565_158, "3.4 MiB"), (-1, "∞")]
)
def test_sizes(value: int, text: str) -> None:
    assert present.size(value) == text


def test_relative_times() -> None:
    now = 1_000_000_000_000
    assert present.ago(now - 500, now) == "just now"
    assert present.ago(now - 5_000, now) == "5 s ago"
    assert present.ago(now - 3 * 60_000, now) == "3 min ago"
    assert present.ago(now - 2 * 86_400_000, now) == "2 d ago"
    assert present.ago(now + 20_000, now) == "in 20 s"
    assert present.ago(0, now) == "never"


def test_payloads_as_json_text_and_hex() -> None:
    assert present.render_payload({"value": '{"a":[1]}', "value_encoding": "text"}) == (
        "json",
        '{\n  "a": [\n    1\n  ]\n}',
    )
    # a bare number stays text: only objects and arrays are pretty-printed
    assert present.render_payload({"value": "42", "value_encoding": "text"}) == ("text", "42")
    form, text = present.render_payload({"value": "AP8=", "value_encoding": "base64"})
    assert form == "hex" and text.startswith("00000000  00 ff")
    as_hex = present.render_payload({"value": "hi", "value_encoding": "text"}, "hex")
    assert as_hex[0] == "hex" and re.fullmatch(r"00000000  68 69 +hi", as_hex[1])


def test_history_keeps_ten_minutes_and_draws_both_lines() -> None:
    history = History()
    points = []
    for i in range(200):
        points = history.add("cluster", Point(1000.0 + i * 5, i, i / 2, i * 100, i * 50))
    assert points[-1].t - points[0].t <= KEEP_S and len(points) == KEEP_S // 5 + 1
    drawn = svg(points, "bytes")
    assert drawn.count("<polyline") == 2 and "in 19.4 KiB/s" in drawn
    assert "<polyline" not in svg(points[:1], "messages")  # one point is no line


def test_sessions_expire_and_are_capped() -> None:
    store = SessionStore(ttl_s=3600, max_sessions=2)
    first, _, third = store.new(), store.new(), store.new()
    assert store.get(first.sid) is None and store.get(third.sid) is third and len(store) == 2
    assert store.get("made-up") is None and store.get(None) is None
    expiring = SessionStore(ttl_s=-1)
    assert expiring.get(expiring.new().sid) is None


def test_the_shipped_htmx_is_the_pinned_one() -> None:
    script = (REPO / "scripts" / "vendor-htmx.sh").read_text()
    version = re.search(r"^VERSION=(\S+)$", script, re.M)
    digest = re.search(r"^SHA256=(\S+)$", script, re.M)
    assert version and digest
    shipped = REPO / "app" / "console" / "static" / f"htmx-{version[1]}.min.js"
    assert hashlib.sha256(shipped.read_bytes()).hexdigest() == digest[1]


async def login(client: httpx.AsyncClient, role: str) -> str:
    page = await client.get("/console/login")
    csrf = re.search(r'name="csrf" value="([^"]+)"', page.text)
    assert csrf
    before = client.cookies.get("quire_console")
    r = await client.post("/console/login", data={"csrf": csrf[1], "token": token(role), "next": "/console"})
    assert r.status_code == 303 and r.headers["location"] == "/console"
    assert client.cookies.get("quire_console") not in (None, before)  # a new session id at login
    assert "token" not in r.headers["location"] and token(role) not in r.headers.get("set-cookie", "")
    page = await client.get("/console/login")  # the new session's CSRF token
    fresh = re.search(r'name="csrf" value="([^"]+)"', page.text)
    assert fresh and fresh[1] != csrf[1]
    return fresh[1]


async def test_pages_need_a_login_and_show_what_the_role_may_see() -> None:
    async with secured() as s:
        assert (await s.client.get("/")).headers["location"] == "/console"
        r = await s.client.get("/console/topics/acme/ns/t")
        assert r.status_code == 303 and r.headers["location"].startswith("/console/login")
        csrf = await login(s.client, "consumer")
        page = await s.client.get("/console/topics/acme/ns/t")
        assert page.status_code == 200 and 'data-sub="sub"' in page.text
        cluster = await s.client.get("/console")
        assert "Brokers are not shown: <b>403 Forbidden</b>" in cluster.text
        other = await s.client.get("/console/topics/other/ns/t")  # nothing granted there
        assert other.status_code == 403 and "consume" in other.text
        refused = await s.client.post(
            "/console/topics/acme/ns/t",
            data={"csrf": csrf, "action": "compact"},
            headers={"referer": "http://quire/console/topics/acme/ns/t"},
        )
        assert refused.status_code == 303 and refused.headers["location"] == "/console/topics/acme/ns/t"
        shown = await s.client.get("/console/topics/acme/ns/t")
        assert "403 Forbidden:" in shown.text and "not an admin of tenant acme" in shown.text
        assert (await s.client.get("/admin/v2/persistent/acme/ns/t/stats")).status_code == 401  # no token


async def test_forms_need_the_session_csrf_token_and_payloads_are_escaped() -> None:
    async with secured() as s:
        csrf = await login(s.client, "acme-admin")
        forged = await s.client.post("/console/topics/acme/ns/t", data={"action": "compact", "csrf": "x"})
        assert forged.status_code == 303
        assert "Form expired" in (await s.client.get("/console/topics/acme/ns/t")).text
        produce = {"csrf": csrf, "action": "produce", "value": "<script>x()</script>"}
        r = await s.client.post("/console/topics/acme/ns/t", data=produce)
        assert r.status_code == 303
        peek = await s.client.get("/console/topics/acme/ns/t/messages")
        assert "&lt;script&gt;x()&lt;/script&gt;" in peek.text and "<script>x()" not in peek.text
        ok = await s.client.post("/console/topics/acme/ns/t", data={"csrf": csrf, "action": "compact"})
        assert ok.status_code == 303
        assert "compaction requested" in (await s.client.get("/console/topics/acme/ns/t")).text
        unknown = await s.client.post("/console/topics/acme/ns/t", data={"csrf": csrf, "action": "explode"})
        assert unknown.status_code == 303
        assert "no action" in (await s.client.get("/console/topics/acme/ns/t")).text
        assert (await s.client.post("/console/logout", data={"csrf": csrf})).status_code == 303
        assert (await s.client.get("/console")).status_code == 303


def test_the_console_calls_stay_out_of_the_broker_log() -> None:
    import logging

    from app.console.client import CONSOLE_ORIGIN, _NotConsoleCalls

    def record(url: str) -> logging.LogRecord:
        args = ("GET", httpx.URL(url), "HTTP/1.1", 200, "OK")
        return logging.LogRecord(
            "httpx", logging.INFO, __file__, 1, 'HTTP Request: %s %s "%s %d %s"', args, None
        )

    quiet = _NotConsoleCalls()
    assert not quiet.filter(record(f"{CONSOLE_ORIGIN}/admin/v2/brokers"))
    assert quiet.filter(record("http://127.0.0.1:8081/metrics"))  # another broker's: logged


async def test_cluster_rates_say_why_they_are_not_shown() -> None:
    from tests.api.auth_support import security

    async with secured(security(metrics_require_token=True)) as s:
        await login(s.client, "consumer")
        chart = await s.client.get("/console/cluster/chart")
        assert chart.status_code == 200 and "Rates are not shown: <b>403 Forbidden</b>" in chart.text
    async with secured() as s:
        await login(s.client, "consumer")  # /metrics is open: this broker's rates are drawn
        chart = await s.client.get("/console/cluster/chart")
        assert chart.text.count('<svg class="chart"') == 2 and "not shown" not in chart.text


async def test_the_kafka_groups_page_shows_each_partitions_end_and_lag() -> None:
    async with secured() as s:
        await login(s.client, SUPER_USER)  # groups are cluster-wide: a super-user's page
        await s.env.service.produce("acme/ns/t", None, [Message(b"a"), Message(b"b"), Message(b"c")])
        await s.env.service.commit_group_offsets([GroupOffset("billing", "acme/ns/t", 0, 1, "", 1_000)])
        page = await s.client.get("/console/kafka/groups")
        assert page.status_code == 200, page.text
        row = re.search(r"<td>persistent://acme/ns/t</td>(.*?)</tr>", page.text, re.S)
        assert row is not None, page.text
        cells = re.findall(r'<td class="num">([^<]*)</td>', row[1])
        assert cells == ["0", "1", "3", "2"]  # partition, committed, end offset, lag


async def test_a_page_shows_only_the_forms_the_role_may_use() -> None:
    async with secured() as s:
        await login(s.client, "consumer")
        page = (await s.client.get("/console/topics/acme/ns/t")).text
        assert 'id="compact-now"' not in page and "Delete topic" not in page and 'value="unload"' not in page
        assert 'value="policy"' not in page and 'value="produce"' not in page
        assert 'position=1">Peek</a>' in page and 'value="sub-reset"' in page  # a consumer's own
        assert 'value="sub-delete"' in page  # Pulsar lets a consumer unsubscribe (policy.py)
        s.client.cookies.clear()
        await login(s.client, "producer")
        page = (await s.client.get("/console/topics/acme/ns/t")).text
        assert 'value="produce"' in page and "Peek</a>" not in page and 'id="compact-now"' not in page
        s.client.cookies.clear()
        await login(s.client, "acme-admin")
        page = (await s.client.get("/console/topics/acme/ns/t")).text
        for shown in ('id="compact-now"', "Delete topic", 'value="unload"', 'value="policy"', "Peek</a>"):
            assert shown in page, shown
        namespace = (await s.client.get("/console/namespaces/acme/ns")).text
        assert 'id="create-topic"' in namespace and "Delete</button>" in namespace
        tenant = (await s.client.get("/console/tenants/acme")).text
        assert "Create a namespace" in tenant
        s.client.cookies.clear()
        await login(s.client, "consumer")
        namespace = (await s.client.get("/console/namespaces/acme/ns")).text
        assert 'id="create-topic"' not in namespace and "Delete</button>" not in namespace


async def test_decommission_shows_for_a_super_user_only() -> None:
    async with secured() as s:
        console = s.app.state.console
        check = {"decommission": ("POST", "/admin/v2/bookies/_/decommission")}
        assert await console.may("root", check) == {"decommission": True}
        assert await console.may("consumer", check) == {"decommission": False}
        assert await console.may("acme-admin", check) == {"decommission": False}
        bookie = {"bookieId": "b1:3181", "state": "writable", "ledgers": 3, "freeBytes": 1 << 30}
        page = console.env.get_template("cluster.html")
        values = {"session": SessionStore().new(), "auth_on": True, "path": "/console", "flashes": []}
        values |= {"brokers": [], "brokers_problem": None, "bookies": [bookie], "bookies_problem": None}
        values |= {"under": [], "chart_url": "/console/cluster/chart"}
        assert "Decommission</button>" in page.render(**values, may={"decommission": True})
        assert "Decommission</button>" not in page.render(**values, may={"decommission": False})
        await login(s.client, "root")
        tenants = (await s.client.get("/console/tenants")).text
        assert "Create a tenant" in tenants and "Delete</button>" in tenants


async def test_every_form_the_console_checks_is_an_api_operation() -> None:
    from urllib.parse import unquote

    from app.console.topic_pages import _names, _topic_checks

    async with secured() as s:
        gate = s.app.state.gate
        checks = list(_topic_checks(_names("acme", "ns", "t")).values())
        checks.append(("POST", "/admin/v2/bookies/_/decommission"))
        for method, url in checks:
            assert gate._match(method, unquote(url)) is not None, (method, url)


async def test_with_authorization_off_every_form_shows() -> None:
    from tests.api.auth_support import security

    async with secured(security(authorization=False)) as s:
        await login(s.client, "consumer")
        page = (await s.client.get("/console/topics/acme/ns/t")).text
        assert 'id="compact-now"' in page and "Delete topic" in page and 'value="produce"' in page
