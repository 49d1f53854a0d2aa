"""Throughput over the last minutes, drawn on the server as SVG.

The console has no time-series store: each time a page's chart is polled (htmx, every
POLL_S seconds) it reads the current rates from the API and appends them to a short history
kept in this process, per scope (the cluster, or one topic). The SVG is plain markup, so a
chart costs no JavaScript library and renders with the page.
"""

from __future__ import annotations

import time
from collections import deque
from dataclasses import dataclass
from html import escape

from app.console.present import count, size

POLL_S = 5
KEEP_S = 10 * 60
MAX_SCOPES = 500
WIDTH, HEIGHT, PAD = 600, 120, 4


@dataclass(frozen=True, slots=True)
class Point:
    t: float
    msg_in: float
    msg_out: float
    bytes_in: float
    bytes_out: float


class History:
    """A few minutes of rate samples per scope; the oldest scopes are forgotten past MAX_SCOPES."""

    def __init__(self) -> None:
        self._series: dict[str, deque[Point]] = {}

    def add(self, scope: str, point: Point) -> list[Point]:
        series = self._series.pop(scope, None) or deque()
        self._series[scope] = series  # most recently used last
        if series and point.t - series[-1].t < 1.0:
            series.pop()  # two polls within a second (two tabs): keep the newer one
        series.append(point)
        while series and point.t - series[0].t > KEEP_S:
            series.popleft()
        while len(self._series) > MAX_SCOPES:
            del self._series[next(iter(self._series))]
        return list(series)


def now_point(msg_in: float, msg_out: float, bytes_in: float, bytes_out: float) -> Point:
    return Point(time.time(), msg_in, msg_out, bytes_in, bytes_out)


def _polyline(points: list[Point], values: list[float], top: float, t0: float) -> str:
    coords = []
    for p, v in zip(points, values, strict=True):
        x = PAD + (p.t - t0) / KEEP_S * (WIDTH - 2 * PAD)
        y = HEIGHT - PAD - (v / top if top else 0) * (HEIGHT - 2 * PAD)
        coords.append(f"{x:.1f},{y:.1f}")
    return " ".join(coords)


def svg(points: list[Point], kind: str) -> str:
    """One chart: `messages` (msg/s in and out) or `bytes` (B/s in and out), last KEEP_S seconds."""
    if kind == "messages":
        ins, outs, fmt, unit = [p.msg_in for p in points], [p.msg_out for p in points], count, "msg/s"
    else:
        ins, outs, fmt, unit = [p.bytes_in for p in points], [p.bytes_out for p in points], size, "/s"
    top = max([*ins, *outs, 0.0]) * 1.15
    t0 = (points[-1].t if points else time.time()) - KEEP_S
    label = f"{kind}: in {fmt(ins[-1]) if ins else '-'}{unit}, out {fmt(outs[-1]) if outs else '-'}{unit}"
    parts = [
        f'<svg class="chart" viewBox="0 0 {WIDTH} {HEIGHT}" preserveAspectRatio="none" role="img" '
        f'aria-label="{escape(label)}">',
        f'<rect x="0" y="0" width="{WIDTH}" height="{HEIGHT}" class="chart-bg"/>',
    ]
    for frac in (0.25, 0.5, 0.75):
        y = PAD + frac * (HEIGHT - 2 * PAD)
        parts.append(f'<line x1="0" x2="{WIDTH}" y1="{y:.1f}" y2="{y:.1f}" class="chart-grid"/>')
    if len(points) >= 2:
        parts.append(f'<polyline class="chart-in" points="{_polyline(points, ins, top, t0)}"/>')
        parts.append(f'<polyline class="chart-out" points="{_polyline(points, outs, top, t0)}"/>')
    parts.append("</svg>")
    return "".join(parts)


def legend(points: list[Point], kind: str) -> dict[str, str]:
    last = points[-1] if points else Point(0, 0, 0, 0, 0)
    if kind == "messages":
        return {"in": count(last.msg_in) + " msg/s", "out": count(last.msg_out) + " msg/s"}
    return {"in": size(last.bytes_in) + "/s", "out": size(last.bytes_out) + "/s"}
