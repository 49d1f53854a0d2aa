"""The connector's options, checked on the driver before any job runs.

Spark hands a data source its options with lower-cased keys; the names below are the documented
spelling (docs/spark.md), compared in lower case. An option this module does not know is refused,
so a misspelt `startingOffset` fails loudly instead of reading from the default.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

from quire_spark.errors import QuireOptionError
from quire_spark.offsets import parse_offsets_json

_READ = (
    "serviceUrl",
    "token",
    "topic",
    "topics",
    "topicsPattern",
    "startingOffsets",
    "endingOffsets",
    "startingTime",
    "readCompacted",
    "failOnDataLoss",
    "maxMessagesPerTrigger",
    "maxEntriesPerPartition",
    "bookieSecret",
)
_WRITE = ("serviceUrl", "token", "topic", "producerName", "exactlyOnce", "messagesPerRequest")
# set by Spark itself, not by the user
_SPARK = ("path", "checkpointlocation")
_TOPIC = re.compile(r"^[A-Za-z0-9_.=-]+/[A-Za-z0-9_.=-]+/[A-Za-z0-9_.=-]+$")


def _known(options: Mapping[str, str], names: tuple[str, ...], what: str) -> dict[str, str]:
    by_lower = {n.lower(): n for n in names}
    out: dict[str, str] = {}
    for key, value in options.items():
        name = by_lower.get(key.lower())
        if name is None:
            if key.lower() in _SPARK:
                continue
            raise QuireOptionError(f"unknown {what} option {key!r}; known: {', '.join(names)}")
        out[name] = str(value)
    return out


def _bool(opts: dict[str, str], name: str, default: bool) -> bool:
    text = opts.get(name)
    if text is None:
        return default
    if text.lower() not in ("true", "false"):
        raise QuireOptionError(f"{name}: {text!r} is not true or false")
    return text.lower() == "true"


def _positive(opts: dict[str, str], name: str, default: int | None) -> int | None:
    text = opts.get(name)
    if text is None:
        return default
    try:
        value = int(text)
    except ValueError:
        raise QuireOptionError(f"{name}: {text!r} is not an integer") from None
    if value <= 0:
        raise QuireOptionError(f"{name}: must be positive, got {value}")
    return value


def _url(opts: dict[str, str]) -> str:
    url = opts.get("serviceUrl", "").rstrip("/")
    if not url.startswith(("http://", "https://")):
        raise QuireOptionError("serviceUrl: the broker's HTTP URL is needed, e.g. http://127.0.0.1:8080")
    return url


def topic_name(name: str, what: str) -> str:
    if not _TOPIC.match(name):
        raise QuireOptionError(f"{what}: {name!r} is not a topic name tenant/namespace/topic")
    return name


@dataclass(frozen=True, slots=True)
class ReadOptions:
    service_url: str
    token: str | None
    topics: tuple[str, ...]  # named topics (partitioned or not), or
    pattern: str | None  # `tenant/namespace/regex`: the namespace's topics whose name matches
    starting: str  # "earliest" | "latest" | JSON text (checked)
    ending: str  # "latest" | JSON text
    starting_time_ms: int | None
    read_compacted: bool
    fail_on_data_loss: bool
    max_messages_per_trigger: int | None
    max_entries_per_partition: int
    bookie_secret: str

    @property
    def namespace(self) -> str:
        assert self.pattern is not None
        return "/".join(self.pattern.split("/", 2)[:2])

    @property
    def topic_regex(self) -> re.Pattern[str]:
        assert self.pattern is not None
        return re.compile(self.pattern.split("/", 2)[2])


def _subscription(opts: dict[str, str]) -> tuple[tuple[str, ...], str | None]:
    given = [n for n in ("topic", "topics", "topicsPattern") if n in opts]
    if len(given) != 1:
        raise QuireOptionError(
            f"exactly one of topic, topics, topicsPattern is needed, got {given or 'none'}"
        )
    if "topicsPattern" in opts:
        pattern = opts["topicsPattern"]
        parts = pattern.split("/", 2)
        if len(parts) != 3 or not all(parts):
            raise QuireOptionError(f"topicsPattern: {pattern!r} is not tenant/namespace/regex")
        try:
            re.compile(parts[2])
        except re.error as exc:
            raise QuireOptionError(f"topicsPattern: bad regex {parts[2]!r}: {exc}") from None
        topic_name(f"{parts[0]}/{parts[1]}/x", "topicsPattern")
        return (), pattern
    names = [n.strip() for n in opts[given[0]].split(",") if n.strip()]
    if not names:
        raise QuireOptionError(f"{given[0]}: no topic named")
    return tuple(topic_name(n, given[0]) for n in names), None


def read_options(options: Mapping[str, str], streaming: bool | None) -> ReadOptions:
    """The read options, checked; `streaming` None: not known yet (what holds for both)."""
    opts = _known(options, _READ, "read")
    topics, pattern = _subscription(opts)
    starting = opts.get("startingOffsets", "latest" if streaming else "earliest")
    if starting not in ("earliest", "latest"):
        parse_offsets_json(starting, "startingOffsets")
    ending = opts.get("endingOffsets", "latest")
    if streaming is True and "endingOffsets" in opts:
        raise QuireOptionError("endingOffsets: a streaming query has no end (a batch read does)")
    if ending == "earliest":
        raise QuireOptionError("endingOffsets: 'earliest' would read nothing; use 'latest' or JSON")
    if ending != "latest":
        parse_offsets_json(ending, "endingOffsets")
    if streaming is False and "maxMessagesPerTrigger" in opts:
        raise QuireOptionError("maxMessagesPerTrigger: only a streaming query has triggers")
    starting_time = None
    if "startingTime" in opts:
        if "startingOffsets" in opts:
            raise QuireOptionError("startingTime and startingOffsets: give one of them")
        try:
            starting_time = int(opts["startingTime"])
        except ValueError:
            raise QuireOptionError(f"startingTime: {opts['startingTime']!r} is not a time in ms") from None
        if starting_time < 0:
            raise QuireOptionError("startingTime: must not be negative")
    return ReadOptions(
        _url(opts),
        opts.get("token"),
        topics,
        pattern,
        starting,
        ending,
        starting_time,
        _bool(opts, "readCompacted", False),
        _bool(opts, "failOnDataLoss", True),
        _positive(opts, "maxMessagesPerTrigger", None),
        _positive(opts, "maxEntriesPerPartition", 20_000) or 20_000,
        opts.get("bookieSecret", ""),
    )


@dataclass(frozen=True, slots=True)
class WriteOptions:
    service_url: str
    token: str | None
    topic: str | None  # the default topic (rows may name theirs in a `topic` column)
    producer_name: str | None  # the stable name prefix; None: one is made per write
    exactly_once: bool
    messages_per_request: int


def write_options(options: Mapping[str, str]) -> WriteOptions:
    opts = _known(options, _WRITE, "write")
    topic = opts.get("topic")
    if topic is not None:
        topic_name(topic, "topic")
    producer = opts.get("producerName")
    if producer is not None and not re.match(r"^[A-Za-z0-9_.:-]{1,200}$", producer):
        raise QuireOptionError(f"producerName: {producer!r} must be 1-200 of A-Z a-z 0-9 _ . : -")
    return WriteOptions(
        _url(opts),
        opts.get("token"),
        topic,
        producer,
        _bool(opts, "exactlyOnce", True),
        _positive(opts, "messagesPerRequest", 500) or 500,
    )
