"""Pulsar's compatibility strategies over Avro's resolution rules (`topics.schema_compat`): a
table of (strategy, existing definitions, new definition) -> refused or not."""

from __future__ import annotations

import json

import pytest

from topics.schema_compat import SchemaDefinitionError, incompatibility, parse


def record(*fields: dict[str, object], name: str = "R") -> bytes:
    return json.dumps({"type": "record", "name": name, "fields": list(fields)}).encode()


A = {"name": "a", "type": "int"}
A_LONG = {"name": "a", "type": "long"}
A_STRING = {"name": "a", "type": "string"}
A_OPTIONAL = {"name": "a", "type": ["null", "int"], "default": None}
B = {"name": "b", "type": "string"}
B_DEFAULT = {"name": "b", "type": "string", "default": ""}
B_ALIASED = {"name": "c", "type": "string", "aliases": ["b"]}
COLOR = {"name": "color", "type": {"type": "enum", "name": "Color", "symbols": ["RED", "GREEN"]}}
COLOR_MORE = {"name": "color", "type": {"type": "enum", "name": "Color", "symbols": ["RED", "GREEN", "BLUE"]}}
TAGS = {"name": "tags", "type": {"type": "array", "items": "int"}}
TAGS_LONG = {"name": "tags", "type": {"type": "array", "items": "long"}}

CASES = [
    # (strategy, existing, new, refused)
    ("BACKWARD", [record(A)], record(A, B), True),  # a new field without default: old data lacks it
    ("BACKWARD", [record(A)], record(A, B_DEFAULT), False),
    ("BACKWARD", [record(A, B)], record(A), False),  # a field removed: skipped
    ("BACKWARD", [record(A)], record(A_LONG), False),  # int data read as long
    ("BACKWARD", [record(A_LONG)], record(A), True),
    ("BACKWARD", [record(A)], record(A_STRING), True),
    ("BACKWARD", [record(A)], record(A_OPTIONAL), False),  # a union reader takes the int branch
    ("BACKWARD", [record(A, B)], record(A, B_ALIASED), False),  # by alias
    ("BACKWARD", [record(A)], record(A, name="Other"), True),  # another record
    ("BACKWARD", [record(COLOR)], record(COLOR_MORE), False),
    ("BACKWARD", [record(COLOR_MORE)], record(COLOR), True),  # BLUE in old data
    ("BACKWARD", [record(TAGS)], record(TAGS_LONG), False),
    ("FORWARD", [record(A)], record(A, B), False),  # old readers skip b
    ("FORWARD", [record(A, B)], record(A), True),  # old readers need b
    ("FORWARD", [record(A, B_DEFAULT)], record(A), False),
    ("FORWARD", [record(A)], record(A_LONG), True),
    ("FULL", [record(A)], record(A, B_DEFAULT), False),
    ("FULL", [record(A)], record(A, B), True),
    ("FULL", [record(A, B)], record(A), True),
    ("FULL", [record(A)], record(A_LONG), True),
    # transitive: every version, not only the latest
    ("BACKWARD", [record(A, B), record(A, B_DEFAULT), record(A)], record(A, B), True),
    ("FORWARD", [record(A), record(A, B)], record(A), True),
    ("FORWARD_TRANSITIVE", [record(A, B), record(A, B_DEFAULT)], record(A), True),
    ("FORWARD", [record(A, B), record(A, B_DEFAULT)], record(A), False),
    ("ALWAYS_COMPATIBLE", [record(A)], record(A_STRING), False),
    ("ALWAYS_INCOMPATIBLE", [record(A)], record(A, B_DEFAULT), True),
    ("FULL", [], record(A), False),  # the first schema: nothing to check against
]


@pytest.mark.parametrize(("strategy", "existing", "new", "refused"), CASES)
def test_strategies(strategy: str, existing: list[bytes], new: bytes, refused: bool) -> None:
    why = incompatibility(strategy, ("AVRO", new), [("AVRO", e) for e in existing])
    assert (why is not None) == refused, why


def test_json_schemas_are_avro_records_too_and_a_type_change_is_refused() -> None:
    assert incompatibility("FULL", ("JSON", record(A, B)), [("JSON", record(A))]) is not None
    assert incompatibility("FULL", ("JSON", record(A)), [("AVRO", record(A))]) is not None
    assert incompatibility("BACKWARD", ("STRING", b""), [("STRING", b"")]) is None
    assert incompatibility("ALWAYS_COMPATIBLE", ("STRING", b""), [("AVRO", record(A))]) is None


@pytest.mark.parametrize(
    "data", [b"{nope", b'{"type": "nonsense"}', b"\xff\xfe", b"[1, 2]", b'"unknown_type"']
)
def test_a_bad_definition_is_refused(data: bytes) -> None:
    with pytest.raises(SchemaDefinitionError):
        parse("AVRO", data)
