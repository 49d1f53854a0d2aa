"""The hot path's codec: its shortcuts agree with the general parsers, errors included."""

from __future__ import annotations

from typing import Any

import orjson
import pytest

from app.codec import parse_id_list, parse_message_id, parse_produce
from app.errors import ApiError
from managed_ledger.entry_format import Message


@pytest.mark.parametrize(
    "text",
    [
        "1:2:3",
        "007:1:0",
        "1:2",
        "٣:1:0",
        "²:1:0",
        "-1:0:0",
        "1:x:0",
        " 1:2:3",
        "1:2:3:4",
        "",
        "1::3",
        5,
        None,
    ],
)
def test_plain_id_parsing_agrees_with_message_id_parse(text: object) -> None:
    """codec's cheap path for plain `L:E:B` ids gives what MessageId.parse gives, errors included."""

    def outcome(parse: Any) -> object:
        try:
            return parse()
        except ApiError as exc:
            return (exc.status, exc.detail)

    fast = outcome(lambda: parse_id_list({"message_ids": ["9:9:9", text]}))
    slow = outcome(lambda: [parse_message_id(t, f"message_ids[{i}]") for i, t in enumerate(["9:9:9", text])])
    assert fast == slow


@pytest.mark.parametrize(
    ("message", "expected"),
    [
        ({"value": "x"}, Message(b"x")),
        ({"key": "k"}, Message(b"", "k")),
        ({"event_time": 5}, Message(b"", event_time=5)),
        ({"value_encoding": "base64"}, Message(b"")),
        ({"properties": {"a": 1}}, 422),
        ({"sequence_id": -1}, 422),
    ],
)
def test_one_field_messages_keep_that_field(message: dict[str, object], expected: object) -> None:
    """codec's shortcut for value-only messages must not drop or skip checking any other field."""
    try:
        _, messages = parse_produce(orjson.dumps({"messages": [message]}))
    except ApiError as exc:
        assert exc.status == expected
        return
    assert messages == [expected]
