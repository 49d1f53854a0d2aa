"""Message ids and the connector's offsets.

An offset names, per topic-partition (the managed ledger's name: `t/n/x` or `t/n/x-partition-i`),
the id of the next message to read, `ledger:entry:batch_index`: a start is inclusive, an end
exclusive. `EARLIEST` (-1:0:0) is below every id. The end after a ledger's last entry is
`ledger:(last entry + 1):0`; ids are ordered as triples, so that end is below every message of a
later ledger.
"""

from __future__ import annotations

import json
from typing import NamedTuple

from quire_spark.errors import QuireOptionError


class Id(NamedTuple):
    ledger_id: int
    entry_id: int
    batch_index: int

    def __str__(self) -> str:
        return f"{self.ledger_id}:{self.entry_id}:{self.batch_index}"


EARLIEST = Id(-1, 0, 0)


def parse_id(text: str, what: str) -> Id:
    """`L:E:B` (or `L:E`, the entry's first message) as an Id; QuireOptionError otherwise."""
    parts = str(text).split(":")
    try:
        if len(parts) not in (2, 3):
            raise ValueError(text)
        numbers = [int(p) for p in parts] + ([0] if len(parts) == 2 else [])
    except ValueError:
        raise QuireOptionError(f"{what}: {text!r} is not a message id ledger:entry:batch_index") from None
    if numbers[0] < 0 or numbers[1] < 0 or numbers[2] < 0:
        raise QuireOptionError(f"{what}: {text!r} has a negative part")
    return Id(numbers[0], numbers[1], numbers[2])


def parse_position(text: str) -> tuple[int, int]:
    """internalStats' `L:E` (E may be -1: the ledger has no entry yet)."""
    ledger, _, entry = text.partition(":")
    return int(ledger), int(entry)


def after_entry(ledger_id: int, entry_id: int) -> Id:
    """The end (exclusive) just after entry ledger_id:entry_id."""
    return Id(ledger_id, entry_id + 1, 0)


def parse_offsets_json(text: str, what: str) -> dict[str, str]:
    """A JSON object of topic-partition -> `earliest` | `latest` | message id, checked."""
    try:
        data = json.loads(text)
    except ValueError:
        raise QuireOptionError(f"{what}: not 'earliest', 'latest' or a JSON object: {text!r}") from None
    if not isinstance(data, dict) or not data:
        raise QuireOptionError(f"{what}: a JSON object of topic-partition -> message id is needed")
    out: dict[str, str] = {}
    for name, value in data.items():
        if value in ("earliest", "latest"):
            out[name] = value
        else:
            out[name] = str(parse_id(value, f"{what}[{name}]"))
    return out


def to_json(offsets: dict[str, Id]) -> dict[str, str]:
    return {name: str(i) for name, i in sorted(offsets.items())}


def from_json(offsets: dict[str, str]) -> dict[str, Id]:
    return {name: parse_any(value) for name, value in offsets.items()}


def parse_any(value: str) -> Id:
    """An offset as stored in a checkpoint: the text of an Id (the earliest marker included)."""
    ledger, entry, batch = (int(p) for p in value.split(":"))
    return Id(ledger, entry, batch)
