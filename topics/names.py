"""Tenant, namespace and topic names, partition names, and reader start positions.

A topic is `tenant/namespace/topic`; each part is 1..MAX_PART_LENGTH characters of
[A-Za-z0-9_.=-], and not `.` or `..`. A partitioned topic `t/n/x` with N partitions is stored as
N managed ledgers `t/n/x-partition-{i}`; a non-partitioned topic is one managed ledger named
after the topic.

A reader's `next` token over a partitioned topic carries one position per partition, in
partition order: `after:L:E:B,,L:E:B` (an empty slot: that partition from its beginning).
"""

from __future__ import annotations

import re
from typing import Literal, cast

from managed_ledger.position import MessageId
from topics.api import StartPosition
from topics.errors import InvalidMessageIdError, InvalidNameError

MAX_PART_LENGTH = 128
PERSISTENT_PREFIX = "persistent://"
_CHARS = r"[A-Za-z0-9_=.\-]"
_NOT_DOT = r"[A-Za-z0-9_=\-]"
# The one name rule (Pulsar's characters, at most MAX_PART_LENGTH of them, and neither `.` nor
# `..`): NAME_REGEX to embed in a larger pattern, NAME_PATTERN anchored for one part. It has
# no look-around, so it means the same in Python's `re` and in the Rust engine pydantic uses:
# a first character that is not a dot, or a dot and then a non-dot, or two dots and then more.
NAME_REGEX = (
    rf"(?:{_NOT_DOT}{_CHARS}{{0,{MAX_PART_LENGTH - 1}}}"
    rf"|\.{_NOT_DOT}{_CHARS}{{0,{MAX_PART_LENGTH - 2}}}"
    rf"|\.\.{_CHARS}{{1,{MAX_PART_LENGTH - 2}}})"
)
NAME_PATTERN = f"^{NAME_REGEX}$"
_NAME = re.compile(NAME_REGEX)
_PART = re.compile(rf"{_CHARS}+")
_PARTITION_SUFFIX = re.compile(r"-partition-(\d+)$")


def _check_part(full: str, part: str, what: str) -> None:
    if _NAME.fullmatch(part) is not None:
        return
    if not part:
        raise InvalidNameError(full, f"the {what} is empty")
    if len(part) > MAX_PART_LENGTH:
        raise InvalidNameError(full, f"the {what} is longer than {MAX_PART_LENGTH} characters")
    if _PART.fullmatch(part) is None:
        raise InvalidNameError(full, f"the {what} may only hold letters, digits and _ . = -")
    raise InvalidNameError(full, f"the {what} may not be {part!r}")


def is_name(part: str) -> bool:
    """Whether one part (a tenant, a namespace, a topic) follows the name rule."""
    return _NAME.fullmatch(part) is not None


def validate_tenant(tenant: str) -> str:
    _check_part(tenant, tenant, "tenant")
    return tenant


def validate_namespace(namespace: str) -> str:
    """`tenant/namespace`."""
    parts = namespace.split("/")
    if len(parts) != 2:
        raise InvalidNameError(namespace, "expected tenant/namespace")
    _check_part(namespace, parts[0], "tenant")
    _check_part(namespace, parts[1], "namespace")
    return namespace


def validate_topic(topic: str) -> str:
    """`tenant/namespace/topic` (a `persistent://` prefix is accepted and dropped)."""
    if topic.startswith(PERSISTENT_PREFIX):
        topic = topic[len(PERSISTENT_PREFIX) :]
    parts = topic.split("/")
    if len(parts) != 3:
        raise InvalidNameError(topic, "expected tenant/namespace/topic")
    _check_part(topic, parts[0], "tenant")
    _check_part(topic, parts[1], "namespace")
    _check_part(topic, parts[2], "topic")
    return topic


def validate_subscription(subscription: str) -> str:
    _check_part(subscription, subscription, "subscription")
    return subscription


def namespace_of(topic: str) -> str:
    return topic.rsplit("/", 1)[0]


def tenant_of(name: str) -> str:
    return name.split("/", 1)[0]


def partition_name(topic: str, index: int) -> str:
    return f"{topic}-partition-{index}"


def partition_index(name: str) -> tuple[str, int] | None:
    """(`base topic`, i) when `name` is a partition's name, else None."""
    m = _PARTITION_SUFFIX.search(name)
    if m is None:
        return None
    return name[: m.start()], int(m.group(1))


def ledger_names(topic: str, partitions: int) -> list[str]:
    """The managed ledgers of a topic, in partition order."""
    if partitions == 0:
        return [topic]
    return [partition_name(topic, i) for i in range(partitions)]


def parse_message_id(text: str) -> MessageId:
    try:
        return MessageId.parse(text)
    except ValueError as exc:
        raise InvalidMessageIdError(str(exc)) from exc


def parse_start(text: str) -> StartPosition:
    """A reader's start: `earliest`, `latest`, `L:E:B` (inclusive), `after:L:E:B` (exclusive),
    `time:<ms>` (the first message published at or after it), or a partitioned reader's token
    `after:L:E:B,,L:E:B` (see the module docstring)."""
    if text in ("earliest", "latest"):
        return cast(Literal["earliest", "latest"], text)
    if text.startswith("time:"):
        ms = text[len("time:") :]
        if not ms.isascii() or not ms.isdigit() or len(ms) > 18:
            raise InvalidMessageIdError(f"time:<ms> needs milliseconds since the epoch, got {ms!r}")
        return ("time", int(ms))
    if not text.startswith("after:"):
        return parse_message_id(text)
    rest = text[len("after:") :]
    if "," not in rest:
        return ("after", parse_message_id(rest))
    slots = tuple(parse_message_id(s) if s else None for s in rest.split(","))
    return ("after", slots)


def format_next(slots: list[MessageId | None]) -> str:
    """The `next` token: `after:<id>` for one managed ledger, the slot list for several."""
    if len(slots) == 1:
        assert slots[0] is not None
        return f"after:{slots[0]}"
    return "after:" + ",".join("" if s is None else str(s) for s in slots)
