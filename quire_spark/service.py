"""The broker's REST API as the connector uses it (httpx, synchronous: Spark calls are blocking).

The driver asks for topics, partitions and each managed ledger's ledgers (`internalStats`, which
lists every ledger with its ensembles and quorums, the last confirmed entry and the compaction
horizon); executors read the compacted view through the reader and produce through
`POST /messages`. A redirect to the topic's owner is followed (any broker answers any topic).
"""

from __future__ import annotations

from typing import Any

import httpx

from quire_spark.errors import QuireServiceError

TIMEOUT_S = 30.0


class Service:
    def __init__(self, url: str, token: str | None) -> None:
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        self.http = httpx.Client(base_url=url, headers=headers, timeout=TIMEOUT_S, follow_redirects=True)

    def close(self) -> None:
        self.http.close()

    def __enter__(self) -> Service:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def call(self, method: str, path: str, ok: tuple[int, ...] = (200,), **kwargs: Any) -> httpx.Response:
        try:
            r = self.http.request(method, path, **kwargs)
        except httpx.HTTPError as exc:
            raise QuireServiceError(f"{method} {path}: {exc}") from exc
        if r.status_code not in ok:
            detail = r.text[:500]
            if r.headers.get("content-type", "").startswith("application/problem+json"):
                detail = r.json().get("detail") or r.json().get("title") or detail
            raise QuireServiceError(f"{method} {path}: {r.status_code} {detail}")
        return r

    def partitions(self, topic: str) -> int | None:
        """The topic's partition count (0: not partitioned); None when there is no such topic."""
        r = self.call("GET", f"/admin/v2/persistent/{topic}/partitions", ok=(200, 404))
        if r.status_code == 404:
            return None
        return int(r.json()["partitions"])

    def namespace_topics(self, namespace: str) -> list[str]:
        """`t/n/x` of each topic of the namespace (partitions named by their topic)."""
        names = self.call("GET", f"/admin/v2/persistent/{namespace}").json()
        return sorted({n.removeprefix("persistent://") for n in names})

    def internal_stats(self, topic: str) -> dict[str, dict[str, Any]]:
        """managed ledger name -> its internalStats (one entry unless partitioned)."""
        data = self.call("GET", f"/admin/v2/persistent/{topic}/internalStats").json()
        if "metadata" in data:
            return dict(data["partitions"])
        return {topic: data}

    def read_page(self, ml_name: str, start: str, read_compacted: bool, max_messages: int) -> dict[str, Any]:
        params = {
            "start": start,
            "max_messages": max_messages,
            "read_compacted": str(read_compacted).lower(),
            "value_encoding": "base64",
        }
        body: dict[str, Any] = self.call("GET", f"/v1/topics/{ml_name}/messages", params=params).json()
        return body

    def produce(self, topic: str, body: dict[str, Any]) -> list[dict[str, Any]]:
        results: list[dict[str, Any]] = self.call("POST", f"/v1/topics/{topic}/messages", json=body).json()[
            "results"
        ]
        return results
