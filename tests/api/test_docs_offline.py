"""`/docs` and `/redoc` work without internet access: every asset they load is served by the app."""

from __future__ import annotations

import re

import httpx
import pytest

ASSET_URL = re.compile(r"""(?:src|href|spec-url)=["']([^"']+)["']|url: *["']([^"']+)["']""")


@pytest.mark.parametrize(
    ("page", "expected"),
    [
        ("/docs", {"swagger-ui-bundle.js": "javascript", "swagger-ui.css": "text/css"}),
        ("/redoc", {"redoc.standalone.js": "javascript"}),
    ],
)
async def test_docs_load_only_local_assets_and_each_answers(
    client: httpx.AsyncClient, page: str, expected: dict[str, str]
) -> None:
    response = await client.get(page)
    assert response.status_code == 200
    html = response.text
    assert "://" not in html, "the page names an absolute URL (a CDN?)"
    urls = [a or b for a, b in ASSET_URL.findall(html)]
    assert "/openapi.json" in urls
    for name in expected:
        assert any(url.endswith("/" + name) for url in urls), (name, urls)
    for url in urls:
        assert url.startswith("/") and not url.startswith("//"), url
        asset = await client.get(url)
        assert asset.status_code == 200, url
        assert asset.content, url
        for name, content_type in expected.items():
            if url.endswith("/" + name):
                assert content_type in asset.headers["content-type"], (url, asset.headers)


async def test_the_docs_pages_stay_out_of_the_spec(client: httpx.AsyncClient) -> None:
    paths = (await client.get("/openapi.json")).json()["paths"]
    assert not [p for p in paths if p.startswith(("/docs", "/redoc"))]
