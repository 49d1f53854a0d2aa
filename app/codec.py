"""The hot path's bodies: produce and ack parsed from raw bytes with orjson, messages written out
as plain dicts for orjson.

Why not pydantic here: a model per message costs about three times what orjson alone does, and
produce/consume are the paths users measure. The envelope is checked by hand, and every malformed
part is a 422 that names where it is (`messages[3].value_encoding`). Size limits are not checked
here: topics checks them once (`DataPlane.produce`), so the codec only judges form. Nothing is
written unless the whole batch parses.
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Iterable
from typing import Any

import orjson

from app.errors import ApiError
from managed_ledger.entry_format import Message, StoredMessage
from managed_ledger.position import MessageId
from topics import names
from topics.api import Delivery, SeekTarget, StartPosition
from topics.errors import InvalidArgumentError

_MAX_INT64 = 2**63 - 1


def invalid(detail: str, **extra: Any) -> ApiError:
    return ApiError(422, detail, title="Invalid request", **extra)


def load_json(raw: bytes) -> Any:
    if not raw:
        raise invalid("request body is empty: expected a JSON object")
    try:
        return orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        raise invalid(f"request body is not valid JSON: {exc}") from exc


def _where(i: int) -> str:
    # Built only on the error path: a format per message costs as much as the check itself.
    return f"messages[{i}]"


def _optional_int(m: dict[str, Any], name: str, i: int) -> int | None:
    value = m.get(name)
    if value is None:
        return None
    if type(value) is not int or not 0 <= value <= _MAX_INT64:
        raise invalid(f"{_where(i)}.{name} must be an integer between 0 and {_MAX_INT64} or null")
    return value


def _value_bytes(m: dict[str, Any], i: int) -> bytes:
    value = m.get("value")
    encoding = m.get("value_encoding", "text")
    if value is None:
        if encoding not in ("text", "base64", None):
            raise invalid(f"{_where(i)}.value_encoding must be 'text' or 'base64'")
        return b""
    if type(value) is not str:
        raise invalid(f"{_where(i)}.value must be a string or null")
    if encoding == "text" or encoding is None:
        return value.encode()
    if encoding == "base64":
        try:
            return base64.b64decode(value, validate=True)
        except (binascii.Error, ValueError) as exc:
            raise invalid(f"{_where(i)}.value is not valid base64: {exc}") from exc
    raise invalid(f"{_where(i)}.value_encoding must be 'text' or 'base64'")


def _properties(m: dict[str, Any], i: int) -> dict[str, str] | None:
    props = m.get("properties")
    if props is None:
        return None
    if type(props) is not dict or not all(type(v) is str for v in props.values()):
        raise invalid(f"{_where(i)}.properties must be an object of string values or null")
    return props or None


def _message(m: Any, i: int) -> Message:
    if type(m) is not dict:
        raise invalid(f"{_where(i)} must be an object")
    key = m.get("key")
    if key is not None and type(key) is not str:
        raise invalid(f"{_where(i)}.key must be a string or null")
    value = _value_bytes(m, i)
    if len(m) == 1 and "value" in m:
        return Message(value)  # only a value (the common shape): every other field its default
    return Message(
        value,
        key,
        _properties(m, i),
        _optional_int(m, "event_time", i),
        _optional_int(m, "sequence_id", i),
    )


def parse_produce(raw: bytes) -> tuple[str | None, list[Message]]:
    """Body of POST /messages -> (producer_name, messages), or a 422 ApiError naming the part."""
    body = load_json(raw)
    if type(body) is not dict:
        raise invalid("request body must be a JSON object with a `messages` list")
    producer = body.get("producer_name")
    if producer is not None and type(producer) is not str:
        raise invalid("producer_name must be a string or null")
    items = body.get("messages")
    if type(items) is not list or not items:
        raise invalid("messages must be a non-empty list")
    return producer, [_message(m, i) for i, m in enumerate(items)]


def parse_message_id(text: Any, where: str) -> MessageId:
    if type(text) is not str:
        raise invalid(f"{where} must be a message id string 'ledger:entry:batch_index'")
    try:
        return MessageId.parse(text)
    except ValueError as exc:
        raise invalid(f"{where}: {exc}") from exc


def parse_id_list(body: Any, name: str = "message_ids") -> list[MessageId]:
    ids = body.get(name)
    if type(ids) is not list or not ids:
        raise invalid(f"{name} must be a non-empty list of message ids")
    fast = _plain_ids(ids)
    if fast is not None:
        return fast
    return [parse_message_id(t, f"{name}[{i}]") for i, t in enumerate(ids)]


_new_tuple = tuple.__new__


def _plain_ids(ids: list[Any]) -> list[MessageId] | None:
    """The common case of an ack, about 3x cheaper than MessageId.parse per id: every item a
    plain `L:E:B` of decimal digits (exactly what int() takes). None for anything else, which
    MessageId.parse then judges, so errors and the odd forms it accepts (`L:E`) come out as
    before."""
    out: list[MessageId] = []
    append = out.append
    for text in ids:
        if type(text) is not str:
            return None
        parts = text.split(":")
        if len(parts) != 3:
            return None
        ledger, entry, index = parts
        if not (ledger.isdecimal() and entry.isdecimal() and index.isdecimal()):
            return None
        # tuple.__new__ skips the NamedTuple's generated __new__ (a Python-level call per id).
        append(_new_tuple(MessageId, (int(ledger), int(entry), int(index))))
    return out


def parse_ack(raw: bytes) -> tuple[list[MessageId] | None, MessageId | None]:
    """Body of POST /ack -> (ids, None) or (None, cumulative id)."""
    body = load_json(raw)
    if type(body) is not dict:
        raise invalid("request body must be a JSON object")
    has_ids, has_cumulative = body.get("message_ids") is not None, body.get("cumulative") is not None
    if has_ids == has_cumulative:
        raise invalid("give exactly one of `message_ids` and `cumulative`")
    if has_cumulative:
        return None, parse_message_id(body["cumulative"], "cumulative")
    return parse_id_list(body), None


def parse_start(text: str) -> StartPosition:
    """A reader's `start`: earliest, latest, an id (inclusive), after:<id> (exclusive), or a
    partitioned reader's `next` token (topics.names owns that grammar)."""
    try:
        return names.parse_start(text)
    except InvalidArgumentError as exc:
        raise invalid(f"start: {exc} (expected earliest, latest, an id, after:<id> or time:<ms>)") from exc


def parse_seek(body: Any) -> SeekTarget:
    if type(body) is not dict:
        raise invalid("request body must be a JSON object")
    message_id, timestamp = body.get("message_id"), body.get("timestamp")
    if (message_id is None) == (timestamp is None):
        raise invalid("give exactly one of `message_id` and `timestamp`")
    if timestamp is not None:
        if type(timestamp) is not int or not 0 <= timestamp <= _MAX_INT64:
            raise invalid("timestamp must be a non-negative integer (ms since the epoch)")
        return timestamp
    if message_id in ("earliest", "latest"):
        return message_id  # type: ignore[no-any-return]
    return parse_message_id(message_id, "message_id")


def message_dict(m: StoredMessage, redelivery_count: int, force_base64: bool) -> dict[str, Any]:
    """The API's message object; text when the payload is UTF-8 and base64 was not asked for."""
    return message_dicts([(m, redelivery_count)], force_base64)[0]


def message_dicts(items: Iterable[tuple[StoredMessage, int]], force_base64: bool) -> list[dict[str, Any]]:
    """`message_dict` for many messages in one loop (the consume path: no call per message)."""
    out: list[dict[str, Any]] = []
    append = out.append
    b64encode = base64.b64encode
    for m, redelivery_count in items:
        value = m.value
        text: str | None = None
        if not force_base64:
            try:
                text = value.decode()
            except UnicodeDecodeError:
                text = None
        if text is None:
            text, encoding = b64encode(value).decode("ascii"), "base64"
        else:
            encoding = "text"
        mid = m.message_id
        props = m.properties
        append(
            {
                "message_id": f"{mid[0]}:{mid[1]}:{mid[2]}",
                "key": m.key,
                "value": text,
                "value_encoding": encoding,
                "properties": dict(props) if props else {},
                "event_time": m.event_time,
                "publish_time": m.publish_time,
                "producer_name": m.producer_name,
                "sequence_id": m.sequence_id,
                "redelivery_count": redelivery_count,
            }
        )
    return out


def deliveries_json(deliveries: list[Delivery], force_base64: bool, end_of_topic: bool = False) -> bytes:
    items = [(d.message, d.redelivery_count) for d in deliveries]
    return orjson.dumps({"messages": message_dicts(items, force_base64), "end_of_topic": end_of_topic})
