"""The Grafana dashboard in grafana/: well formed (unique panel ids, every panel on the data
source variable, every variable it uses defined, panels within Grafana's 24-column grid), and
every series it queries is one that Quire serves (checked against live processes in
tests/test_cli_standalone.py, with `dashboard_series`)."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

DASHBOARD = Path(__file__).resolve().parent.parent / "grafana" / "quire-dashboard.json"
_SERIES = re.compile(r"\bquire_[a-z0-9_]+")
_VARIABLE = re.compile(r"\$(?:\{)?([a-z_]+)")
GRAFANA_VARIABLES = {"__rate_interval", "__interval", "__range"}


def dashboard() -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads(DASHBOARD.read_text())
    return loaded


def _queries(d: dict[str, Any]) -> list[str]:
    return [t["expr"] for p in d["panels"] if p["type"] != "row" for t in p["targets"]]


def dashboard_series() -> set[str]:
    """Every sample name (with its _total, _bucket, _sum or _count) the dashboard queries."""
    d = dashboard()
    texts = _queries(d) + [v["definition"] for v in d["templating"]["list"] if "definition" in v]
    return {name for text in texts for name in _SERIES.findall(text)}


def test_the_dashboard_is_well_formed() -> None:
    d = dashboard()
    assert d["uid"] and d["title"] == "Quire"
    variables = {v["name"] for v in d["templating"]["list"]}
    assert {"datasource", "namespace", "topic"} <= variables
    ids = [p["id"] for p in d["panels"]]
    assert len(ids) == len(set(ids))
    for p in d["panels"]:
        grid = p["gridPos"]
        assert grid["x"] >= 0 and grid["x"] + grid["w"] <= 24, p["title"]
        if p["type"] == "row":
            continue
        assert p["datasource"] == {"type": "prometheus", "uid": "${datasource}"}, p["title"]
        assert p["targets"], p["title"]
        for target in p["targets"]:
            used = set(_VARIABLE.findall(target["expr"]))
            assert used <= variables | GRAFANA_VARIABLES, (p["title"], used - variables)
    assert len(dashboard_series()) >= 30


def test_every_histogram_is_queried_through_its_buckets_or_its_sum_and_count() -> None:
    for name in dashboard_series():
        for suffix in ("_seconds", "_entries"):
            assert not name.endswith(suffix), f"{name}: a histogram has no sample of that name"
