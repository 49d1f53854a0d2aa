"""What every `quire admin` command shares: its arguments (names, sizes, durations, the broker's
URL), the group-and-command builder, and reading an answer (its JSON, or Refused with the problem)."""

from __future__ import annotations

import argparse
import json
import re
from collections.abc import Callable, Sequence
from typing import Any

from quire_client import Client
from quire_client.types import Response

from topics.errors import InvalidNameError
from topics.names import validate_namespace, validate_tenant, validate_topic

DEFAULT_NAMESPACE = "public/default"  # of a bare topic name, as in pulsar-admin

TopicName = tuple[str, str, str]
Handler = Callable[[Client, argparse.Namespace], Any]


class Refused(Exception):
    """The server answered with an error: one line for stderr."""


def result(response: Response[Any]) -> Any:
    """The JSON body of a 2xx answer (None when it has none), else Refused with the problem."""
    status = int(response.status_code)
    if 200 <= status < 300:
        return json.loads(response.content) if response.content.strip() else None
    raise Refused(problem_line(status, response.content))


def problem_line(status: int, content: bytes) -> str:
    """`404 Topic not found: topic public/default/x does not exist`: the status, then the
    problem's title and detail (or the body as text when it is not a problem), on one line."""
    try:
        body = json.loads(content)
    except ValueError:
        body = None
    if isinstance(body, dict) and ("title" in body or "detail" in body):
        title = str(body.get("title") or f"HTTP {status}")
        detail = body.get("detail")
        text = f"{title}: {detail}" if detail else title
    else:
        text = content.decode(errors="replace").strip() or "no detail"
    return " ".join(f"{status} {text}".split())


class Commands:
    """The commands of one group (`quire admin topics ...`); each also takes --url and --timeout."""

    def __init__(self, groups: Any, name: str, help: str, common: argparse.ArgumentParser) -> None:
        parser = groups.add_parser(name, help=help, description=help)
        self._commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
        self._common = common

    def add(self, name: str, run: Handler, help: str, aliases: Sequence[str] = ()) -> argparse.ArgumentParser:
        p: argparse.ArgumentParser = self._commands.add_parser(
            name, help=help, description=help, aliases=list(aliases), parents=[self._common]
        )
        p.set_defaults(run=run)
        return p

    def on_topic(
        self, name: str, run: Handler, help: str, aliases: Sequence[str] = ()
    ) -> argparse.ArgumentParser:
        p = self.add(name, run, help, aliases)
        p.add_argument("topic", type=topic_arg, help="persistent://tenant/namespace/topic")
        return p


# --- arguments ---------------------------------------------------------------------------------


def topic_arg(text: str) -> TopicName:
    """`persistent://t/n/x`, `t/n/x` or `x` (in public/default); `non-persistent://` is refused."""
    if "://" in text and not text.startswith("persistent://"):
        raise argparse.ArgumentTypeError(f"{text!r}: only persistent:// topics exist in Quire")
    name = text.removeprefix("persistent://")
    if "/" not in name:
        name = f"{DEFAULT_NAMESPACE}/{name}"
    try:
        tenant, namespace, topic = validate_topic(name).split("/")
    except InvalidNameError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    return tenant, namespace, topic


def namespace_arg(text: str) -> tuple[str, str]:
    try:
        tenant, namespace = validate_namespace(text).split("/")
    except InvalidNameError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    return tenant, namespace


def tenant_arg(text: str) -> str:
    try:
        return validate_tenant(text)
    except InvalidNameError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def url_arg(text: str) -> str:
    if re.match(r"https?://[^/\s]", text) is None:
        raise argparse.ArgumentTypeError(f"{text!r} is not an http:// or https:// URL")
    return text.rstrip("/")


_SIZE_UNITS = {"": 1, "k": 1024, "m": 1024**2, "g": 1024**3, "t": 1024**4}
_TIME_UNITS_MS = {
    "ms": 1,
    "": 1000,  # a bare number is seconds, as in pulsar-admin
    "s": 1000,
    "m": 60_000,
    "h": 3_600_000,
    "d": 86_400_000,
    "w": 7 * 86_400_000,
    "y": 365 * 86_400_000,
}


def size_arg(text: str) -> int:
    """Bytes: `4096`, `10k`, `10M`, `16G`, `3T` (powers of 1024)."""
    found = re.fullmatch(r"(\d+)\s*([kmgt]?)b?", text.strip(), re.IGNORECASE)
    if found is None:
        raise argparse.ArgumentTypeError(f"{text!r} is not a size: e.g. 4096, 10M, 16G, 3T")
    return int(found[1]) * _SIZE_UNITS[found[2].lower()]


def duration_arg(text: str) -> int:
    """Milliseconds: `30` (seconds, as in pulsar-admin), `500ms`, `100m`, `3h`, `2d`, `5w`, `1y`."""
    found = re.fullmatch(r"(\d+)\s*(ms|[smhdwy]?)", text.strip(), re.IGNORECASE)
    if found is None:
        raise argparse.ArgumentTypeError(f"{text!r} is not a duration: e.g. 30s, 100m, 3h, 2d")
    return int(found[1]) * _TIME_UNITS_MS[found[2].lower()]


def or_unlimited(parse: Callable[[str], int]) -> Callable[[str], int]:
    """`parse`, or -1 for unlimited (retention's size and time)."""

    def parse_or_unlimited(text: str) -> int:
        return -1 if text.strip() == "-1" else parse(text)

    return parse_or_unlimited


def positive_int(text: str) -> int:
    if not text.strip().isdigit() or int(text) < 1:
        raise argparse.ArgumentTypeError(f"{text!r} is not a positive integer")
    return int(text)


def count_arg(text: str) -> int:
    if not text.strip().isdigit():
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of 0 or more")
    return int(text)


def ratio_arg(text: str) -> float:
    """A share from 0 to 1: `0.5`, `0`, `1`."""
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not 0.0 <= value <= 1.0:  # NaN fails this too
        raise argparse.ArgumentTypeError(f"{text!r} is not a ratio from 0 to 1")
    return value
