"""How the console writes numbers, sizes, times and message payloads (Jinja filters)."""

from __future__ import annotations

import base64
import binascii
import time
from typing import Any

import orjson

_COUNT_UNITS = ("", " k", " M", " G", " T", " P")
_BYTE_UNITS = ("B", "KiB", "MiB", "GiB", "TiB", "PiB")


def count(value: Any) -> str:
    """1234 → '1.2 k', 3400000 → '3.4 M'; a rate keeps one decimal below 10 ('2.5')."""
    if value is None:
        return "-"
    number = float(value)
    if number < 0:
        return "-" + count(-number)
    unit = 0
    while number >= 1000 and unit < len(_COUNT_UNITS) - 1:
        number /= 1000
        unit += 1
    if unit == 0:
        return f"{number:.1f}".rstrip("0").rstrip(".") if number != int(number) else str(int(number))
    return f"{number:.1f}{_COUNT_UNITS[unit]}"


def size(value: Any) -> str:
    """Bytes in binary units: 3565158 → '3.4 MiB'; negative (Pulsar's 'unlimited') → '∞'."""
    if value is None:
        return "-"
    number = float(value)
    if number < 0:
        return "∞"
    unit = 0
    while number >= 1024 and unit < len(_BYTE_UNITS) - 1:
        number /= 1024
        unit += 1
    return f"{int(number)} B" if unit == 0 else f"{number:.1f} {_BYTE_UNITS[unit]}"


def ago(epoch_ms: Any, now_ms: float | None = None) -> str:
    """Epoch milliseconds as a time relative to now: 'just now', '5 s ago', '3 min ago', 'in 20 s'."""
    if not epoch_ms or epoch_ms <= 0:
        return "never"
    now = time.time() * 1000 if now_ms is None else now_ms
    delta_s = (now - float(epoch_ms)) / 1000
    future = delta_s < 0
    delta_s = abs(delta_s)
    if delta_s < 2:
        return "just now"
    for limit, div, unit in ((60, 1, "s"), (3600, 60, "min"), (86400, 3600, "h"), (float("inf"), 86400, "d")):
        if delta_s < limit:
            text = f"{int(delta_s // div)} {unit}"
            return f"in {text}" if future else f"{text} ago"
    raise AssertionError("unreachable")


def when(epoch_ms: Any) -> str:
    """The absolute time, for a title attribute beside `ago`."""
    if not epoch_ms or epoch_ms <= 0:
        return ""
    return time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(float(epoch_ms) / 1000))


def payload_bytes(message: dict[str, Any]) -> bytes:
    value = message.get("value") or ""
    if message.get("value_encoding") == "base64":
        try:
            return base64.b64decode(value)
        except (binascii.Error, ValueError):
            return b""
    return str(value).encode()


def hexdump(data: bytes, width: int = 16) -> str:
    """Offset, hex bytes and printable ASCII, `xxd`-style."""
    lines = []
    for offset in range(0, len(data), width):
        chunk = data[offset : offset + width]
        hex_part = " ".join(f"{b:02x}" for b in chunk)
        text = "".join(chr(b) if 32 <= b < 127 else "." for b in chunk)
        lines.append(f"{offset:08x}  {hex_part:<{width * 3}} {text}")
    return "\n".join(lines) or "(empty payload)"


def render_payload(message: dict[str, Any], mode: str = "auto") -> tuple[str, str]:
    """(the form shown: text, json or hex; the payload written in it). `auto` pretty-prints JSON,
    shows other UTF-8 as text and anything else as hex."""
    data = payload_bytes(message)
    text = message.get("value") if message.get("value_encoding") != "base64" else None
    if mode in ("auto", "json") and text is not None:
        try:
            parsed = orjson.loads(text)
        except orjson.JSONDecodeError:
            parsed = None
        else:
            if isinstance(parsed, dict | list):
                return "json", orjson.dumps(parsed, option=orjson.OPT_INDENT_2).decode()
    if mode in ("auto", "text", "json") and text is not None:
        return "text", str(text) if text else "(empty payload: a tombstone for its key)"
    return "hex", hexdump(data)


FILTERS = {"num": count, "size": size, "ago": ago, "when": when}
