"""Schema compatibility: Pulsar's strategies over Avro's schema resolution rules.

A topic's schemas are checked as Pulsar checks them. AVRO and JSON schemas (Pulsar's JSON
schema's definition is an Avro record too) are parsed by fastavro and compared by Avro's
resolution rules: a *reader* schema can read what a *writer* schema wrote when

- both are the same primitive, or the writer's promotes to the reader's (int -> long, float,
  double; long -> float, double; float -> double; string <-> bytes);
- both are records of the same name, and every reader field is either in the writer (by name
  or alias, of a readable type) or has a default (writer fields the reader lacks are skipped);
- enums of the same name whose writer symbols are all the reader's (or the reader has a
  default); fixed of the same name and size; arrays and maps whose items / values resolve;
- the writer is a union and each branch resolves against the reader; or the reader is a union
  and the writer resolves against one of its branches.

Strategies (the namespace's `schemaCompatibilityStrategy`, Pulsar's names): ALWAYS_COMPATIBLE;
ALWAYS_INCOMPATIBLE (only the same schema again); BACKWARD (the new schema reads data of the
latest one), FORWARD (the latest reads data of the new one), FULL (both); their _TRANSITIVE
forms check against every version, not only the latest. Other types (STRING, PROTOBUF, ...)
have no definition to resolve: a change of type is incompatible (but under
ALWAYS_COMPATIBLE), a new definition of the same type is compatible.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import fastavro
from fastavro.schema import SchemaParseException

STRATEGIES = (
    "ALWAYS_COMPATIBLE",
    "ALWAYS_INCOMPATIBLE",
    "BACKWARD",
    "FORWARD",
    "FULL",
    "BACKWARD_TRANSITIVE",
    "FORWARD_TRANSITIVE",
    "FULL_TRANSITIVE",
)
DEFAULT_STRATEGY = "FULL"  # Pulsar's broker default
RESOLVED_TYPES = ("AVRO", "JSON")
_PROMOTIONS = {
    "int": {"long", "float", "double"},
    "long": {"float", "double"},
    "float": {"double"},
    "string": {"bytes"},
    "bytes": {"string"},
}


class SchemaDefinitionError(ValueError):
    """The definition is not a schema of its type (not JSON, not a valid Avro schema)."""


def parse(schema_type: str, data: bytes) -> Any:
    """The parsed (expanded) Avro schema of an AVRO or JSON definition; None for other types."""
    if schema_type not in RESOLVED_TYPES:
        return None
    try:
        raw = json.loads(data.decode("utf-8"))
        return fastavro.parse_schema(raw, expand=True, _write_hint=False)
    except (ValueError, SchemaParseException, TypeError, KeyError, AttributeError) as exc:  # JSON, UTF-8 too
        raise SchemaDefinitionError(f"not a valid {schema_type} schema definition: {exc}") from exc


def incompatibility(
    strategy: str, new: tuple[str, bytes], existing: Sequence[tuple[str, bytes]]
) -> str | None:
    """Why the new (type, definition) is refused after the existing ones (oldest first), or
    None when the strategy lets it in."""
    if strategy == "ALWAYS_COMPATIBLE" or not existing:
        return None
    if strategy == "ALWAYS_INCOMPATIBLE":
        return "the namespace's strategy ALWAYS_INCOMPATIBLE takes no new schema"
    against = existing if strategy.endswith("_TRANSITIVE") else existing[-1:]
    base = strategy.removesuffix("_TRANSITIVE")
    new_type, new_data = new
    for old_type, old_data in against:
        if old_type != new_type:
            return f"the schema type changes from {old_type} to {new_type}"
        if new_type not in RESOLVED_TYPES:
            continue
        new_schema, old_schema = parse(new_type, new_data), parse(old_type, old_data)
        if base in ("BACKWARD", "FULL"):
            why = _cannot_read(new_schema, old_schema, "")
            if why is not None:
                return f"{base}: the new schema cannot read data of an existing one: {why}"
        if base in ("FORWARD", "FULL"):
            why = _cannot_read(old_schema, new_schema, "")
            if why is not None:
                return f"{base}: an existing schema cannot read data of the new one: {why}"
    return None


def _kind(schema: Any) -> str:
    if isinstance(schema, list):
        return "union"
    if isinstance(schema, dict):
        kind = schema["type"]
        return kind if isinstance(kind, str) else _kind(kind)
    return str(schema)


def _name(schema: Any) -> str:
    """A named type's unqualified name (Avro matches names without their namespace)."""
    return str(schema.get("name", "")).rsplit(".", 1)[-1]


def _cannot_read(reader: Any, writer: Any, path: str) -> str | None:
    """Why `reader` cannot read data written with `writer` (None: it can)."""
    if isinstance(writer, list):
        for branch in writer:
            why = _cannot_read(reader, branch, path)
            if why is not None:
                return why
        return None
    rk, wk = _kind(reader), _kind(writer)
    if rk == "union":
        if any(_cannot_read(branch, writer, path) is None for branch in reader):
            return None
        return f"{path or 'the value'}: no branch of the reader's union reads {wk}"
    if rk != wk:
        if wk in _PROMOTIONS and rk in _PROMOTIONS[wk]:
            return None
        return f"{path or 'the value'}: {wk} cannot be read as {rk}"
    if rk == "record":
        return _record(reader, writer, path)
    if rk == "enum":
        missing = set(writer["symbols"]) - set(reader["symbols"])
        if _name(reader) != _name(writer):
            return f"{path or 'the value'}: enum {_name(writer)} is not {_name(reader)}"
        if missing and "default" not in reader:
            return f"{path or 'the value'}: symbols {sorted(missing)} are not the reader's"
        return None
    if rk == "fixed":
        if _name(reader) != _name(writer) or reader["size"] != writer["size"]:
            return f"{path or 'the value'}: fixed {_name(writer)} is not {_name(reader)}"
        return None
    if rk == "array":
        return _cannot_read(reader["items"], writer["items"], f"{path}[]")
    if rk == "map":
        return _cannot_read(reader["values"], writer["values"], f"{path}{{}}")
    return None


def _record(reader: Any, writer: Any, path: str) -> str | None:
    if _name(reader) != _name(writer):
        return f"{path or 'the value'}: record {_name(writer)} is not {_name(reader)}"
    written = {f["name"]: f for f in writer["fields"]}
    for field in reader["fields"]:
        names = [field["name"], *field.get("aliases", [])]
        source = next((written[n] for n in names if n in written), None)
        where = f"{path}.{field['name']}" if path else field["name"]
        if source is None:
            if "default" not in field:
                return f"{where}: not in the data and without a default"
            continue
        why = _cannot_read(field["type"], source["type"], where)
        if why is not None:
            return why
    return None
