"""Prometheus text as the tests read it: every sample by name and labels, parsed with
prometheus_client's own parser (so that the text is valid exposition format, not only a match)."""

from __future__ import annotations

import httpx
from prometheus_client.parser import text_string_to_metric_families


def samples(text: str) -> dict[str, float]:
    """`name` or `name{label="value",...}` (labels sorted) -> value, for every sample."""
    out: dict[str, float] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            labels = ",".join(f'{k}="{v}"' for k, v in sorted(sample.labels.items()))
            out[f"{sample.name}{{{labels}}}" if labels else sample.name] = sample.value
    return out


def scrape(port: int, host: str = "127.0.0.1", headers: dict[str, str] | None = None) -> dict[str, float]:
    r = httpx.get(f"http://{host}:{port}/metrics", headers=headers, timeout=10)
    assert r.status_code == 200, r.text
    return samples(r.text)
