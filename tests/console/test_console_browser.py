"""The console in a real browser (Debian's chromium through Playwright) against a real
`quire standalone`: every page loads without a console error, what REST produced shows in peek,
compaction started from the page reaches SUCCESS with its horizon, a reset from the page moves
the subscription's backlog, and with authentication on a role without admin rights sees the
API's refusal. Screenshots of the main pages are saved (the `artifacts` fixture prints where)."""

from __future__ import annotations

import base64
import re
from pathlib import Path
from typing import Any

import httpx
import pytest

from app.auth.tokens import create_token
from tests.console.conftest import Standalone, Watched

pytestmark = pytest.mark.timeout(360)
# The compactor starts its Spark session on the first run: on a loaded shared machine that alone
# has taken three minutes (a run on a quiet one is seconds).
COMPACTION_BOUND_MS = 240_000


def produce(
    url: str, topic: str, *messages: dict[str, Any], headers: dict[str, str] | None = None
) -> list[str]:
    r = httpx.post(f"{url}/v1/topics/{topic}/messages", json={"messages": list(messages)}, headers=headers)
    assert r.status_code == 200, r.text
    return [x["message_id"] for x in r.json()["results"]]


def backlog(url: str, topic: str, sub: str, headers: dict[str, str] | None = None) -> int:
    r = httpx.get(f"{url}/admin/v2/persistent/{topic}/stats", headers=headers)
    assert r.status_code == 200, r.text
    return int(r.json()["subscriptions"][sub]["msgBacklog"])


def test_pages_load_without_console_errors(standalone: Standalone, page: Watched, artifacts: Path) -> None:
    url = standalone.url
    produce(
        url, "public/default/prices", {"key": "AAPL", "value": '{"price": 189.2}'}, {"value": "plain text"}
    )
    assert httpx.put(f"{url}/v1/topics/public/default/prices/subscriptions/audit", json={}).status_code == 201
    assert httpx.get(f"{url}/", follow_redirects=False).headers["location"].endswith("/console")
    p = page.page
    shots = {
        "cluster": "/",
        "tenants": "/console/tenants",
        "tenant": "/console/tenants/public",
        "namespace": "/console/namespaces/public/default",
        "topic": "/console/topics/public/default/prices",
        "messages": "/console/topics/public/default/prices/messages",
        "kafka-groups": "/console/kafka/groups",
    }
    for name, path in shots.items():
        response = p.goto(url + path)
        assert response is not None and response.status == 200, (path, response and response.status)
        p.wait_for_load_state("networkidle")
        p.screenshot(path=str(artifacts / f"{name}.png"), full_page=True)
    assert p.url.endswith("/console/kafka/groups")
    p.goto(url + "/console")
    p.wait_for_selector("#cluster-chart svg.chart")  # htmx filled the chart in
    assert p.locator("#bookies").inner_text().count("writable") >= 1
    p.set_viewport_size({"width": 390, "height": 844})  # a phone
    p.goto(url + "/console/topics/public/default/prices")
    p.wait_for_load_state("networkidle")
    p.screenshot(path=str(artifacts / "topic-phone.png"), full_page=True)
    assert page.errors == []


def test_message_produced_over_rest_appears_in_peek(standalone: Standalone, page: Watched) -> None:
    url, topic = standalone.url, "public/default/peek"
    (json_id,) = produce(url, topic, {"key": "k1", "value": '{"order": 7, "items": ["a", "b"]}'})
    (binary_id,) = produce(
        url, topic, {"value": base64.b64encode(b"\x00\xffbin").decode(), "value_encoding": "base64"}
    )
    p = page.page
    p.goto(f"{url}/console/topics/{topic}/messages")
    messages = p.locator("#messages")
    assert json_id in messages.inner_text() and binary_id in messages.inner_text()
    assert '"order": 7' in messages.locator("pre").nth(0).inner_text()  # JSON, pretty-printed
    assert "00 ff 62 69 6e" in messages.locator("pre").nth(1).inner_text()  # binary as hex
    p.select_option("select[name=mode]", "hex")
    p.click("text=Read")
    p.wait_for_url(re.compile(r"mode=hex"))
    assert "7b 22 6f 72 64" in p.locator("#messages pre").nth(0).inner_text()  # '{"ord' as hex
    assert page.errors == []


def test_produce_from_the_page(standalone: Standalone, page: Watched) -> None:
    url, topic = standalone.url, "public/default/typed"
    produce(url, topic, {"value": "first"})
    p = page.page
    p.goto(f"{url}/console/topics/{topic}")
    p.fill("#produce input[name=key]", "sensor-9")
    p.fill("#produce textarea[name=value]", "typed in the console")
    p.click("#produce button")
    p.wait_for_selector(".flash.ok:has-text('produced')")
    read = httpx.get(f"{url}/v1/topics/{topic}/messages", params={"start": "earliest"}).json()["messages"]
    assert [(m["key"], m["value"]) for m in read][-1] == ("sensor-9", "typed in the console")
    assert page.errors == []


def test_compaction_from_the_page_reaches_success(
    standalone: Standalone, page: Watched, artifacts: Path
) -> None:
    url, topic = standalone.url, "public/default/compacted"
    produce(url, topic, *({"key": f"k{i % 3}", "value": f"v{i}"} for i in range(12)))
    p = page.page
    p.goto(f"{url}/console/topics/{topic}")
    assert p.inner_text("#compaction-status") == "NOT_RUN"
    p.click("#compact-now")
    p.wait_for_selector(".flash.ok:has-text('compaction requested')")
    p.wait_for_function(
        "document.querySelector('#compaction-status').textContent === 'SUCCESS'",
        timeout=COMPACTION_BOUND_MS,
        polling=500,
    )
    horizon = p.inner_text("#compaction-horizon")
    assert re.fullmatch(r"\d+:\d+(:\d+)?", horizon), horizon
    p.screenshot(path=str(artifacts / "topic-compacted.png"), full_page=True)
    assert httpx.get(f"{url}/admin/v2/persistent/{topic}/compaction").json()["status"] == "SUCCESS"
    assert page.errors == []


def test_subscription_reset_from_the_page_moves_its_backlog(standalone: Standalone, page: Watched) -> None:
    url, topic = standalone.url, "public/default/replay"
    produce(url, topic, *({"value": f"m{i}"} for i in range(5)))
    r = httpx.put(f"{url}/v1/topics/{topic}/subscriptions/late", json={"initial_position": "latest"})
    assert r.status_code == 201
    assert backlog(url, topic, "late") == 0
    p = page.page
    p.goto(f"{url}/console/topics/{topic}")
    row = p.locator("tr[data-sub=late]")
    assert row.locator(".backlog").inner_text() == "0"
    row.locator("select[name=to]").select_option("earliest")
    row.locator("button:has-text('Reset')").click()
    p.wait_for_selector(".flash.ok:has-text('reset to earliest')")
    assert p.locator("tr[data-sub=late] .backlog").inner_text() == "5"
    assert backlog(url, topic, "late") == 5
    p.locator("tr[data-sub=late] button:has-text('Skip')").click()  # skip 1
    p.wait_for_selector(".flash.ok:has-text('skipped 1')")
    assert backlog(url, topic, "late") == 4
    assert page.errors == []


def test_decommission_button_shows_the_api_guard(standalone: Standalone, page: Watched) -> None:
    p = page.page
    p.on("dialog", lambda dialog: dialog.accept())  # the confirmation htmx asks for
    p.goto(f"{standalone.url}/console")
    p.click("#bookies button:has-text('Decommission')")
    refusal = p.wait_for_selector(".flash.error")
    assert refusal.inner_text().startswith("409 "), refusal.inner_text()  # the only bookie: refused
    assert "writable" in p.inner_text("#bookies")
    assert page.errors == []


def test_a_missing_topic_is_a_page_that_says_so(standalone: Standalone, page: Watched) -> None:
    p = page.page
    p.goto(f"{standalone.url}/console/namespaces/public/default")
    p.fill("#create-topic input[name=name]", "fresh")
    p.click("#create-topic button")
    p.wait_for_url(re.compile(r"/console/topics/public/default/fresh$"))
    p.click("button:has-text('Delete topic')")  # dismissed: nothing happens
    p.on("dialog", lambda dialog: dialog.accept())
    p.click("button:has-text('Delete topic')")
    p.wait_for_selector(".flash.ok:has-text('topic deleted')")
    p.click("a:has-text('Tenants')")  # a boosted link, then a boosted visit of the deleted topic
    p.wait_for_url(re.compile(r"/console/tenants$"))
    p.evaluate("htmx.ajax('GET', '/console/topics/public/default/fresh', {target: 'body'})")
    p.wait_for_selector("h1:has-text('404')")
    assert [e for e in page.errors if "404" not in e] == []


def test_with_auth_a_consumer_role_sees_admin_actions_refused(
    secured_standalone: Standalone, page: Watched
) -> None:
    url, key = secured_standalone.url, secured_standalone.token_key
    assert key is not None
    root = {"Authorization": f"Bearer {create_token('root', key, 'HS256')}"}
    assert httpx.put(
        f"{url}/admin/v2/tenants/acme", json={"adminRoles": ["acme-admin"]}, headers=root
    ).is_success
    assert httpx.put(f"{url}/admin/v2/namespaces/acme/ns", headers=root).is_success
    r = httpx.post(f"{url}/admin/v2/namespaces/acme/ns/permissions/reader", json=["consume"], headers=root)
    assert r.is_success, r.text
    produce(url, "acme/ns/t", {"key": "a", "value": "1"}, headers=root)
    sub = httpx.put(f"{url}/v1/topics/acme/ns/t/subscriptions/sub", json={}, headers=root)
    assert sub.is_success, sub.text
    p = page.page
    p.goto(f"{url}/console/topics/acme/ns/t")
    assert "/console/login" in p.url  # no session: the login page, the token never in a URL
    p.fill("textarea[name=token]", create_token("reader", key, "HS256"))
    p.click("form button:has-text('Log in')")
    p.wait_for_url(re.compile(r"^http://[^/]+/console/topics/acme/ns/t$"))
    assert "reader" in p.inner_text("header")
    assert "token" not in p.url.lower()
    assert p.locator("#compact-now").count() == 0  # not the reader's to use: not shown
    # the permission is taken away while the page is open: the form still shows, the API refuses
    revoked = httpx.delete(f"{url}/admin/v2/namespaces/acme/ns/permissions/reader", headers=root)
    assert revoked.is_success, revoked.text
    p.click("tr[data-sub='sub'] button:has-text('Reset')")
    refusal = p.wait_for_selector(".flash.error")
    text = refusal.inner_text()
    assert text.startswith("403 Forbidden:") and "consume" in text, text
    assert (
        httpx.get(f"{url}/admin/v2/persistent/acme/ns/t/compaction", headers=root).json()["status"]
        == "NOT_RUN"
    )
    p.goto(f"{url}/console")
    assert "Brokers are not shown: 403" in p.inner_text("body")
    p.click("header button:has-text('Log out')")
    p.wait_for_url(re.compile(r"^http://[^/]+/console/login"))
    p.goto(f"{url}/console/topics/acme/ns/t")
    assert "/console/login" in p.url
    assert [e for e in page.errors if "403" not in e] == []  # after the revoke, the polls are refused
